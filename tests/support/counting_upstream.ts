/**
 * A minimal OpenAI-compatible chat upstream for fault and load tests that
 * makes the upstream side observable: how many streams started, finished,
 * were cancelled by the reader (the gateway aborting after a client left),
 * how many were open at once, and how many chunks went out. Streams can be
 * held at a barrier so a test can prove N were open simultaneously. Every
 * response says `Connection: close`, so finished requests leave no pooled
 * sockets behind and socket counts return to their baseline.
 */
import { sleep } from "../../src/store/transient.ts";

export interface CountingStats {
  started: number;
  completed: number;
  cancelled: number;
  open: number;
  maxOpen: number;
  chunksSent: number;
}

export interface CountingUpstreamOptions {
  /** Content chunks per streamed answer. */
  chunks: number;
  /** Delay between chunks, ms. */
  gapMs: number;
  /** Hold every stream after its first chunk until `release()` is called. */
  barrier?: boolean;
}

export interface CountingUpstream {
  url: string;
  stats: CountingStats;
  /** Lets streams held at the barrier continue. */
  release(): void;
  /** Re-arms the barrier for streams that reach it from now on. */
  hold(): void;
  /** Resolves when `pred(stats)` holds; rejects after `timeoutMs`. */
  waitFor(pred: (s: CountingStats) => boolean, timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

const encoder = new TextEncoder();

export function startCountingUpstream(opts: CountingUpstreamOptions): CountingUpstream {
  const stats: CountingStats = {
    started: 0,
    completed: 0,
    cancelled: 0,
    open: 0,
    maxOpen: 0,
    chunksSent: 0,
  };
  const closing = new AbortController();
  let releaseBarrier: () => void = () => {};
  let barrier = Promise.resolve();
  const hold = () => {
    barrier = new Promise<void>((r) => releaseBarrier = r);
  };
  hold();
  const listeners = new Set<() => void>();
  const changed = () => listeners.forEach((l) => l());

  const chunk = (model: string, delta: Record<string, unknown>, finish: string | null) =>
    `data: ${
      JSON.stringify({
        id: "chatcmpl-counting",
        object: "chat.completion.chunk",
        created: 1_700_000_000,
        model,
        choices: [{ index: 0, delta, finish_reason: finish }],
      })
    }\n\n`;

  const stream = (model: string): ReadableStream<Uint8Array> => {
    const cancelled = new AbortController();
    const signal = AbortSignal.any([cancelled.signal, closing.signal]);
    let sent = 0;
    let ended = false;
    stats.started++;
    stats.open++;
    stats.maxOpen = Math.max(stats.maxOpen, stats.open);
    changed();
    const end = (how: "completed" | "cancelled") => {
      if (ended) return;
      ended = true;
      stats[how]++;
      stats.open--;
      changed();
    };
    return new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          if (sent === 1 && opts.barrier) {
            await barrier; // close() releases it too, so nothing waits forever
            if (signal.aborted) throw signal.reason;
          } else if (sent > 0 && opts.gapMs > 0) await sleep(opts.gapMs, signal);
          if (sent < opts.chunks) {
            const text = sent === 0
              ? chunk(model, { role: "assistant", content: "w0 " }, null)
              : chunk(model, { content: `w${sent} ` }, null);
            sent++;
            stats.chunksSent++;
            controller.enqueue(encoder.encode(text));
            return;
          }
          const usage = {
            id: "chatcmpl-counting",
            object: "chat.completion.chunk",
            created: 1_700_000_000,
            model,
            choices: [],
            usage: {
              prompt_tokens: 5,
              completion_tokens: opts.chunks,
              total_tokens: 5 + opts.chunks,
            },
          };
          controller.enqueue(encoder.encode(
            chunk(model, {}, "stop") + `data: ${JSON.stringify(usage)}\n\ndata: [DONE]\n\n`,
          ));
          controller.close();
          end("completed");
        } catch {
          // Aborted: the reader cancelled (counted in cancel) or the server is closing.
          if (!cancelled.signal.aborted) {
            end("cancelled");
            controller.error(new Error("closing"));
          }
        }
      },
      cancel() {
        cancelled.abort();
        end("cancelled");
      },
    }, { highWaterMark: 0 });
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const headers = { connection: "close" };
    if (req.method !== "POST" || !new URL(req.url).pathname.endsWith("/chat/completions")) {
      return new Response(JSON.stringify({ error: { message: "no such route" } }), {
        status: 404,
        headers,
      });
    }
    const body = await req.json() as { model?: string; stream?: boolean };
    const model = body.model ?? "counting";
    if (body.stream !== true) {
      return Response.json({
        id: "chatcmpl-counting",
        object: "chat.completion",
        created: 1_700_000_000,
        model,
        choices: [{
          index: 0,
          message: { role: "assistant", content: "counted" },
          finish_reason: "stop",
        }],
        usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
      }, { headers });
    }
    return new Response(stream(model), {
      headers: { ...headers, "content-type": "text/event-stream", "cache-control": "no-cache" },
    });
  });

  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    stats,
    release: () => releaseBarrier(),
    hold,
    waitFor(pred, timeoutMs) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!pred(stats)) return;
          listeners.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(
            new Error(`upstream state not reached in ${timeoutMs} ms: ${JSON.stringify(stats)}`),
          );
        }, timeoutMs);
        listeners.add(check);
        check();
      });
    },
    async close() {
      releaseBarrier();
      closing.abort(new Error("closing"));
      await server.shutdown();
    },
  };
}
