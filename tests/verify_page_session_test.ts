/**
 * The /verify page follows a receipt's session only when the receipt's
 * signature verified and its `session_id` is 64 lowercase hex (issue #25
 * item 11): a pasted receipt must not choose which endpoint the page calls
 * with the user's key. Real headless Chromium (Debian's `chromium`), real
 * gateway on loopback; every request the page makes is recorded.
 */
import assert from "node:assert/strict";
import { launchChromium } from "./support/chromium.ts";
import { startTestGateway } from "./support/gateway.ts";
import { fetchReceipt, postRaw } from "./support/receipt_check.ts";

Deno.test("the /verify page follows a session id only from a signed receipt, and only as 64 hex", async () => {
  const gw = await startTestGateway();
  const browser = await launchChromium();
  try {
    const ex = await postRaw(gw.url, "/v1/chat/completions", {
      model: "demo/private",
      provider: { aci_verified: true },
      messages: [{ role: "user", content: "follow my session" }],
    }, gw.apiKey);
    assert.equal(ex.status, 200);
    const receipt = (await fetchReceipt(gw.url, ex.receiptId!, gw.apiKey)).body as {
      event_log: Record<string, unknown>[];
    };
    const sid = receipt.event_log.find((e) => e.type === "upstream.verified")!.session_id;
    assert.match(String(sid), /^[0-9a-f]{64}$/);
    const withSession = (s: string) =>
      JSON.stringify({
        ...receipt,
        event_log: receipt.event_log.map((e) =>
          e.type === "upstream.verified" ? { ...e, session_id: s } : e
        ),
      });

    const page = await browser.newPage();
    const paths: string[] = [];
    page.on("request", (r) => paths.push(new URL(r.url()).pathname));
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    const run = async (receiptText: string) => {
      await page.goto(`${gw.url}/verify`, { waitUntil: "load" });
      await page.waitForSelector("body[data-state=ready]", { timeout: 15_000 });
      await page.click("#allow-dev");
      await page.$eval("#receipt", (el, v) => {
        (el as unknown as { value: string }).value = v as string;
      }, receiptText);
      await page.type("#api-key", gw.apiKey);
      paths.length = 0;
      await page.click("#verify");
      await page.waitForSelector("body[data-state=done]", { timeout: 30_000 });
      const session = await page.$eval(
        "#checks li[data-check='session.id']",
        (li) => ({ ok: li.className === "pass", text: li.textContent ?? "" }),
      );
      return { session, paths: [...paths] };
    };

    // The signed receipt as served: its session is fetched and checked.
    const good = await run(JSON.stringify(receipt));
    assert.equal(good.session.ok, true, good.session.text);
    assert.ok(good.paths.includes(`/v1/aci/sessions/${sid}`), JSON.stringify(good.paths));

    // A path in place of the id (the signature no longer holds): nothing but the report.
    for (const forged of ["../../key", "../../usage", String(sid).toUpperCase(), "ab".repeat(32)]) {
      const bad = await run(withSession(forged));
      assert.deepEqual(
        bad.paths.filter((p) => p.startsWith("/v1/") && p !== "/v1/aci/attestation"),
        [],
        `${forged}: the page called ${JSON.stringify(bad.paths)}`,
      );
      assert.equal(bad.session.ok, false, `${forged}: ${bad.session.text}`);
      assert.match(bad.session.text, /not fetched|not followed/);
    }
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    await gw.close();
  }
});
