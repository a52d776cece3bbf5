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
import { CLEAR_TOOLS_HEADER, clearToolsNonce } from "../src/e2ee/clear_text.ts";

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

/** A loopback upstream answering with `answer(the request body it received)`. */
function scriptedUpstream(answer: (body: Record<string, unknown>) => Response) {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => answer(await req.json()),
  );
  return { url: `http://127.0.0.1:${server.addr.port}`, close: () => server.shutdown() };
}

/** The prompt the upstream got, echoed in an error body: once with an apostrophe, once bare. */
function echoingErrors(body: Record<string, unknown>): Response {
  const msgs = body.messages as { content: string }[];
  const prompt = msgs.map((m) => m.content).join(" ");
  const known = prompt.includes("context-shape");
  const message = known
    ? `This model's maximum context length is 16 tokens. However, you requested 90: ${prompt}`
    : `Invalid input: it's not allowed to say ${prompt} here`;
  return Response.json({ object: "error", message, type: "BadRequestError", code: 400 }, {
    status: 400,
  });
}

Deno.test("upstream error text: never echoed (known shapes as fixed phrases), and none at all under E2EE", async () => {
  const up = scriptedUpstream(echoingErrors);
  const gw = await startTestGateway({
    configure: (c) => {
      c.providers.find((p) => p.name === "plain")!.base_url = up.url;
    },
  });
  try {
    // Plain requests: an unknown shape shows nothing of its text, a known one its fixed phrase.
    for (
      const [content, phrase] of [
        [`other-shape ${SECRET}`, "upstream rejected the request: upstream answered 400"],
        [
          `context-shape ${SECRET}`,
          "upstream rejected the request: upstream answered 400: the prompt and output exceed " +
          "the upstream model's context length",
        ],
      ]
    ) {
      const r = await post(gw, "/v1/chat/completions", {}, {
        model: "demo/vision",
        messages: [{ role: "user", content }],
      });
      assert.equal(r.status, 400, r.text);
      assert.equal(JSON.parse(r.text).error.message, phrase);
      assert.ok(!r.text.includes(SECRET));
    }
    // E2EE: the status and a fixed phrase, whatever the shape.
    for (const content of [`other-shape ${SECRET}`, `context-shape ${SECRET}`]) {
      const s = await sealed(gw, {
        model: "demo/vision",
        messages: [{ role: "user", content }],
      });
      const r = await post(gw, "/v1/chat/completions", s.headers, s.body);
      assert.equal(r.status, 400, r.text);
      assert.equal(
        JSON.parse(r.text).error.message,
        "upstream rejected the request: upstream answered 400: details withheld under " +
          "end-to-end encryption",
      );
      assert.equal(r.headers.get("x-e2ee-applied"), null);
    }
    assert.ok(!JSON.stringify(gw.logs).includes(SECRET), "prompt text in the gateway's log");
  } finally {
    await gw.close();
    await up.close();
  }
});

/**
 * An upstream that does what its parameters ask, putting the prompt where they say: tool-call
 * arguments, logprobs tokens, an echo. A prompt with "unasked" gets logprobs regardless.
 */
function obligingUpstream(body: Record<string, unknown>): Response {
  const prompt = typeof body.prompt === "string"
    ? body.prompt
    : (body.messages as { content: unknown }[]).map((m) => String(m.content)).join(" ");
  const logprobs = body.logprobs || prompt.includes("unasked")
    ? { content: [{ token: prompt, logprob: -0.1, top_logprobs: [] }] }
    : null;
  const chat = body.prompt === undefined;
  const message: Record<string, unknown> = { role: "assistant", content: `ok ${prompt}` };
  if (chat && Array.isArray(body.tools)) {
    message.tool_calls = [{
      id: "call_1",
      type: "function",
      function: { name: "lookup", arguments: JSON.stringify({ q: prompt }) },
    }];
  }
  const choice = chat
    ? { index: 0, message, finish_reason: "stop", logprobs }
    : { index: 0, text: `${body.echo ? prompt : ""} ok`, finish_reason: "stop", logprobs };
  const usage = { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 };
  if (!body.stream) {
    return Response.json({ id: "cmpl-1", object: "x", created: 1, choices: [choice], usage });
  }
  const delta = chat ? { ...choice, message: undefined, delta: message } : choice;
  const frames = [
    `data: ${JSON.stringify({ id: "cmpl-1", choices: [delta] })}\n\n`,
    `data: ${JSON.stringify({ id: "cmpl-1", choices: [], usage })}\n\n`,
    "data: [DONE]\n\n",
  ];
  return new Response(frames.join(""), { headers: { "content-type": "text/event-stream" } });
}

const LOOKUP = [{
  type: "function",
  function: {
    name: "lookup",
    parameters: { type: "object", properties: { q: { type: "string" } } },
  },
}];

Deno.test("E2EE: parameters an intermediary adds to put text in clear are refused; tools only by a committed opt-in", async () => {
  const up = scriptedUpstream(obligingUpstream);
  const gw = await startTestGateway({
    configure: (c) => {
      c.providers.find((p) => p.name === "plain")!.base_url = up.url;
      const vision = c.models.find((m) => m.id === "demo/vision")!;
      vision.supported_parameters.push("tools", "tool_choice", "logprobs", "top_logprobs");
      vision.supported_features.push("tools");
    },
  });
  const counted = async (s: Sealed, path = "/v1/chat/completions", extra = {}) => {
    const r = await post(gw, path, { ...s.headers, ...extra }, s.body);
    assert.ok(!r.text.includes(SECRET), `${r.status}: prompt text in clear: ${r.text}`);
    return r;
  };
  try {
    const model = "demo/vision";
    // Added by an intermediary to an otherwise authentic request: each refused before upstream.
    const added: [string, Record<string, unknown>, "chat" | "completions"][] = [
      ["logprobs", { logprobs: true }, "chat"],
      ["logprobs", { logprobs: true, stream: true }, "chat"],
      ["top_logprobs", { top_logprobs: 3 }, "chat"],
      ["tools", { tools: LOOKUP, tool_choice: "required" }, "chat"],
      ["tools", { tools: LOOKUP, stream: true }, "chat"],
      ["logprobs", { logprobs: 2 }, "completions"],
      ["echo", { echo: true }, "completions"],
    ];
    for (const [param, extra, path] of added) {
      const s = await sealed(gw, { model, path, extra });
      const r = await counted(s, `/v1/${path === "chat" ? "chat/completions" : "completions"}`);
      assert.equal(r.status, 400, `${param}: ${r.text}`);
      assert.equal(JSON.parse(r.text).error.param, param);
      assert.equal(r.headers.get("x-e2ee-applied"), null);
    }

    // The opt-in: the nonce commits to the exact tool parameters, the salt is in the header.
    const salt = randomBytes(32).toString("hex");
    const tools = { tools: LOOKUP, tool_choice: "auto" };
    const nonce = clearToolsNonce(salt, tools);
    const optIn = await sealed(gw, { model, extra: tools, nonce });
    const served = await post(gw, "/v1/chat/completions", {
      ...optIn.headers,
      [CLEAR_TOOLS_HEADER]: salt,
    }, optIn.body);
    assert.equal(served.status, 200, served.text);
    assert.equal(served.headers.get("x-e2ee-applied"), "true");
    // What the client accepted: the tool call travels in clear.
    assert.equal(JSON.parse(served.text).choices[0].message.tool_calls[0].function.name, "lookup");
    // An intermediary that changes the committed tools, or drops the header, is refused.
    for (
      const [change, withHeader, why] of [
        [{ tool_choice: "required" }, true, /does not commit/],
        [{ tools: [...LOOKUP, ...LOOKUP] }, true, /does not commit/],
        [{}, false, /tool definitions and tool calls/],
      ] as const
    ) {
      const salt2 = randomBytes(32).toString("hex");
      const again = await sealed(gw, { model, extra: tools, nonce: clearToolsNonce(salt2, tools) });
      const headers: Record<string, string> = withHeader ? { [CLEAR_TOOLS_HEADER]: salt2 } : {};
      const r = await post(gw, "/v1/chat/completions", { ...again.headers, ...headers }, {
        ...again.body,
        ...change,
      });
      assert.equal(r.status, 400, r.text);
      assert.match(JSON.parse(r.text).error.message, why);
      assert.ok(!r.text.includes(SECRET));
    }
    // An answer with generated text outside the encrypted fields (logprobs nobody asked for) is
    // withheld, buffered or streamed, and never marked E2EE-applied in clear.
    const unasked = await sealed(gw, {
      model,
      messages: [{ role: "user", content: `unasked ${SECRET}` }],
    });
    const r = await counted(unasked);
    assert.equal(r.status, 502, r.text);
    assert.equal(r.headers.get("x-e2ee-applied"), null);
    const streamed = await sealed(gw, {
      model,
      messages: [{ role: "user", content: `unasked ${SECRET}` }],
      extra: { stream: true },
    });
    const s = await counted(streamed);
    assert.equal(s.status, 200);
    assert.match(s.text, /data: \{"error":/);
    assert.doesNotMatch(s.text, /data: \[DONE\]/);
  } finally {
    await gw.close();
    await up.close();
  }
});
