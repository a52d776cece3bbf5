/**
 * Test helpers for the demo upstream's tests: read a whole SSE body and split
 * it into data payloads and comments, keeping whether `[DONE]` was seen.
 */

/** A fully read SSE body. */
export interface SseRead {
  /** The `data:` payloads parsed as JSON, without the `[DONE]` sentinel. */
  chunks: unknown[];
  comments: string[];
  done: boolean;
  raw: string;
}

/** Reads `res` to the end (rejects if the connection breaks) and splits its events. */
export async function readSse(res: Response): Promise<SseRead> {
  const raw = await res.text();
  const out: SseRead = { chunks: [], comments: [], done: false, raw };
  for (const block of raw.split("\n\n")) {
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) out.comments.push(line.slice(1).trim());
      else if (line === "data: [DONE]") out.done = true;
      else if (line.startsWith("data: ")) out.chunks.push(JSON.parse(line.slice(6)));
    }
  }
  return out;
}

/** POSTs JSON to the upstream. */
export function postJson(
  url: string,
  body: unknown,
  init: { apiKey?: string; signal?: AbortSignal } = {},
): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (init.apiKey !== undefined) headers.authorization = `Bearer ${init.apiKey}`;
  return fetch(url, {
    method: "POST",
    headers,
    body: JSON.stringify(body),
    signal: init.signal,
  });
}

/** Reads a property of an unknown JSON value by path (undefined when absent). */
export function pick(value: unknown, ...path: (string | number)[]): unknown {
  let cur = value;
  for (const key of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = Reflect.get(cur, key);
  }
  return cur;
}
