/**
 * CORS as a real browser enforces it (issue #17 item 4): a page served from
 * another loopback origin calls the gateway with `fetch` in headless
 * Chromium. From an allowed origin the call (preflighted: it carries
 * Authorization and JSON) succeeds and the script can read the receipt id,
 * the ACI headers, Server-Timing and the rate-limit headers; from an origin
 * that is not allowed the browser refuses it.
 */
import assert from "node:assert/strict";
import { launchChromium } from "./support/chromium.ts";
import { startTestGateway } from "./support/gateway.ts";

Deno.test("CORS in headless Chromium: allowed origin reads the exposed headers, others are refused", async () => {
  // The app's page, on its own origin (another port: another origin).
  const app = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      new Response("<!doctype html><title>app</title>", {
        headers: { "content-type": "text/html" },
      }),
  );
  const appOrigin = `http://127.0.0.1:${app.addr.port}`;
  const gw = await startTestGateway({
    configure: (c) => {
      c.cors.allowed_origins = [appOrigin];
    },
  });
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    await page.goto(`${appOrigin}/`);
    const call = (url: string, key: string) =>
      page.evaluate(
        async (url: string, key: string) => {
          try {
            const r = await fetch(`${url}/v1/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
              body: JSON.stringify({
                model: "demo/echo",
                messages: [{ role: "user", content: "hi" }],
              }),
            });
            const names = [
              "x-receipt-id",
              "x-aci-version",
              "x-aci-keyset-digest",
              "server-timing",
              "x-ratelimit-remaining",
              "x-ratelimit-remaining-tokens",
              "content-type",
            ];
            const body = await r.json();
            return {
              status: r.status,
              headers: Object.fromEntries(names.map((n) => [n, r.headers.get(n)])),
              object: body.object ?? null,
            };
          } catch (e) {
            return { error: String(e) };
          }
        },
        url,
        key,
      );

    const ok = await call(gw.url, gw.apiKey) as {
      status: number;
      headers: Record<string, string | null>;
      object: string;
    };
    assert.equal(ok.status, 200, JSON.stringify(ok));
    assert.equal(ok.object, "chat.completion");
    assert.match(ok.headers["x-receipt-id"] ?? "", /^rcpt-/);
    assert.equal(ok.headers["x-aci-version"], "aci/1");
    assert.match(ok.headers["x-aci-keyset-digest"] ?? "", /^sha256:/);
    assert.match(ok.headers["server-timing"] ?? "", /gw;dur=/);
    assert.match(ok.headers["x-ratelimit-remaining"] ?? "", /^\d+$/);
    assert.match(ok.headers["x-ratelimit-remaining-tokens"] ?? "", /^\d+$/);

    // The same script against a gateway that does not list this origin: refused by the browser.
    const closed = await startTestGateway();
    try {
      const refused = await call(closed.url, closed.apiKey) as { error?: string };
      assert.match(refused.error ?? "", /TypeError|Failed to fetch/);
    } finally {
      await closed.close();
    }
  } finally {
    await browser.close();
    await gw.close();
    await app.shutdown();
  }
});
