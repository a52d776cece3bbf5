/**
 * The /verify page in a real headless Chromium (Debian's `chromium`, driven
 * by puppeteer-core; `.ci/run` installs it when missing). Never skipped: no
 * Chromium is a failure. A real receipt passes every check, a flipped
 * response byte fails the hash check, and a receipt from another gateway's
 * keyset shows why it fails. Screenshots are kept; their paths are printed.
 */
import assert from "node:assert/strict";
import { launchChromium } from "./support/chromium.ts";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { fetchReceipt, postRaw } from "./support/receipt_check.ts";

async function exchange(gw: TestGateway) {
  const ex = await postRaw(gw.url, "/v1/chat/completions", {
    model: "demo/private",
    provider: { aci_verified: true },
    messages: [{ role: "user", content: "verify me in a browser" }],
  }, gw.apiKey);
  assert.equal(ex.status, 200);
  return ex;
}

interface Row {
  name: string;
  ok: boolean;
  /** Passed on development evidence only (shown amber). */
  dev: boolean;
  text: string;
}

Deno.test("the /verify page checks receipts in headless Chromium", async () => {
  const dir = await Deno.makeTempDir({ prefix: "verify-page-" });
  const gw = await startTestGateway({ kvPath: `${dir}/gw.kv` });
  const other = await startTestGateway();
  let restarted: TestGateway | null = null;
  const browser = await launchChromium();
  try {
    const ex = await exchange(gw);
    await Deno.writeFile(`${dir}/request.json`, ex.request);
    await Deno.writeFile(`${dir}/response.json`, ex.response);
    const flipped = ex.response.slice();
    flipped[Math.floor(flipped.length / 2)] ^= 0x01;
    await Deno.writeFile(`${dir}/response-flipped.json`, flipped);
    const foreignEx = await exchange(other);
    const foreign = (await fetchReceipt(other.url, foreignEx.receiptId!, other.apiKey)).body;

    const page = await browser.newPage();
    await page.setViewport({ width: 1100, height: 1400 });
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(String(e)));

    const verify = async (
      label: string,
      fill: (p: typeof page) => Promise<void>,
    ): Promise<Row[]> => {
      await page.goto(`${(restarted ?? gw).url}/verify`, { waitUntil: "load" });
      await page.waitForSelector("body[data-state=ready]", { timeout: 15_000 });
      await page.click("#allow-dev"); // the test gateway's quotes are development quotes
      await fill(page);
      await page.click("#verify");
      await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
      const rows = await page.$$eval("#checks li", (lis) =>
        lis.map((li) => ({
          name: li.getAttribute("data-check") ?? "",
          ok: li.className !== "fail",
          dev: li.className === "dev",
          text: li.textContent ?? "",
        })));
      const shot = `${dir}/${label}.png`;
      await page.screenshot({ path: shot, fullPage: true });
      console.log(`verify page screenshot (${label}): ${shot}`);
      return rows;
    };
    const byName = (rows: Row[]) => new Map(rows.map((r) => [r.name, r]));

    // 1. A real receipt, fetched by id with the key, and the exact bodies: every check passes.
    const good = await verify("real-receipt", async (p) => {
      await p.type("#receipt-id", ex.receiptId!);
      await p.type("#api-key", gw.apiKey);
      await (await p.$("#request-file"))!.uploadFile(`${dir}/request.json`);
      await (await p.$("#response-file"))!.uploadFile(`${dir}/response.json`);
      await p.click("#require-verified");
    });
    const g = byName(good);
    for (
      const name of [
        "report.nonce",
        "report.workload_keyset_digest",
        "report.report_data",
        "receipt.keyset_digest",
        "receipt.signature",
        "receipt.request_body_hash",
        "receipt.response_body_hash",
        "receipt.upstream_verified",
        "webcrypto.ed25519_signature",
        "webcrypto.request_body_hash",
        "webcrypto.response_body_hash",
        "session.id",
        "receipt.keyset_used",
        "log.checkpoint",
        "log.inclusion",
      ]
    ) {
      assert.ok(g.has(name), `${name} ran`);
    }
    assert.deepEqual(good.filter((r) => !r.ok), [], "every check passes");
    assert.equal(g.get("report.hardware_evidence")?.dev, true, "development evidence is amber");
    assert.equal(g.get("receipt.signature")?.dev, false);
    assert.match(
      g.get("log.inclusion")!.text,
      /receipt digest is leaf \d+ of the tree of size \d+/,
    );
    assert.match(
      g.get("log.checkpoint")!.text,
      /checkpoint dev\.gateway\.local\/v1\/aci\/log size/,
    );
    assert.match(
      await page.$eval("#checkpoint", (e) => e.textContent ?? ""),
      /^dev\.gateway\.local\/v1\/aci\/log\n\d+\n\S+\n\n\u2014 /,
      "the page shows the checkpoint it used",
    );
    // Development evidence and a refuted tee_attested are never green: amber, saying why.
    assert.match(
      await page.$eval("#verdict", (e) => `${e.className}: ${e.textContent}`),
      /^dev: development: this proves nothing about hardware \(the upstream session's tee_attested is refuted/,
    );
    assert.deepEqual(
      await page.$$eval(".node", (ns) => ns.map((n) => n.className)),
      ["node dev", "node pass", "node pass", "node dev", "node pass"],
      "report (development) → keyset → receipt → session (refuted) → log",
    );

    // 2. One flipped response byte: the hash checks fail, the signature still holds.
    const bad = byName(
      await verify("flipped-byte", async (p) => {
        await p.type("#receipt-id", ex.receiptId!);
        await p.type("#api-key", gw.apiKey);
        await (await p.$("#request-file"))!.uploadFile(`${dir}/request.json`);
        await (await p.$("#response-file"))!.uploadFile(`${dir}/response-flipped.json`);
      }),
    );
    assert.equal(bad.get("receipt.response_body_hash")?.ok, false);
    assert.match(bad.get("receipt.response_body_hash")!.text, /records sha256:.*hash to sha256:/);
    assert.equal(bad.get("webcrypto.response_body_hash")?.ok, false);
    assert.equal(bad.get("receipt.request_body_hash")?.ok, true);
    assert.equal(bad.get("receipt.signature")?.ok, true);

    // 3. A receipt from another gateway's keyset, pasted: the page says why it fails.
    const alien = byName(
      await verify("foreign-keyset", async (p) => {
        await p.$eval(
          "#receipt",
          (el, v) => {
            (el as unknown as { value: string }).value = v as string;
          },
          JSON.stringify(foreign),
        );
      }),
    );
    assert.equal(alien.get("receipt.keyset_digest")?.ok, false);
    assert.match(
      alien.get("receipt.keyset_digest")!.text,
      /receipt cites sha256:\w+, attested keyset is sha256:\w+/,
    );
    assert.equal(alien.get("receipt.signature")?.ok, false);
    assert.match(alien.get("receipt.signature")!.text, /not in receipt_signing_keys/);
    assert.equal(alien.get("report.workload_keyset_digest")?.ok, true, "the report itself is fine");

    // 4. After a restart (a new keyset on the same store), the old receipt still verifies:
    // the page finds its archived keyset itself and says which it used.
    const oldDigest = ex.headers.get("x-aci-keyset-digest")!;
    await gw.close();
    restarted = await startTestGateway({ kvPath: `${dir}/gw.kv` });
    const later = byName(
      await verify("after-restart", async (p) => {
        await p.type("#receipt-id", ex.receiptId!);
        await p.type("#api-key", gw.apiKey);
      }),
    );
    assert.deepEqual([...later.values()].filter((r) => !r.ok), [], "every check passes");
    assert.match(
      later.get("receipt.keyset_used")!.text,
      new RegExp(`archived keyset ${oldDigest}`),
    );
    assert.equal(later.get("receipt.signature")?.ok, true);
    assert.equal(later.get("log.inclusion")?.ok, true);
    assert.deepEqual(errors, [], "no script errors in the page");
  } finally {
    await browser.close();
    await gw.close().catch(() => {});
    await restarted?.close();
    await other.close();
  }
});

Deno.test("the /verify page and script are served with a strict CSP", async () => {
  const gw = await startTestGateway();
  try {
    const html = await fetch(`${gw.url}/verify`);
    const text = await html.text();
    assert.equal(html.status, 200);
    assert.match(html.headers.get("content-type") ?? "", /text\/html/);
    const csp = html.headers.get("content-security-policy") ?? "";
    assert.match(csp, /script-src 'self'/);
    assert.match(csp, /connect-src 'self'/);
    assert.match(text, /What trusting this page means/);
    assert.match(text, /deno@2.9.6 task verify --receipt/);
    assert.match(text, /a saved report file works\s+too, with <code>--nonce<\/code>/);
    const js = await fetch(`${gw.url}/verify/app.js`);
    const body = await js.text();
    assert.match(js.headers.get("content-type") ?? "", /javascript/);
    // The page names the script's digest; it is the digest of what is served.
    const digest = /id="script-sha256">([0-9a-f]{64})</.exec(text)?.[1];
    const actual = Array.from(
      new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body))),
    ).map((b) => b.toString(16).padStart(2, "0")).join("");
    assert.equal(digest, actual);
  } finally {
    await gw.close();
  }
});
