/**
 * Reads a streamed upstream body chunk by chunk into one small reused buffer.
 * Deno's `fetch` bodies are byte streams whose default reader allocates a
 * fresh 64 KiB buffer for every read: a held stream pinned 64 KiB while it
 * waited for its next event, and every SSE event of a few hundred bytes left
 * 64 KiB of garbage. A BYOB reader over one buffer avoids both. A body from
 * the gateway's own HTTP/1.1 client is read from its source directly, with no
 * stream in between; other bodies that are not byte streams (test doubles) are
 * read with their default reader. Handlers take a response's reader from
 * {@link upstreamBodyReader} and never see which of these it is.
 */
import { bodySourceOf, type H1BodySource } from "./h1_client.ts";

/**
 * One page: an SSE event is usually a few hundred bytes, and a larger burst
 * only takes more reads, while this buffer is held for the stream's whole life.
 */
const CHUNK_READER_BYTES = 4 * 1024;

export interface ChunkReader {
  /**
   * The next chunk. Valid only until the next `read()`, which reuses (and
   * detaches) its buffer: consume or copy it first.
   */
  read(): Promise<ReadableStreamReadResult<Uint8Array>>;
  cancel(reason?: unknown): Promise<void>;
}

/**
 * The reader of an upstream response's body, however it arrived (the gateway's
 * HTTP/1.1 client, or any other `fetch`); null when the response has no body.
 */
export function upstreamBodyReader(res: Response): ChunkReader | null {
  return res.body === null ? null : chunkReader(res.body, undefined, bodySourceOf(res));
}

export function chunkReader(
  body: ReadableStream<Uint8Array>,
  bufferBytes = CHUNK_READER_BYTES,
  source?: H1BodySource,
): ChunkReader {
  if (source !== undefined) {
    // No async function here: a held stream would keep one more suspended frame alive.
    return {
      read: () => source.read().then(asResult),
      cancel() {
        source.cancel();
        return Promise.resolve();
      },
    };
  }
  let byob: ReadableStreamBYOBReader;
  try {
    byob = body.getReader({ mode: "byob" });
  } catch (e) {
    if (!(e instanceof TypeError)) throw e; // not a byte stream
    return body.getReader();
  }
  // Each read transfers the buffer into the stream and hands it back in the result.
  let buffer: ArrayBuffer | null = null;
  return {
    async read() {
      const r = await byob.read(new Uint8Array(buffer ?? new ArrayBuffer(bufferBytes)));
      buffer = r.value ? r.value.buffer as ArrayBuffer : null;
      return r.done ? { done: true, value: undefined } : { done: false, value: r.value };
    },
    cancel: (reason) => byob.cancel(reason),
  };
}

function asResult(bytes: Uint8Array | null): ReadableStreamReadResult<Uint8Array> {
  return bytes === null ? { done: true, value: undefined } : { done: false, value: bytes };
}

/**
 * After the last event a client needs (`[DONE]`), read the little that is left
 * of the upstream body (the chunked terminator) so the connection can go back
 * to the keep-alive pool; cancelling instead would close it and make the next
 * request pay a new TCP (and TLS) handshake. Bounded: anything more than
 * `maxReads` reads, an error, or no end within `graceMs` cancels the body.
 * Runs in the background; never throws.
 */
export function drainRest(reader: ChunkReader, opts: { maxReads: number; graceMs: number }): void {
  const giveUp = () => {
    clearTimeout(timer);
    reader.cancel().catch(() => {});
  };
  const timer = setTimeout(giveUp, opts.graceMs);
  (async () => {
    for (let i = 0; i < opts.maxReads; i++) {
      if ((await reader.read()).done) return clearTimeout(timer);
    }
    giveUp();
  })().catch(giveUp);
}
