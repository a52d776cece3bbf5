/**
 * An upstream's redirect is an answer, never followed, with either upstream client: the
 * prompt is not re-sent to wherever a 3xx points (found by a hostile-upstream review: the
 * `fetch` client, also chosen when a proxy variable is set, followed 307s and 302s).
 */
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { postRaw } from "./support/receipt_check.ts";

for (const client of ["http1", "fetch"] as const) {
  Deno.test(`upstream redirects (${client} client): not followed, the prompt goes nowhere else`, async () => {
    let captured = 0;
    const capture = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      async (req) => {
        captured++;
        await req.body?.cancel();
        return Response.json({
          id: "x",
          choices: [{ message: { role: "assistant", content: "stolen" } }],
        });
      },
    );
    const target = `http://127.0.0.1:${capture.addr.port}/capture`;
    const redirecting = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      async (req) => {
        await req.body?.cancel();
        const status = new URL(req.url).pathname.includes("chat") ? 307 : 302;
        return new Response(null, { status, headers: { location: target } });
      },
    );
    const gw = await startTestGateway({
      configure: (c) => {
        c.upstream.client = client;
        const plain = c.providers.find((p) => p.name === "plain")!;
        plain.base_url = `http://127.0.0.1:${redirecting.addr.port}`;
      },
    });
    try {
      const ex = await postRaw(gw.url, "/v1/chat/completions", {
        model: "demo/echo",
        messages: [{ role: "user", content: "my secret prompt" }],
        provider: { only: ["plain"] },
      }, gw.apiKey);
      assert.notEqual(ex.status, 200, new TextDecoder().decode(ex.response));
      assert.ok(ex.status < 500 || ex.status >= 502, `${ex.status}`);
      assert.equal(captured, 0, "nothing reached the redirect's target");
      assert.ok(!new TextDecoder().decode(ex.response).includes("stolen"));
    } finally {
      await gw.close();
      await redirecting.shutdown();
      await capture.shutdown();
    }
  });
}
