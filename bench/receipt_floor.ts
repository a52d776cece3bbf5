/**
 * The floor for any gateway that meets the receipt rule: the bare
 * `fetch` proxy (bench/bare_proxy.ts) plus only the work a receipt makes
 * mandatory, done with the gateway's own primitives:
 *   - SHA-256 of the request body and of the response body (streamed: per chunk),
 *   - an `aci/1` receipt of the same shape the gateway writes, JCS-canonicalized
 *     and signed with Ed25519 by the gateway's receipt service (`finalize`),
 *   - the receipt durably stored through the gateway's `GroupCommitter`
 *     (a commit starts at once when none is in flight), before the response
 *     is released (a stream's end is held until its receipt is durable).
 * No auth, validation, routing, rate limits, credits, translation or logs.
 * Whatever the gateway spends beyond this path is its own overhead; what
 * this path spends beyond the bare proxy is the price of the receipt rule.
 *
 * Run as a process: `deno run -A bench/receipt_floor.ts <upstream base URL> <kv path>`;
 * prints `floor listening on http://HOST:PORT` on stderr.
 */
import { BodyHasher, sha256Prefixed } from "../src/aci/digest.ts";
import { newReceiptId } from "../src/aci/receipt.ts";
import { createIdentity } from "../src/attestation/identity.ts";
import { ReceiptRecorder } from "../src/receipts/recorder.ts";
import { createReceiptService } from "../src/receipts/service.ts";
import { GroupCommitter } from "../src/store/group_commit.ts";

export function createReceiptFloor(
  upstream: string,
  kv: Deno.Kv,
): (req: Request) => Promise<Response> {
  const base = upstream.replace(/\/$/, "");
  const identity = createIdentity({ subject: null, ttlSeconds: 86_400, now: Date.now });
  const receipts = createReceiptService(kv, { identity, now: Date.now, retentionDays: 30 });
  const committer = new GroupCommitter(kv);
  const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

  /** Signs the receipt (as the gateway does) and resolves once it is durable. */
  const commit = (id: string, path: string, requestHash: string, responseHash: string) => {
    const rec = new ReceiptRecorder(id, path, "POST");
    rec.event({ type: "request.received", body_hash: requestHash });
    rec.event({ type: "request.forwarded", body_hash: requestHash });
    rec.event({ type: "response.received", body_hash: responseHash });
    rec.event({ type: "response.returned", body_hash: responseHash });
    return committer.write(receipts.finalize(rec.draft));
  };

  return async (req) => {
    const url = new URL(req.url);
    const body = new Uint8Array(await req.arrayBuffer());
    const requestHash = sha256Prefixed(body);
    const id = newReceiptId(random, Date.now());
    const res = await fetch(base + url.pathname + url.search, {
      method: "POST",
      headers: { "content-type": req.headers.get("content-type") ?? "application/json" },
      body,
      signal: req.signal,
    });
    const contentType = res.headers.get("content-type") ?? "application/octet-stream";
    const headers = { "content-type": contentType, "x-receipt-id": id };
    if (!contentType.startsWith("text/event-stream")) {
      const out = new Uint8Array(await res.arrayBuffer());
      const hash = sha256Prefixed(out);
      await commit(id, url.pathname, requestHash, hash);
      return new Response(out, { status: res.status, headers });
    }
    const reader = res.body!.getReader();
    const hasher = new BodyHasher();
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (!done) {
          hasher.update(value);
          controller.enqueue(value);
          return;
        }
        await commit(id, url.pathname, requestHash, hasher.digest());
        controller.close();
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(stream, { status: res.status, headers });
  };
}

if (import.meta.main) {
  const [upstream, path] = Deno.args;
  if (!upstream || !path) {
    console.error("usage: receipt_floor.ts <upstream base URL> <kv path>");
    Deno.exit(2);
  }
  const kv = await Deno.openKv(path);
  Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: ({ hostname, port }) =>
      console.error(`floor listening on http://${hostname}:${port}`),
  }, createReceiptFloor(upstream, kv));
}
