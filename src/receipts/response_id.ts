/**
 * The response id a client actually holds, for a receipt's `chat_id` and the
 * lookup by response id. Translated formats mint their own ids (`msg_…`,
 * `resp_…`) from the upstream's, so the upstream id alone would name a
 * response the client never saw.
 */
import { SseDecoder } from "../formats/mod.ts";

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * The id of a returned JSON document or stream event: top-level `id` (chat,
 * completions, messages, responses objects and chat chunks), else the nested
 * `message.id` (messages `message_start`) or `response.id` (responses
 * `response.created`). Null when there is none.
 */
export function responseIdOf(value: unknown): string | null {
  if (!isObject(value)) return null;
  if (typeof value.id === "string" && value.id !== "") return value.id;
  for (const field of ["message", "response"]) {
    const inner = value[field];
    if (isObject(inner) && typeof inner.id === "string" && inner.id !== "") return inner.id;
  }
  return null;
}

/**
 * Finds the response id in the SSE text written to a client, fed piece by
 * piece; stops parsing once found (only the first events are ever decoded).
 */
export class StreamIdFinder {
  /** Dropped once the id is found: a held stream should not keep a decoder it no longer uses. */
  #decoder: SseDecoder | null = new SseDecoder();
  #id: string | null = null;

  get id(): string | null {
    return this.#id;
  }

  push(text: string): void {
    if (this.#decoder === null || text === "") return;
    for (const ev of this.#decoder.push(text)) {
      let data: unknown;
      try {
        data = JSON.parse(ev.data);
      } catch {
        continue; // `[DONE]` and the like carry no id
      }
      const id = responseIdOf(data);
      if (id !== null) {
        this.#id = id;
        this.#decoder = null;
        return;
      }
    }
  }
}
