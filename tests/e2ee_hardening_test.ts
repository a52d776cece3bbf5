/**
 * What E2EE v2 must not give away to an intermediary that rewrites the clear
 * parts of a request (issue #25 items 3–5), against the real gateway on
 * loopback with real upstream servers started here: a captured request
 * replayed under another client key, parameters that make prompt or
 * generated text travel in clear, and upstream error text echoing a prompt.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { fetchReport, keysetOf, onlyEvent, waitForReceipt } from "./support/receipt_check.ts";
import * as indep from "./support/e2ee_independent.ts";

const SECRET = "PROMPT-SECRET-d41c";

async function serviceKey(gw: TestGateway): Promise<string> {
  const { report } = await fetchReport(gw.url);
  const keys = keysetOf(report).e2ee_public_keys as { algo: string; public_key: string }[];
  return keys.find((k) => k.algo === indep.X25519)!.public_key;
}

interface Sealed {
  headers: Record<string, string>;
  body: Record<string, unknown>;
  client: { sk: Uint8Array; pk: string };
  nonce: string;
  ts: number;
}

/** An E2EE request whose every `messages.{m}.content` is encrypted (X25519). */
async function sealed(
  gw: TestGateway,
  opts: {
    path?: "chat" | "completions";
    model?: string;
    extra?: Record<string, unknown>;
    nonce?: string;
    messages?: { role: string; content: string }[];
  } = {},
): Promise<Sealed> {
  const model = opts.model ?? "demo/echo";
  const key = await serviceKey(gw);
  const nonce = opts.nonce ?? randomBytes(32).toString("hex");
  const ts = Math.floor(Date.now() / 1000);
  const client = indep.clientKeys(indep.X25519);
  const seal = (field: string, plain: string) =>
    indep.encrypt(
      indep.X25519,
      key,
      plain,
      indep.aad("request", { algo: indep.X25519, field, model, nonce, ts }),
    );
  let body: Record<string, unknown>;
  if (opts.path === "completions") {
    body = { model, prompt: await seal("prompt", `say ${SECRET}`) };
  } else {
    const msgs = opts.messages ?? [{ role: "user", content: `hello ${SECRET}` }];
    body = {
      model,
      messages: await Promise.all(
        msgs.map(async (m, i) => ({
          role: m.role,
          content: await seal(`messages.${i}.content`, m.content),
        })),
      ),
    };
  }
  return {
    headers: {
      "x-e2ee-version": "2",
      "x-client-pub-key": client.pk,
      "x-model-pub-key": key,
      "x-e2ee-nonce": nonce,
      "x-e2ee-timestamp": String(ts),
    },
    body: { ...body, ...opts.extra },
    client,
    nonce,
    ts,
  };
}

async function post(
  gw: TestGateway,
  path: string,
  headers: Record<string, string>,
  body: unknown,
) {
  const res = await fetch(`${gw.url}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${gw.apiKey}`,
      ...headers,
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text };
}

Deno.test("E2EE replay: a captured request resent with another X-Client-Pub-Key is refused", async () => {
  const gw = await startTestGateway();
  try {
    const r = await sealed(gw);
    const first = await post(gw, "/v1/chat/completions", r.headers, r.body);
    assert.equal(first.status, 200, first.text);
    assert.equal(first.headers.get("x-e2ee-applied"), "true");
    // The intermediary keeps every byte but the client key, which the v2 AAD does not bind.
    const attacker = indep.clientKeys(indep.X25519);
    const upstreamBefore = gw.plain.stats.total + gw.secure.stats.total;
    const replay = await post(
      gw,
      "/v1/chat/completions",
      { ...r.headers, "x-client-pub-key": attacker.pk },
      r.body,
    );
    assert.equal(replay.status, 400, replay.text);
    assert.equal(JSON.parse(replay.text).error.type, "e2ee_replay_detected");
    assert.equal(gw.plain.stats.total + gw.secure.stats.total, upstreamBefore, "nothing upstream");
    assert.ok(!replay.text.includes(SECRET));
    const receipt = await waitForReceipt(gw.url, replay.headers.get("x-receipt-id")!, gw.apiKey);
    assert.equal(onlyEvent(receipt, "request.refused").reason, "e2ee_replay_detected");
  } finally {
    await gw.close();
  }
});
