/**
 * Seeded random-mutation fuzzing of the five inference request schemas
 * against the real gateway: valid bodies mutated in type, value, key and
 * structure. Every answer must come within a deadline and be below 500; a 4xx
 * must be in its route's envelope; a 200 (the mutation stayed valid) is fine.
 * Set FUZZ_COUNT / FUZZ_SEED to fuzz longer or replay a seed.
 */
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { assertEnvelope, envelopeFor, probe } from "./support/http_probe.ts";
import { mutateBody, seededRandom } from "./support/seeded_mutation.ts";

const COUNT = Number(Deno.env.get("FUZZ_COUNT") ?? 300);
const SEED = Number(Deno.env.get("FUZZ_SEED") ?? 20_240_611);

const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }];

const SCHEMAS: Record<string, unknown> = {
  "/v1/chat/completions": {
    model: "demo/echo",
    messages: [
      { role: "system", content: "be brief" },
      { role: "user", content: [{ type: "text", text: "hello there" }] },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "lookup", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "c1", content: "42" },
    ],
    temperature: 0.5,
    max_tokens: 32,
    stream: false,
    stop: ["\n\n"],
    tools,
    tool_choice: "auto",
    provider: { zdr: false },
  },
  "/v1/completions": {
    model: "demo/echo",
    prompt: ["hello there"],
    max_tokens: 16,
    temperature: 1,
    stream: false,
    echo: false,
    stop: "\n",
  },
  "/v1/embeddings": {
    model: "demo/embed-large",
    input: ["alpha", "beta"],
    dimensions: 256,
    encoding_format: "float",
  },
  "/v1/messages": {
    model: "demo/echo",
    max_tokens: 32,
    system: [{ type: "text", text: "be brief" }],
    messages: [
      { role: "user", content: [{ type: "text", text: "hello there" }] },
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "t1", name: "lookup", input: { q: "x" } }],
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "42" }] },
    ],
    temperature: 0.5,
    stop_sequences: ["\n\n"],
    tools: [{ name: "lookup", input_schema: { type: "object" } }],
    stream: false,
  },
  "/v1/responses": {
    model: "demo/echo",
    input: [
      { role: "user", content: [{ type: "input_text", text: "hello there" }] },
      { type: "function_call", call_id: "c1", name: "lookup", arguments: "{}" },
      { type: "function_call_output", call_id: "c1", output: "42" },
    ],
    instructions: "be brief",
    max_output_tokens: 32,
    temperature: 0.5,
    tools: [{ type: "function", name: "lookup", parameters: { type: "object" } }],
    stream: false,
  },
};

Deno.test("fuzz: mutated request bodies never get a 5xx, a hang or a bad envelope", async () => {
  const gw = await startTestGateway();
  try {
    const key = await gw.newKey({
      tier: "enterprise",
      rpm: 1_000_000,
      tpm: 1_000_000_000,
      credits: 1_000_000,
    });
    const failures: string[] = [];
    // Each schema as given (non-streamed), then the streamed variants at half the count.
    const runs: [string, unknown, number][] = [
      ...Object.entries(SCHEMAS).map(([p, v]): [string, unknown, number] => [p, v, COUNT]),
      ...Object.entries(SCHEMAS).filter(([p]) => p !== "/v1/embeddings").map((
        [p, v],
      ): [string, unknown, number] => [p, { ...(v as object), stream: true }, COUNT >> 1]),
    ];
    for (const [path, valid, count] of runs) {
      // The unmutated body is valid: the fuzz starts from a request that works.
      const base = await probe(`${gw.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(valid),
      });
      assert.equal(base.status, 200, `${path} valid body: ${base.text.slice(0, 200)}`);

      const rnd = seededRandom(SEED ^ (path.length * 7919 + count));
      const bodies = Array.from({ length: count }, () => mutateBody(valid, rnd));
      const statuses = new Map<number, number>();
      let next = 0;
      const worker = async () => {
        while (next < bodies.length) {
          const i = next++;
          const body = bodies[i];
          const shown = typeof body === "string" ? body : new TextDecoder().decode(body);
          const label = `${path} #${i} ${shown.slice(0, 300)}`;
          try {
            const p = await probe(`${gw.url}${path}`, {
              method: "POST",
              headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
              body: body as BodyInit,
            }, 10_000);
            statuses.set(p.status, (statuses.get(p.status) ?? 0) + 1);
            assert.ok(p.status < 500, `${label} → ${p.status} ${p.text.slice(0, 200)}`);
            if (p.status >= 400) assertEnvelope(p, envelopeFor(path), `${label} → ${p.status}`);
            else assert.ok(p.text.length > 0, `${label}: empty 200`);
          } catch (e) {
            failures.push(e instanceof Error ? e.message.split("\n")[0] : String(e));
          }
        }
      };
      await Promise.all(Array.from({ length: 8 }, worker));
      // Both outcomes occur, so the mutations explore valid and invalid space alike.
      const ok = statuses.get(200) ?? 0;
      const bad = [...statuses].filter(([s]) => s >= 400).reduce((n, [, c]) => n + c, 0);
      assert.ok(ok > 0 && bad > 0, `${path}: ${JSON.stringify([...statuses])}`);
    }
    assert.deepEqual(failures.slice(0, 20), [], `${failures.length} fuzz failures`);
  } finally {
    await gw.close();
  }
});
