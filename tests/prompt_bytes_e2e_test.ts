/**
 * #27, cost per prompt byte: the upstream body is spliced from the client's
 * bytes (src/http/json_splice.ts). On the wire (a recording proxy between the
 * gateway and the upstream): the members the gateway did not change keep the
 * client's spelling, the whole parses to the value the gateway meant, and the
 * receipt's `request.forwarded` hash is of those bytes, `request_modified`
 * present exactly when they differ from what the client sent.
 */
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { type RecordingProxy, startRecordingProxy } from "./support/recording_proxy.ts";
import { plainRoutesOnly } from "./support/route_config.ts";
import {
  asRecord,
  events as eventsOf,
  fetchReceipt,
  postRaw,
  sha256Prefixed,
} from "./support/receipt_check.ts";
import type { GatewayConfig } from "../src/config/schema.ts";

const dec = new TextDecoder();

async function withWire(
  configure: (c: GatewayConfig) => void,
  fn: (base: string, apiKey: string, proxy: RecordingProxy) => Promise<void>,
): Promise<void> {
  let proxy: RecordingProxy | null = null;
  const gw = await startTestGateway({
    configure: (c) => {
      plainRoutesOnly(c);
      configure(c);
      const plain = c.providers.find((p) => p.name === "plain");
      assert.ok(plain);
      proxy = startRecordingProxy(plain.base_url);
      plain.base_url = proxy.url;
    },
  });
  try {
    assert.ok(proxy);
    await fn(gw.url, gw.apiKey, proxy);
  } finally {
    await gw.close();
    await (proxy as RecordingProxy | null)?.close();
  }
}

/** The last inference request the upstream got (the gateway also asks it for its models). */
function lastPost(proxy: RecordingProxy) {
  const ex = proxy.exchanges.findLast((e) => e.path.endsWith("/completions"));
  assert.ok(ex, "no inference request reached the upstream");
  return ex;
}

type Ev = { type: string; body_hash?: string };
async function events(base: string, apiKey: string, id: string | null): Promise<Ev[]> {
  assert.ok(id);
  const r = await fetchReceipt(base, id, apiKey);
  assert.equal(r.status, 200);
  return eventsOf(asRecord(r.body, "receipt")) as Ev[];
}

// Escapes, a raw astral character, `\/`, odd whitespace and a `1.0`: spellings JSON.stringify
// would not reproduce.
const MESSAGES = '[ {"role":"user",\n "content":"caf\\u00e9 \\/ \\ud83d\\ude00 😀 \\"quoted\\" ' +
  "x".repeat(70_000) + '"} ]';
const body = (model: string, extra = "") =>
  `{ "model" : "${model}",\t"messages":${MESSAGES}, "temperature": 1.0, "max_tokens" : 16${extra} }`;

Deno.test("a changed member is rewritten, the rest is the client's bytes, and the receipt says so", async () => {
  await withWire(() => {}, async (base, apiKey, proxy) => {
    const client = body("demo/echo", ', "provider": {"allow_fallbacks": true}');
    const res = await postRaw(base, "/v1/chat/completions", client, apiKey);
    assert.equal(res.status, 200, dec.decode(res.response));
    const ex = lastPost(proxy);
    const wire = dec.decode(ex.request);
    assert.ok(wire.includes(`"messages":${MESSAGES}`), "messages spelled as the client did");
    assert.ok(wire.includes('"temperature": 1.0'));
    const sent = JSON.parse(wire);
    const asked = JSON.parse(client);
    assert.deepStrictEqual(sent, {
      model: "demo-chat", // the route's upstream model
      messages: asked.messages,
      temperature: 1,
      max_tokens: 16,
      // `provider` is the gateway's: never forwarded.
    });
    const evs = await events(base, apiKey, res.receiptId);
    const fwd = evs.find((e) => e.type === "request.forwarded");
    assert.equal(fwd?.body_hash, sha256Prefixed(ex.request));
    assert.ok(evs.some((e) => e.type === "transparency.request_modified"));
  });
});

Deno.test("a body the gateway does not change is forwarded byte for byte, hashed once", async () => {
  // A model whose id is its upstream's model name: nothing to change.
  await withWire((c) => {
    const m = c.models.find((x) => x.id === "demo/echo");
    assert.ok(m);
    c.models.push({
      ...m,
      id: "demo-chat",
      aliases: [],
      routes: [{ provider: "plain", model: "demo-chat" }],
    });
  }, async (base, apiKey, proxy) => {
    const client = body("demo-chat");
    const res = await postRaw(base, "/v1/chat/completions", client, apiKey);
    assert.equal(res.status, 200, dec.decode(res.response));
    assert.deepEqual(lastPost(proxy).request, res.request);
    const evs = await events(base, apiKey, res.receiptId);
    const received = evs.find((e) => e.type === "request.received")?.body_hash;
    assert.equal(received, sha256Prefixed(res.request));
    assert.equal(evs.find((e) => e.type === "request.forwarded")?.body_hash, received);
    assert.ok(!evs.some((e) => e.type === "transparency.request_modified"));
  });
});

Deno.test("streamed, translated and refused bodies still reach the upstream as meant", async () => {
  await withWire(() => {}, async (base, apiKey, proxy) => {
    // Streamed: stream_options gains include_usage; the other members are the client's bytes.
    const streamed = body(
      "demo/echo",
      ', "stream": true, "stream_options": {"include_obfuscation": false}',
    );
    const s = await postRaw(base, "/v1/chat/completions", streamed, apiKey);
    assert.equal(s.status, 200);
    const sw = dec.decode(lastPost(proxy).request);
    assert.ok(sw.includes(`"messages":${MESSAGES}`));
    assert.deepStrictEqual(JSON.parse(sw).stream_options, { include_usage: true });

    // Anthropic → chat: translated, so serialized; the prompt arrives intact.
    const anth = `{"model":"demo/echo","max_tokens":16,"messages":${MESSAGES}}`;
    const a = await postRaw(base, "/v1/messages", anth, apiKey, {
      "anthropic-version": "2023-06-01",
    });
    assert.equal(a.status, 200, dec.decode(a.response));
    const aw = JSON.parse(dec.decode(lastPost(proxy).request));
    assert.equal(aw.messages.at(-1).content, JSON.parse(anth).messages[0].content);

    // A duplicate key is refused before anything is forwarded.
    const n = proxy.exchanges.filter((e) => e.path.endsWith("/completions")).length;
    const dup = await postRaw(
      base,
      "/v1/chat/completions",
      body("demo/echo", ', "model": "x"'),
      apiKey,
    );
    assert.equal(dup.status, 400);
    assert.match(dec.decode(dup.response), /duplicate key/);
    assert.equal(proxy.exchanges.filter((e) => e.path.endsWith("/completions")).length, n);
  });
});
