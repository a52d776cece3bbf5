/**
 * The benchmark's mock OpenAI-compatible upstream, kept trivially cheap so it
 * never bounds a measurement: every answer is pre-encoded at start-up.
 *
 * `POST /v1/chat/completions`, chosen by the upstream model name:
 *   - `chat`  : a fixed small `chat.completion` (its id fresh each time), at once;
 *   - `delay` : the same after `DELAY_MS`;
 *   - `chat` with `"stream": true` : `STREAM_CHUNKS` content chunks, the first
 *     at once, then one every `CHUNK_GAP_MS`, then usage and `[DONE]`;
 *   - `hold` with `"stream": true` : one chunk at once, then held open until
 *     `POST /release` ends every held stream normally.
 *
 * Run as a process: `deno run -A bench/mock_upstream.ts`; prints
 * `mock listening on http://HOST:PORT` on stderr.
 */
import { sleep } from "../src/store/transient.ts";

export const DELAY_MS = 20;
export const STREAM_CHUNKS = 20;
export const CHUNK_GAP_MS = 10;

const enc = new TextEncoder();

/** A completion id's random part: 29 letters and digits, as OpenAI's ids have. */
const ID_CHARS = 29;
const ID_PLACEHOLDER = "x".repeat(ID_CHARS);
const COMPLETION = enc.encode(JSON.stringify({
  id: `chatcmpl-${ID_PLACEHOLDER}`,
  object: "chat.completion",
  created: 1,
  model: "chat",
  choices: [{
    index: 0,
    message: { role: "assistant", content: "Hello from the mock upstream." },
    finish_reason: "stop",
  }],
  usage: { prompt_tokens: 8, completion_tokens: 6, total_tokens: 14 },
}));

const chunk = (delta: Record<string, string>, finish: string | null) =>
  enc.encode(
    `data: ${
      JSON.stringify({
        id: "chatcmpl-bench",
        object: "chat.completion.chunk",
        created: 1,
        model: "chat",
        choices: [{ index: 0, delta, finish_reason: finish }],
      })
    }\n\n`,
  );
const FIRST = chunk({ role: "assistant", content: "tok" }, null);
const TOKEN = chunk({ content: " tok" }, null);
const LAST = chunk({}, "stop");
const TAIL = enc.encode(
  `data: ${
    JSON.stringify({
      id: "chatcmpl-bench",
      object: "chat.completion.chunk",
      created: 1,
      model: "chat",
      choices: [],
      usage: {
        prompt_tokens: 8,
        completion_tokens: STREAM_CHUNKS,
        total_tokens: 8 + STREAM_CHUNKS,
      },
    })
  }\n\ndata: [DONE]\n\n`,
);

const ID_AT = new TextDecoder().decode(COMPLETION).indexOf(ID_PLACEHOLDER);
const ALPHABET = enc.encode("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789");
let idState = (Date.now() ^ 0x9e3779b9) >>> 0 || 1;

/**
 * The completion with a fresh random-looking id, as real upstreams answer: the
 * gateway indexes its receipt by that id, and an index of random ids costs
 * the store more (a page per insert) than one id repeated.
 */
function completion(): Uint8Array<ArrayBuffer> {
  const out = COMPLETION.slice();
  for (let i = 0; i < ID_CHARS; i++) {
    // xorshift32: cheap, never repeats within the 2^32 − 1 period.
    idState ^= idState << 13;
    idState ^= idState >>> 17;
    idState ^= idState << 5;
    idState >>>= 0;
    out[ID_AT + i] = ALPHABET[idState % ALPHABET.length];
  }
  return out;
}

const JSON_HEADERS = { "content-type": "application/json" };
const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" };

/** The mock's handler; `held` streams end when `/release` is called. */
export function createMockHandler(): (req: Request) => Promise<Response> {
  let release: () => void = () => {};
  let released = new Promise<void>((r) => (release = r));

  const paced = (held: boolean) =>
    new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(FIRST);
        if (held) await released;
        else {
          for (let i = 1; i < STREAM_CHUNKS; i++) {
            await sleep(CHUNK_GAP_MS);
            c.enqueue(TOKEN);
          }
        }
        c.enqueue(LAST);
        c.enqueue(TAIL);
        c.close();
      },
    });

  return async (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/release") {
      release();
      released = new Promise<void>((r) => (release = r));
      return new Response(null, { status: 204 });
    }
    if (path !== "/v1/chat/completions" || req.method !== "POST") {
      return new Response("not found", { status: 404 });
    }
    const body: unknown = await req.json();
    const { model, stream } = (body ?? {}) as { model?: unknown; stream?: unknown };
    if (stream === true) return new Response(paced(model === "hold"), { headers: SSE_HEADERS });
    if (model === "delay") await sleep(DELAY_MS);
    return new Response(completion(), { headers: JSON_HEADERS });
  };
}

if (import.meta.main) {
  Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: ({ hostname, port }) => console.error(`mock listening on http://${hostname}:${port}`),
  }, createMockHandler());
}
