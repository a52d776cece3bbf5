/**
 * Load generation: a closed loop at fixed concurrency (throughput), a
 * constant-rate open loop (latency percentiles at a fixed rate, without the
 * coordinated omission of closed loops), a streaming probe (first-token delay
 * and inter-chunk gaps) and a holder of many slow open streams (memory).
 */
import { encodeRequest, HttpConn } from "./http_conn.ts";

export interface Target {
  /** Base URL, e.g. `http://127.0.0.1:1234` (requests go to `/v1/chat/completions`). */
  base: string;
  /** Extra request headers (the gateway's `authorization`). */
  headers: Record<string, string>;
  /** Model name as this path expects it (gateway id or upstream name). */
  model: (upstreamModel: string) => string;
  /**
   * Receipts the answers named: every 200's `x-receipt-id` goes to `ok`, every other
   * answer's to `refused` (a refusal after authentication has a receipt too). The bench
   * checks each against the gateway's store after it stopped.
   */
  receipts?: ReceiptSink;
}

export interface ReceiptSink {
  ok: string[];
  /** 200s that named no receipt (a defect on the gateway's paths). */
  okWithout: number;
  refused: string[];
}

export const receiptSink = (): ReceiptSink => ({ ok: [], okWithout: 0, refused: [] });

function noteReceipt(t: Target, status: number, id: string | null): void {
  const s = t.receipts;
  if (!s) return;
  if (status === 200) {
    if (id === null) s.okWithout++;
    else s.ok.push(id);
  } else if (id !== null) s.refused.push(id);
}

export interface LoadResult {
  ok: number;
  errors: number;
  seconds: number;
  /** Per successful request, milliseconds. */
  latencies: number[];
  /** `Server-Timing: gw;dur=` values seen, milliseconds. */
  serverTimings: number[];
  /** With `phases`: per successful request (same order as `latencies`), its whole `Server-Timing`. */
  timingHeaders?: string[];
  /** With `phases`: per successful request (same order), when it was sent (ms since the epoch). */
  sentAt?: number[];
}

const CHAT_PATH = "/v1/chat/completions";

export function chatBody(model: string, stream: boolean): string {
  return JSON.stringify({
    model,
    messages: [{ role: "user", content: "Say hello in five words." }],
    max_tokens: 16,
    ...(stream ? { stream: true } : {}),
  });
}

function requestBytes(t: Target, upstreamModel: string): Uint8Array {
  return encodeRequest(new URL(CHAT_PATH, t.base), {
    headers: { "content-type": "application/json", ...t.headers },
    body: chatBody(t.model(upstreamModel), false),
  });
}

function gwDur(st: string | null): number | null {
  const m = st?.match(/gw;dur=([\d.]+)/);
  return m ? Number(m[1]) : null;
}

/** `concurrency` keep-alive connections, each sending back-to-back for `seconds`. */
export async function closedLoop(
  t: Target,
  opts: { concurrency: number; seconds: number; upstreamModel?: string },
): Promise<LoadResult> {
  const req = requestBytes(t, opts.upstreamModel ?? "chat");
  const url = new URL(t.base);
  const conns = await Promise.all(
    Array.from({ length: opts.concurrency }, () => HttpConn.open(url)),
  );
  const r: LoadResult = { ok: 0, errors: 0, seconds: 0, latencies: [], serverTimings: [] };
  const start = performance.now();
  const deadline = start + opts.seconds * 1000;
  await Promise.all(conns.map(async (c) => {
    while (performance.now() < deadline) {
      const t0 = performance.now();
      const res = await c.request(req);
      const t1 = performance.now();
      noteReceipt(t, res.status, res.receiptId);
      if (res.status !== 200) {
        r.errors++;
        continue;
      }
      r.ok++;
      r.latencies.push(t1 - t0);
      const d = gwDur(res.serverTiming);
      if (d !== null) r.serverTimings.push(d);
    }
  }));
  r.seconds = (performance.now() - start) / 1000;
  for (const c of conns) c.close();
  return r;
}

/**
 * Sends at a constant `rate` for `seconds` whatever the answers do; each send
 * takes an idle connection or opens a new one (that cost is counted).
 */
export async function openLoop(
  t: Target,
  opts: { rate: number; seconds: number; upstreamModel?: string; phases?: boolean },
): Promise<LoadResult> {
  const req = requestBytes(t, opts.upstreamModel ?? "chat");
  const url = new URL(t.base);
  const idle = await Promise.all(Array.from({ length: 16 }, () => HttpConn.open(url)));
  const all = [...idle];
  const r: LoadResult = { ok: 0, errors: 0, seconds: 0, latencies: [], serverTimings: [] };
  if (opts.phases) [r.timingHeaders, r.sentAt] = [[], []];
  const inflight = new Set<Promise<void>>();
  const one = async () => {
    const t0 = performance.now();
    let c = idle.pop();
    if (!c) {
      c = await HttpConn.open(url);
      all.push(c);
    }
    try {
      const res = await c.request(req);
      noteReceipt(t, res.status, res.receiptId);
      if (res.status !== 200) r.errors++;
      else {
        r.ok++;
        r.latencies.push(performance.now() - t0);
        r.timingHeaders?.push(res.serverTiming ?? "");
        r.sentAt?.push(performance.timeOrigin + t0);
        const d = gwDur(res.serverTiming);
        if (d !== null) r.serverTimings.push(d);
      }
      idle.push(c);
    } catch {
      r.errors++;
      c.close();
    }
  };
  const interval = 1000 / opts.rate;
  const total = Math.round(opts.rate * opts.seconds);
  const start = performance.now();
  let sent = 0;
  while (sent < total) {
    // Send everything due now (timers fire late; catch up rather than drift).
    const due = Math.min(total, Math.floor((performance.now() - start) / interval) + 1);
    while (sent < due) {
      const p = one();
      inflight.add(p);
      p.finally(() => inflight.delete(p));
      sent++;
    }
    const next = start + sent * interval;
    await new Promise((res) => setTimeout(res, Math.max(0, next - performance.now())));
  }
  await Promise.all(inflight);
  r.seconds = (performance.now() - start) / 1000;
  for (const c of all) c.close();
  return r;
}

export interface StreamTiming {
  /** Request sent → first content chunk received, ms. */
  firstToken: number;
  /** Gaps between successive received chunks after the first, ms. */
  gaps: number[];
}

/** One streamed request, timing its chunks as they arrive (through `fetch`). */
export async function streamOnce(t: Target, client: Deno.HttpClient): Promise<StreamTiming> {
  const t0 = performance.now();
  const res = await fetch(new URL(CHAT_PATH, t.base), {
    method: "POST",
    headers: { "content-type": "application/json", ...t.headers },
    body: chatBody(t.model("chat"), true),
    client,
  });
  noteReceipt(t, res.status, res.headers.get("x-receipt-id"));
  if (res.status !== 200 || !res.body) {
    await res.body?.cancel();
    throw new Error(`stream answered ${res.status}`);
  }
  let first = -1;
  let last = 0;
  const gaps: number[] = [];
  for await (const _ of res.body) {
    const now = performance.now();
    if (first < 0) first = now - t0;
    else gaps.push(now - last);
    last = now;
  }
  return { firstToken: first, gaps };
}

/** `concurrency` streams back-to-back for `seconds`. */
export async function streamLoop(
  t: Target,
  opts: { concurrency: number; seconds: number },
): Promise<StreamTiming[]> {
  const client = Deno.createHttpClient({});
  const out: StreamTiming[] = [];
  const deadline = performance.now() + opts.seconds * 1000;
  await Promise.all(Array.from({ length: opts.concurrency }, async () => {
    while (performance.now() < deadline) out.push(await streamOnce(t, client));
  }));
  client.close();
  return out;
}

/**
 * Opens `n` slow streams (upstream model `hold`) and resolves once each has
 * delivered its first chunk; `drain()` then reads them to their end.
 */
export async function holdStreams(
  t: Target,
  n: number,
): Promise<{ drain: () => Promise<number>; close: () => void }> {
  const client = Deno.createHttpClient({});
  const readers = await Promise.all(Array.from({ length: n }, async () => {
    const res = await fetch(new URL(CHAT_PATH, t.base), {
      method: "POST",
      headers: { "content-type": "application/json", ...t.headers },
      body: chatBody(t.model("hold"), true),
      client,
    });
    noteReceipt(t, res.status, res.headers.get("x-receipt-id"));
    if (res.status !== 200 || !res.body) throw new Error(`held stream answered ${res.status}`);
    const reader = res.body.getReader();
    await reader.read();
    return reader;
  }));
  return {
    async drain() {
      let completed = 0;
      await Promise.all(readers.map(async (r) => {
        let text = "";
        const dec = new TextDecoder();
        for (;;) {
          const { value, done } = await r.read();
          if (done) break;
          text += dec.decode(value, { stream: true });
        }
        if (text.includes("[DONE]")) completed++;
      }));
      return completed;
    },
    close: () => client.close(),
  };
}
