/**
 * Headless Chromium for the browser tests (Debian's `chromium`, driven by
 * puppeteer-core). Never skipped: without Chromium the tests fail, pointing
 * at `bash .ci/run`, which installs it.
 */
import puppeteer, { type Browser } from "puppeteer-core";

export function chromiumPath(): string {
  for (const p of ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]) {
    try {
      if (Deno.statSync(p).isFile) return p;
    } catch { /* next */ }
  }
  throw new Error(
    "no Chromium found: the browser tests need Debian's chromium package " +
      "(`bash .ci/run` installs it; or apt-get install -y chromium)",
  );
}

/** `extraArgs`: more Chromium switches (e.g. trusting one test server's key). */
export function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  return puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    // Root in CI containers: Chromium's sandbox needs user namespaces it may not have.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", ...extraArgs],
  });
}
