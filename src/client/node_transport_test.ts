import assert from "node:assert/strict";
import { nodeTransport } from "./node_transport.ts";

Deno.test("nodeTransport: a request whose answer never comes ends at its signal", async () => {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      await new Promise((r) => req.signal.addEventListener("abort", r, { once: true }));
      return new Response(null, { status: 504 });
    },
  );
  const t = nodeTransport();
  try {
    const t0 = Date.now();
    await assert.rejects(
      t.send(new URL(`http://127.0.0.1:${server.addr.port}/v1/aci/receipts/x`), {
        method: "GET",
        headers: new Headers(),
        signal: AbortSignal.timeout(300),
      }, null),
    );
    assert.ok(Date.now() - t0 < 5_000, `${Date.now() - t0} ms`);
  } finally {
    t.close();
    await server.shutdown();
  }
});
