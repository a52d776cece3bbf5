/**
 * Hostile upstreams (issue #19), each a real loopback server misbehaving on
 * purpose, driven through the real gateway with the real OpenAI SDK.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";

const HOSTILE = new URL("./support/hostile_upstream.ts", import.meta.url).pathname;

/** Starts the hostile upstream in its own process; resolves with its port. */
async function spawnHostile(mode: string): Promise<{ port: number; stop(): Promise<void> }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net", HOSTILE, mode],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("hostile upstream exited before listening");
    out += value;
  }
  return {
    port: Number(out.trim()),
    async stop() {
      child.kill("SIGTERM");
      await reader.cancel().catch(() => {});
      await child.status;
    },
  };
}

for (const mode of ["extra-nagle", "extra-nodelay"]) {
  Deno.test(`cross-request delivery: an unsolicited extra answer never reaches another key (${mode})`, async () => {
    const up = await spawnHostile(mode);
    const gw = await startTestGateway({
      configure: (c) => {
        c.providers.find((p) => p.name === "plain")!.base_url = `http://127.0.0.1:${up.port}`;
      },
    });
    try {
      const keys = { A: gw.apiKey, B: await gw.newKey() };
      const clients = Object.fromEntries(
        Object.entries(keys).map((
          [k, apiKey],
        ) => [k, new OpenAI({ baseURL: gw.baseURL, apiKey, maxRetries: 0 })]),
      ) as Record<"A" | "B", OpenAI>;
      let own = 0;
      let sameKeyStale = 0;
      let crossKey = 0;
      let failed = 0;
      const one = async (k: "A" | "B", round: number, i: number) => {
        const prompt = `key ${k} round ${round} ${i}`;
        try {
          const res = await clients[k].chat.completions.create({
            model: "demo/vision", // the plain provider only
            messages: [{ role: "user", content: prompt }],
          });
          const got = res.choices[0].message.content ?? "";
          if (got === prompt) own++;
          else if (got.startsWith(`key ${k} `)) sameKeyStale++;
          else crossKey++;
        } catch (e) {
          assert.ok(e instanceof OpenAI.APIError, String(e));
          assert.equal(e.status, 502, "a desynchronised connection fails as upstream_error");
          failed++;
        }
      };
      for (let round = 0; round < 100; round++) {
        await Promise.all([0, 1, 2].flatMap((i) => [one("A", round, i), one("B", round, i)]));
      }
      console.log({ mode, own, sameKeyStale, crossKey, failed });
      assert.equal(crossKey, 0, "one key's completion reached another key");
      // A late duplicate that lands after the same key's next request was written cannot be
      // told from that request's answer in HTTP/1.1 (docs/decisions.md, #19): counted, not 0.
      assert.equal(own + sameKeyStale + failed, 600);
      assert.ok(own > 0);
    } finally {
      await gw.close();
      await up.stop();
    }
  });
}
