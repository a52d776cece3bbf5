/**
 * Bad input: a table of 200+ malformed or hostile requests against the real
 * gateway (loopback, real demo upstreams). Every one must get a 4xx in the
 * envelope of its route, within a deadline, without any byte reaching an
 * upstream and without the sentinel prompt text echoed back.
 */
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import {
  assertEnvelope,
  type Envelope,
  envelopeFor,
  type Probe,
  probe,
  rawHttp,
} from "./support/http_probe.ts";

/** Prompt text that must never come back in an error. */
const SENTINEL = "SENTINEL-PROMPT-5d1c";

interface Case {
  name: string;
  path: string;
  method?: string;
  /** Body text or bytes; POST cases default to the route's valid body. */
  body?: string | Uint8Array;
  headers?: Record<string, string>;
  /** Send no credential at all. */
  noAuth?: boolean;
  /** Raw request bytes (sent as is over TCP) instead of fetch. */
  raw?: (auth: string) => string | Uint8Array;
  /** Exact status expected; otherwise any 4xx. */
  status?: number;
  /** Expected `error.param` (OpenAI envelope). */
  param?: string;
  /**
   * The HTTP server itself rejects some requests before the gateway's handler
   * runs (malformed request lines or headers): those only need a 4xx.
   */
  serverLevel?: boolean;
}

const INFERENCE = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/embeddings",
  "/v1/messages",
  "/v1/responses",
] as const;
type InferencePath = (typeof INFERENCE)[number];

function valid(path: InferencePath): Record<string, unknown> {
  switch (path) {
    case "/v1/chat/completions":
      return { model: "demo/echo", messages: [{ role: "user", content: SENTINEL }] };
    case "/v1/completions":
      return { model: "demo/echo", prompt: SENTINEL };
    case "/v1/embeddings":
      return { model: "demo/embed-large", input: SENTINEL };
    case "/v1/messages":
      return {
        model: "demo/echo",
        max_tokens: 16,
        messages: [{ role: "user", content: SENTINEL }],
      };
    case "/v1/responses":
      return { model: "demo/echo", input: SENTINEL };
  }
}

const enc = new TextEncoder();
const with_ = (path: InferencePath, extra: Record<string, unknown>) =>
  JSON.stringify({ ...valid(path), ...extra });
const without = (path: InferencePath, key: string) => {
  const b = valid(path);
  delete b[key];
  return JSON.stringify(b);
};
/** Valid JSON text with `bytes` spliced into the prompt string. */
const spliced = (path: InferencePath, bytes: number[]) => {
  const [a, b] = JSON.stringify(valid(path)).split(SENTINEL);
  return new Uint8Array([...enc.encode(a), ...bytes, ...enc.encode(b)]);
};
const nest = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

/** Malformations every inference route must refuse the same way. */
function genericCases(path: InferencePath): Case[] {
  const v = JSON.stringify(valid(path));
  const c = (name: string, body: string | Uint8Array, extra: Partial<Case> = {}): Case => ({
    name: `${path} ${name}`,
    path,
    body,
    ...extra,
  });
  return [
    c("empty body", "", { status: 400 }),
    c("whitespace body", "   \n\t ", { status: 400 }),
    c("truncated JSON", v.slice(0, v.length - 3), { status: 400 }),
    c("lone brace", "{", { status: 400 }),
    c("not JSON", "{not json", { status: 400 }),
    c("null", "null", { status: 400 }),
    c("array top level", "[]", { status: 400 }),
    c("number top level", "42", { status: 400 }),
    c("string top level", '"hello"', { status: 400 }),
    c("trailing garbage", v + "x", { status: 400 }),
    c("two documents", v + v, { status: 400 }),
    c("trailing comma", v.slice(0, -1) + ",}", { status: 400 }),
    c("single quotes", v.replaceAll('"', "'"), { status: 400 }),
    c("NaN literal", v.slice(0, -1) + ',"temperature":NaN}', { status: 400 }),
    c("Infinity literal", v.slice(0, -1) + ',"temperature":Infinity}', { status: 400 }),
    c("comment", "/*x*/" + v, { status: 400 }),
    c("BOM prefix", "\uFEFF" + v, { status: 400 }),
    c("duplicate top-level key", '{"model":"demo/echo",' + v.slice(1), { status: 400 }),
    c(
      "duplicate key via escape",
      '{"mod\\u0065l":"demo/echo",' + v.slice(1),
      { status: 400 },
    ),
    c("nested 100 deep", v.slice(0, -1) + `,"x":${nest(100)}}`, { status: 400 }),
    c("nested 100k deep", v.slice(0, -1) + `,"x":${nest(100_000)}}`, { status: 400 }),
    c("nested objects 5k deep", '{"a":'.repeat(5000) + "1" + "}".repeat(5000), { status: 400 }),
    c("invalid UTF-8 0xff", spliced(path, [0xff]), { status: 400 }),
    c("overlong UTF-8 slash", spliced(path, [0xc0, 0xaf]), { status: 400 }),
    c("UTF-8 surrogate half", spliced(path, [0xed, 0xa0, 0x80]), { status: 400 }),
    c("truncated UTF-8 sequence", spliced(path, [0xe2, 0x82]), { status: 400 }),
    c("UTF-16LE body", new Uint8Array([...enc.encode(v)].flatMap((b) => [b, 0])), {
      status: 400,
    }),
    c("lone high surrogate escape in model", v.replace('"model":"', '"model":"\\ud800'), {
      status: 400,
    }),
    c("lone low surrogate escape in prompt", v.replace(SENTINEL, "\\udc00"), { status: 400 }),
    c("reversed surrogate pair in a key", v.slice(0, -1) + ',"\\udc00\\ud800":1}', {
      status: 400,
    }),
    c("raw control char in string", v.replace(SENTINEL, "a\u0001b"), { status: 400 }),
    c("body over max_body_bytes", with_(path, { pad: "x".repeat(5 * 1024 * 1024) }), {
      status: 413,
    }),
    c("model wrong type", with_(path, { model: 42 }), { status: 400, param: "model" }),
    c("model null", with_(path, { model: null }), { status: 400, param: "model" }),
    c("model object", with_(path, { model: { id: "demo/echo" } }), {
      status: 400,
      param: "model",
    }),
    c("model empty", with_(path, { model: "" }), { status: 400 }),
    c("model missing", without(path, "model"), { status: 400 }),
    c("model unknown", with_(path, { model: "nobody/nothing" }), { status: 404 }),
    c("model path traversal", with_(path, { model: "../../etc/passwd" }), { status: 404 }),
    c("model 10k chars", with_(path, { model: "m".repeat(10_000) }), { status: 404 }),
    c("model 100k chars", with_(path, { model: "m".repeat(100_000) }), { status: 404 }),
    c("model with NUL", with_(path, { model: "demo/echo\u0000" }), { status: 404 }),
    ...(path === "/v1/embeddings" ? [] : [
      c("stream not boolean", with_(path, { stream: "yes" }), { status: 400 }),
      c("temperature 1e400 (Infinity)", v.slice(0, -1) + ',"temperature":1e400}', { status: 400 }),
    ]),
    c("provider block a string", with_(path, { provider: "zdr" }), { status: 400 }),
    c("provider zdr not boolean", with_(path, { provider: { zdr: "true" } }), { status: 400 }),
    c(
      "provider 10k session ids",
      with_(path, { provider: { aci_session_ids: Array(10_000).fill("zz") } }),
      { status: 400 },
    ),
    c("provider unknown aci field", with_(path, { provider: { aci_x: 1 } }), { status: 400 }),
  ];
}

/** Content types a JSON endpoint must refuse with 415. */
function contentTypeCases(path: InferencePath): Case[] {
  return [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/jsonx",
    "application/xml",
    "",
  ].map((ct) => ({
    name: `${path} content-type ${JSON.stringify(ct)}`,
    path,
    headers: { "content-type": ct },
    status: 415,
  }));
}

const chat = "/v1/chat/completions";
const msgs = (m: unknown) => with_(chat, { messages: m });
const big = Array.from({ length: 10_000 }, (_, i) => i);

const specificCases: Case[] = [
  // Chat.
  ...([
    ["messages a string", msgs("hi"), "messages"],
    ["messages empty", msgs([]), "messages"],
    ["messages missing", without(chat, "messages"), "messages"],
    ["message empty object", msgs([{}]), "messages[0].role"],
    ["message role unknown", msgs([{ role: "wizard", content: "x" }]), "messages[0].role"],
    ["message content number", msgs([{ role: "user", content: 7 }]), "messages[0].content"],
    ["content part unknown type", msgs([{ role: "user", content: [{ type: "audio" }] }]), null],
    ["10k numbers as messages", msgs(big), "messages[0]"],
    ["max_tokens 1e308", with_(chat, { max_tokens: 1e308 }), "max_tokens"],
    ["max_tokens 2^64", with_(chat, { max_tokens: 18446744073709551616 }), "max_tokens"],
    ["max_tokens negative", with_(chat, { max_tokens: -1 }), "max_tokens"],
    ["max_tokens zero", with_(chat, { max_tokens: 0 }), "max_tokens"],
    ["max_tokens fractional", with_(chat, { max_tokens: 1.5 }), "max_tokens"],
    ["max_tokens string", with_(chat, { max_tokens: "10" }), "max_tokens"],
    ["max_tokens over model limit", with_(chat, { max_tokens: 4097 }), "max_tokens"],
    [
      "token parameters that disagree",
      with_(chat, { max_completion_tokens: 5, max_tokens: 6 }),
      "max_completion_tokens",
    ],
    ["temperature 2.01", with_(chat, { temperature: 2.01 }), "temperature"],
    ["temperature -1e-9", with_(chat, { temperature: -1e-9 }), "temperature"],
    ["top_p 1.5", with_(chat, { top_p: 1.5 }), "top_p"],
    ["n zero", with_(chat, { n: 0 }), "n"],
    ["n 1e9", with_(chat, { n: 1e9 }), "n"],
    ["presence_penalty 3", with_(chat, { presence_penalty: 3 }), "presence_penalty"],
    ["frequency_penalty -1e308", with_(chat, { frequency_penalty: -1e308 }), "frequency_penalty"],
    ["seed fractional", with_(chat, { seed: 0.5 }), "seed"],
    ["stop 10k strings", with_(chat, { stop: big.map(String) }), "stop"],
    ["stop number", with_(chat, { stop: 5 }), "stop"],
    ["tools not array", with_(chat, { tools: {} }), "tools"],
    ["tools 10k", with_(chat, { tools: big.map(() => ({})) }), "tools"],
    [
      "tool name injection",
      with_(chat, {
        tools: [{ type: "function", function: { name: "a b\r\nc" } }],
      }),
      "tools[0].function.name",
    ],
    ["tool_choice bogus", with_(chat, { tool_choice: "always" }), "tool_choice"],
    ["response_format bogus", with_(chat, { response_format: { type: "xml" } }), null],
    ["stream_options with stream junk", with_(chat, { stream_options: { x: 1 } }), null],
    ["user 10k chars", with_(chat, { user: "u".repeat(10_000) }), "user"],
    [
      "image on text-only model",
      msgs([{
        role: "user",
        content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }],
      }]),
      null,
    ],
    [
      "bad base64 image data URL",
      with_(chat, {
        model: "demo/vision",
        messages: [{
          role: "user",
          content: [{
            type: "image_url",
            image_url: { url: "data:image/png;base64,!!not*base64" },
          }],
        }],
      }),
      null,
    ],
    [
      "base64 data URL with bad padding",
      with_(chat, {
        model: "demo/vision",
        messages: [{
          role: "user",
          content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AAA===" } }],
        }],
      }),
      null,
    ],
    ["reasoning_effort on non-reasoning model", with_(chat, { reasoning_effort: "high" }), null],
  ] as [string, string, string | null][]).map(([name, body, param]): Case => ({
    name: `${chat} ${name}`,
    path: chat,
    body,
    status: 400,
    ...(param ? { param } : {}),
  })),
  // Completions.
  ...([
    ["prompt number", with_("/v1/completions", { prompt: 5 })],
    ["prompt 10k strings", with_("/v1/completions", { prompt: big.map(String) })],
    ["prompt empty array", with_("/v1/completions", { prompt: [] })],
    ["prompt array of numbers", with_("/v1/completions", { prompt: [1, 2, 3] })],
    ["max_tokens 1e20", with_("/v1/completions", { max_tokens: 1e20 })],
    ["echo string", with_("/v1/completions", { echo: "true" })],
  ] as [string, string][]).map(([name, body]): Case => ({
    name: `/v1/completions ${name}`,
    path: "/v1/completions",
    body,
    status: 400,
  })),
  // Embeddings.
  ...([
    ["input 10k strings", { input: big.map(String) }],
    ["input empty array", { input: [] }],
    ["input number", { input: 42 }],
    ["input nested arrays", { input: [["a"]] }],
    ["encoding_format base65", { encoding_format: "base65" }],
    ["dimensions negative", { dimensions: -1 }],
    ["dimensions 1e12", { dimensions: 1e12 }],
    ["dimensions below range", { dimensions: 255 }],
    ["dimensions fractional", { dimensions: 512.5 }],
    ["image item without url", { input: [{ type: "image_url" }] }],
  ] as [string, Record<string, unknown>][]).map(([name, extra]): Case => ({
    name: `/v1/embeddings ${name}`,
    path: "/v1/embeddings",
    body: with_("/v1/embeddings", extra),
    status: 400,
  })),
  // Messages (Anthropic).
  ...([
    ["max_tokens missing", without("/v1/messages", "max_tokens")],
    ["max_tokens string", with_("/v1/messages", { max_tokens: "16" })],
    ["max_tokens 1e308", with_("/v1/messages", { max_tokens: 1e308 })],
    ["messages empty", with_("/v1/messages", { messages: [] })],
    [
      "role system in messages",
      with_("/v1/messages", {
        messages: [{ role: "system", content: "x" }],
      }),
    ],
    ["empty content blocks", with_("/v1/messages", { messages: [{ role: "user", content: [] }] })],
    [
      "bad base64 image",
      with_("/v1/messages", {
        messages: [{
          role: "user",
          content: [{
            type: "image",
            source: { type: "base64", media_type: "image/png", data: "!!!not base64" },
          }],
        }],
      }),
    ],
    [
      "image media type svg",
      with_("/v1/messages", {
        messages: [{
          role: "user",
          content: [{
            type: "image",
            source: { type: "base64", media_type: "image/svg", data: "AA==" },
          }],
        }],
      }),
    ],
    [
      "image url file scheme",
      with_("/v1/messages", {
        messages: [{
          role: "user",
          content: [{ type: "image", source: { type: "url", url: "file:///etc/passwd" } }],
        }],
      }),
    ],
    ["system a number", with_("/v1/messages", { system: 5 })],
    ["10k numbers as messages", with_("/v1/messages", { messages: big })],
    ["temperature 3", with_("/v1/messages", { temperature: 3 })],
    ["stop_sequences 10k", with_("/v1/messages", { stop_sequences: big })],
  ] as [string, string][]).map(([name, body]): Case => ({
    name: `/v1/messages ${name}`,
    path: "/v1/messages",
    body,
    status: 400,
  })),
  // Responses.
  ...([
    ["input number", { input: 5 }],
    ["input item unknown type", { input: [{ type: "bogus" }] }],
    ["input item role bogus", { input: [{ role: "wizard", content: "x" }] }],
    ["input 10k numbers", { input: big }],
    ["max_output_tokens 0", { max_output_tokens: 0 }],
    ["max_output_tokens 1e308", { max_output_tokens: 1e308 }],
    ["tools not array", { tools: "x" }],
    ["text format bogus", { text: { format: { type: "yaml" } } }],
    ["metadata array", { metadata: [1, 2] }],
    ["reasoning effort bogus", { reasoning: { effort: "max" } }],
  ] as [string, Record<string, unknown>][]).map(([name, extra]): Case => ({
    name: `/v1/responses ${name}`,
    path: "/v1/responses",
    body: with_("/v1/responses", extra),
    status: 400,
  })),
];

/** Credentials that must all be refused with 401, on an inference route and a GET route. */
function authCases(validKey: string): Case[] {
  const bad: [string, Record<string, string>][] = [
    ["no Authorization", {}],
    ["Bearer only", { authorization: "Bearer" }],
    ["Bearer and space", { authorization: "Bearer " }],
    ["Basic scheme", { authorization: "Basic dXNlcjpwYXNz" }],
    ["Token scheme with valid key", { authorization: `Token ${validKey}` }],
    ["other platform key", { authorization: "Bearer sk-proj-abcdef0123456789" }],
    ["prefix only", { authorization: "Bearer cgw-" }],
    ["valid key plus a char", { authorization: `Bearer ${validKey}x` }],
    ["valid key truncated", { authorization: `Bearer ${validKey.slice(0, -1)}` }],
    ["8k garbage key", { authorization: `Bearer cgw-${"A".repeat(8000)}` }],
    ["key with SQL", { authorization: "Bearer cgw-' OR '1'='1" }],
    ["two schemes", { authorization: `Bearer ${validKey}, Bearer ${validKey}` }],
    ["wrong x-api-key", { "x-api-key": "cgw-nope" }],
    ["empty x-api-key", { "x-api-key": "" }],
  ];
  const out: Case[] = [];
  for (const [name, headers] of bad) {
    for (const path of [chat, "/v1/messages"]) {
      out.push({ name: `${path} auth: ${name}`, path, headers, noAuth: true, status: 401 });
    }
  }
  out.push({
    name: "receipt with a bad key",
    path: "/v1/aci/receipts/rcpt-x",
    method: "GET",
    headers: { authorization: "Bearer cgw-nope" },
    noAuth: true,
    status: 401,
  });
  out.push({
    name: "session list without a key",
    path: "/v1/aci/sessions",
    method: "GET",
    noAuth: true,
    status: 401,
  });
  return out;
}

/** Routing and client headers (`x-service-*`) with hostile values. */
const headerCases: Case[] = [
  ...([
    ["x-service-trace-id", "has space"],
    ["x-service-trace-id", "<script>alert(1)</script>"],
    ["x-service-trace-id", "t".repeat(129)],
    ["x-service-trace-id", "a;b=c"],
    ["x-service-trace-id", "%0d%0aSet-Cookie:%20x=1"],
    ["x-service-trace-id", ""],
    ["x-service-trace-id", "ünïcode"],
    ["x-service-metadata", "not json"],
    ["x-service-metadata", "[1,2]"],
    ["x-service-metadata", "null"],
    ["x-service-metadata", '"str"'],
    ["x-service-metadata", "42"],
    ["x-service-metadata", '{"a":1'],
    ["x-service-metadata", JSON.stringify({ pad: "x".repeat(3000) })],
    ["x-service-metadata", ""],
    ["x-service-provider", "nobody"],
    ["x-service-provider", "../plain"],
    ["x-service-provider", "plain, secure"],
    ["x-service-provider", "p".repeat(5000)],
  ] as [string, string][]).flatMap(([h, value]) =>
    [chat, "/v1/messages", "/v1/embeddings"].map((path): Case => ({
      name: `${path} ${h}: ${JSON.stringify(value.slice(0, 30))}`,
      path: path,
      headers: { [h]: value },
    }))
  ),
];

/** Requests with bytes `fetch` cannot send: CR/LF/NUL in headers, raw methods, bad request lines. */
function rawCases(port: number): Case[] {
  const head = (
    line: string,
    headers: string[],
    auth: string,
    body = "",
  ) =>
    [
      line,
      `Host: 127.0.0.1:${port}`,
      `Authorization: Bearer ${auth}`,
      ...headers,
      `Content-Length: ${enc.encode(body).byteLength}`,
      "Connection: close",
      "",
      body,
    ].join("\r\n");
  const chatBody = JSON.stringify(valid(chat));
  const json = "Content-Type: application/json";
  const post = (headers: string[], body = chatBody) => (auth: string) =>
    head(`POST ${chat} HTTP/1.1`, [json, ...headers], auth, body);
  const r = (name: string, raw: Case["raw"], extra: Partial<Case> = {}): Case => ({
    name: `raw ${name}`,
    path: chat,
    raw,
    ...extra,
  });
  const latin1 = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0));
  return [
    r("trace id with bare CR", post(["X-Service-Trace-Id: a\rX-Evil: 1"]), { serverLevel: true }),
    r("trace id with NUL", post(["X-Service-Trace-Id: a\u0000b"]), { serverLevel: true }),
    r("obs-fold continuation", post(["X-Service-Trace-Id: a", " folded"]), { serverLevel: true }),
    r("header name with space", post(["X Service: 1"]), { serverLevel: true }),
    r("header without colon", post(["X-Service-Trace-Id"]), { serverLevel: true }),
    r("trace id with byte 0xff", (auth) => latin1(post(["X-Service-Trace-Id: a\u00ffb"])(auth)), {
      status: 400,
    }),
    r(
      "metadata with a raw 0xff outside strings",
      (auth) => latin1(post(['X-Service-Metadata: {"k":1}\u00ff'])(auth)),
      { status: 400 },
    ),
    r("provider with byte 0xff", (auth) => latin1(post(["X-Service-Provider: pl\u00ffin"])(auth)), {
      status: 400,
    }),
    r("authorization with byte 0xff", (auth) =>
      latin1(
        [
          `POST ${chat} HTTP/1.1`,
          `Host: x`,
          `Authorization: Bearer ${auth}\u00ff`,
          json,
          `Content-Length: ${chatBody.length}`,
          "Connection: close",
          "",
          chatBody,
        ].join("\r\n"),
      ), { status: 401 }),
    r(
      "content-length lies short",
      (auth) =>
        head(`POST ${chat} HTTP/1.1`, [json], auth, chatBody).replace(
          `Content-Length: ${chatBody.length}`,
          "Content-Length: 10",
        ),
      { status: 400 },
    ),
    r(
      "content-length not a number",
      (auth) =>
        head(`POST ${chat} HTTP/1.1`, [json], auth, chatBody).replace(
          `Content-Length: ${chatBody.length}`,
          "Content-Length: ten",
        ),
      { serverLevel: true },
    ),
    r(
      "content-length negative",
      (auth) =>
        head(`POST ${chat} HTTP/1.1`, [json], auth, chatBody).replace(
          `Content-Length: ${chatBody.length}`,
          "Content-Length: -1",
        ),
      { serverLevel: true },
    ),
    r("content-length huge", (auth) =>
      head(`POST ${chat} HTTP/1.1`, [json], auth, "").replace(
        "Content-Length: 0",
        "Content-Length: 99999999999999",
      ), { status: 413 }),
    r(
      "two content-lengths",
      (auth) => head(`POST ${chat} HTTP/1.1`, [json, "Content-Length: 3"], auth, chatBody),
      {
        serverLevel: true,
      },
    ),
    r("chunked body over the limit", (auth) => {
      const piece = "x".repeat(1024 * 1024);
      const chunks = Array.from(
        { length: 5 },
        () => `${piece.length.toString(16)}\r\n${piece}\r\n`,
      );
      return [
        `POST ${chat} HTTP/1.1`,
        `Host: x`,
        `Authorization: Bearer ${auth}`,
        json,
        "Transfer-Encoding: chunked",
        "Connection: close",
        "",
        chunks.join("") + "0\r\n\r\n",
      ]
        .join("\r\n");
    }, { status: 413 }),
    r("1 MB header", post([`X-Pad: ${"p".repeat(1024 * 1024)}`]), { serverLevel: true }),
    r("2000 headers", post(Array.from({ length: 2000 }, (_, i) => `X-H${i}: v`)), {
      serverLevel: true,
    }),
    r("method FOO", (auth) => head(`FOO /v1/models HTTP/1.1`, [], auth), { status: 405 }),
    r("method PROPFIND", (auth) => head(`PROPFIND ${chat} HTTP/1.1`, [], auth), { status: 405 }),
    r("method TRACE", (auth) => head(`TRACE ${chat} HTTP/1.1`, [], auth), { status: 405 }),
    r("lowercase method", (auth) => head(`post ${chat} HTTP/1.1`, [json], auth, chatBody), {
      status: 405,
    }),
    r("dot-dot path", (auth) => head(`GET /v1/../../etc/passwd HTTP/1.1`, [], auth), {
      status: 404,
    }),
    r(
      "absolute-form other host",
      (auth) => head(`GET http://evil.example/v1/nope HTTP/1.1`, [], auth),
      { status: 404 },
    ),
    r("asterisk-form OPTIONS", (auth) => head(`OPTIONS * HTTP/1.1`, [], auth), {
      serverLevel: true,
    }),
    r("garbage request line", () => "HELLO\r\n\r\n", { serverLevel: true }),
    r("unknown HTTP version", (auth) => head(`GET /v1/models HTTP/9.9`, [], auth), {
      serverLevel: true,
    }),
    r("bad percent in path", (auth) => head(`GET /v1/aci/receipts/%zz HTTP/1.1`, [], auth), {
      status: 404,
    }),
  ];
}

/** Ids carrying traversal, NULs, huge or odd values in path segments. */
const pathCases: Case[] = [
  "/v1/aci/receipts/..%2F..%2Fetc",
  "/v1/aci/receipts/..%2F..%2Fetc%2Fpasswd",
  "/v1/aci/receipts/%2e%2e",
  "/v1/aci/receipts/%00",
  "/v1/aci/receipts/rcpt-%00",
  "/v1/aci/receipts/%ff%fe",
  "/v1/aci/receipts/rcpt-'%20OR%201=1",
  "/v1/aci/receipts/" + "a".repeat(5000),
  "/v1/aci/receipts/%E2%80%AE",
  "/v1/signature/%00",
  "/v1/signature/..%2F..%2Fetc%2Fpasswd",
  "/v1/signature/rcpt-x?signing_algo=rsa",
  "/v1/signature/rcpt-x?signing_algo=ecdsa&signing_algo=ed25519",
  "/v1/aci/sessions/..%2F..%2F",
  "/v1/aci/sessions/%00",
  "/v1/aci/sessions/" + "f".repeat(65),
  "/v1/aci/sessions/" + "F".repeat(64),
  "/v1/models/..%2F..%2Fetc",
  "/v1/models/%2e%2e/%2e%2e",
  "/v1/models/%00",
  "/v1/models/demo/echo%00",
  "/v1/models/nobody",
  "/v1/models/a/b/c",
  "/v1/embeddings/models/x",
  "/v1/nope",
  "/v2/models",
  "/",
  "/v1",
  "/v1/chat/completions/x",
].map((p): Case => ({ name: `GET ${p.slice(0, 60)}`, path: p, method: "GET" }));

/** Query strings the catalog and attestation endpoints must refuse with 400. */
const queryCases: Case[] = [
  ...[
    "zdr=false",
    "zdr=1",
    "zdr=TRUE",
    "zdr=",
    "zdr",
    "zdr=true&zdr=true",
    "tee=yes",
    "tee=true%00",
    "zdr=%ff",
    "zdr=true%20",
    "tee=true&tee=false",
    "zdr=" + "t".repeat(10_000),
  ]
    .flatMap((q) => ["/v1/models", "/v1/embeddings/models"].map((p) => `${p}?${q}`)),
  ...[
    "nonce=xyz",
    "nonce=" + "a".repeat(63),
    "nonce=" + "a".repeat(65),
    "nonce=" + "A".repeat(64),
    "nonce=" + "g".repeat(64),
    `nonce=${"a".repeat(64)}&nonce=${"b".repeat(64)}`,
    "nonce=",
    "nonce=%00" + "a".repeat(62),
    "workload_keyset_digest=bad",
    "workload_keyset_digest=sha256:" + "A".repeat(64),
    `workload_keyset_digest=sha256:${"a".repeat(64)}&nonce=${"a".repeat(64)}`,
    `workload_keyset_digest=sha256:${"a".repeat(64)}&workload_keyset_digest=sha256:${
      "b".repeat(64)
    }`,
  ].map((q) => `/v1/aci/attestation?${q}`),
  ...["signing_algo=rsa", "signing_algo=", "nonce=", "nonce=a&nonce=b", "nonce=" + "n".repeat(300)]
    .map((q) => `/v1/attestation/report?${q}`),
].map((p): Case => ({ name: `GET ${p.slice(0, 70)}`, path: p, method: "GET", status: 400 }));

const GET_PATHS = [
  "/v1/models",
  "/v1/embeddings/models",
  "/v1/models/demo-tee",
  "/v1/models/demo/echo",
  "/v1/aci/attestation",
  "/v1/attestation/report",
  "/v1/aci/sessions",
  "/v1/aci/receipts/rcpt-x",
  "/v1/signature/rcpt-x",
  "/healthz",
];

/** Wrong methods on every route: 405 with an Allow header. */
const methodCases: Case[] = [
  ...[...INFERENCE, ...GET_PATHS].map((p): Case => ({
    name: `OPTIONS ${p}`,
    path: p,
    method: "OPTIONS",
    status: 405,
  })),
  ...INFERENCE.flatMap((p) =>
    ["GET", "PUT", "DELETE", "PATCH"].map((m): Case => ({
      name: `${m} ${p}`,
      path: p,
      method: m,
      status: 405,
    }))
  ),
  ...GET_PATHS.flatMap((p) =>
    ["POST", "DELETE"].map((m): Case => ({ name: `${m} ${p}`, path: p, method: m, status: 405 }))
  ),
];

async function run(gw: TestGateway, c: Case, key: string): Promise<Probe> {
  if (c.raw) return await rawHttp(Number(new URL(gw.url).port), c.raw(key), 10_000);
  const method = c.method ?? "POST";
  const headers: Record<string, string> = {};
  if (!c.noAuth) headers.authorization = `Bearer ${key}`;
  let body: string | Uint8Array | undefined;
  if (method === "POST") {
    headers["content-type"] = "application/json";
    body = bodyOf(c);
  }
  Object.assign(headers, c.headers);
  return await probe(`${gw.url}${c.path}`, { method, headers, body: body as BodyInit }, 10_000);
}

/** The body a POST case sends: its own, or the route's valid one. */
function bodyOf(c: Case): string | Uint8Array {
  return c.body ?? JSON.stringify(valid(c.path as InferencePath));
}

/** The top-level keys of a JSON object body, or null. */
function sentKeys(c: Case): Set<string> | null {
  if (c.raw || (c.method ?? "POST") !== "POST") return null;
  const text = bodyOf(c);
  if (typeof text !== "string") return null;
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) ? new Set(Object.keys(v)) : null;
  } catch {
    return null;
  }
}

/** "Missing" must mean absent: a present key with a bad value is called invalid. */
function checkMissingClaim(c: Case, p: Probe, label: string): void {
  const keys = sentKeys(c);
  const err = (p.json as { error?: { message?: unknown; param?: unknown } } | null)?.error;
  if (!keys || typeof err?.message !== "string") return;
  const openai = /^missing required parameter '([A-Za-z_]+)'$/.exec(err.message);
  const anthropic = /^([A-Za-z_]+): Field required$/.exec(err.message);
  const named = openai?.[1] ?? anthropic?.[1];
  if (named) assert.ok(!keys.has(named), `${label}: '${named}' was sent, yet called missing`);
}

function check(c: Case, p: Probe): void {
  const label = `${c.name} → ${p.status} ${p.text.slice(0, 200)}`;
  assert.ok(p.status >= 400 && p.status < 500, `${label}: expected a 4xx`);
  if (c.status !== undefined) assert.equal(p.status, c.status, label);
  assert.ok(!p.text.includes(SENTINEL), `${c.name}: prompt text echoed in the error`);
  if (c.serverLevel) return;
  const envelope: Envelope = envelopeFor(c.path);
  assertEnvelope(p, envelope, label);
  if (c.param !== undefined && envelope === "openai") {
    assert.equal((p.json as { error: { param: unknown } }).error.param, c.param, label);
  }
  checkMissingClaim(c, p, label);
  if (p.status === 405) assert.ok(p.headers.get("allow"), `${label}: Allow header`);
  if (!c.raw) assert.equal(p.headers.get("x-aci-version"), "aci/1", `${label}: standard headers`);
}

/** Runs cases a few at a time: fast, yet never a flood that would hide a hang. */
async function runAll(gw: TestGateway, cases: Case[], key: string, width = 6): Promise<void> {
  let next = 0;
  const failures: string[] = [];
  const worker = async () => {
    while (next < cases.length) {
      const c = cases[next++];
      try {
        check(c, await run(gw, c, key));
      } catch (e) {
        failures.push(`${c.name}: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
  assert.deepEqual(failures, [], `${failures.length} of ${cases.length} cases failed`);
}

Deno.test("hostile input: 200+ malformed requests all get a 4xx envelope, nothing goes upstream", async () => {
  const gw = await startTestGateway({ credits: 1_000 });
  try {
    const key = await gw.newKey({ tier: "enterprise", rpm: 1_000_000, tpm: 1_000_000_000 });
    const cases = [
      ...INFERENCE.flatMap(genericCases),
      ...INFERENCE.flatMap(contentTypeCases),
      ...specificCases,
      ...authCases(key),
      ...headerCases,
      ...rawCases(Number(new URL(gw.url).port)),
      ...pathCases,
      ...queryCases,
      ...methodCases,
    ];
    assert.ok(cases.length >= 200, `only ${cases.length} cases`);
    gw.plain.resetStats();
    gw.secure.resetStats();
    await runAll(gw, cases, key);
    assert.equal(gw.plain.stats.total, 0, "nothing reached the plain upstream");
    assert.equal(gw.secure.stats.total, 0, "nothing reached the secure upstream");
    // The gateway still serves a good request afterwards (no crash, no poisoned state).
    const ok = await probe(`${gw.url}${chat}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(valid(chat)),
    });
    assert.equal(ok.status, 200);
    assert.equal(gw.plain.stats.total + gw.secure.stats.total, 1);
  } finally {
    await gw.close();
  }
});

Deno.test("HEAD on every GET endpoint never errors with 5xx and sends no body", async () => {
  const gw = await startTestGateway();
  try {
    for (const p of GET_PATHS) {
      const res = await probe(`${gw.url}${p}`, {
        method: "HEAD",
        headers: { authorization: `Bearer ${gw.apiKey}` },
      });
      assert.ok(res.status < 500, `HEAD ${p} → ${res.status}`);
      assert.equal(res.text, "", `HEAD ${p} has no body`);
    }
    for (const p of INFERENCE) {
      const res = await probe(`${gw.url}${p}`, { method: "HEAD" });
      assert.equal(res.status, 405, `HEAD ${p}`);
    }
  } finally {
    await gw.close();
  }
});
