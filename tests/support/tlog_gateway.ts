/**
 * A small gateway-shaped HTTP server for the verifying client's inclusion
 * tests while the gateway's own transparency log is built elsewhere: it
 * serves a development-evidence report whose keyset lists a receipt key and a
 * `c2sp-note-ed25519` log key, answers chat completions with signed receipts,
 * and serves inclusion proofs exactly in the team contract's format (C2SP
 * signed-note checkpoint, RFC 6962 proof computed here by the recursive PATH
 * definition, independently of the client's iterative check).
 */
import { randomBytes } from "node:crypto";
import { concatBytes } from "../../src/aci/bytes.ts";
import { sha256, sha256Prefixed } from "../../src/aci/digest.ts";
import { DEV_TEE_TYPE, devQuote } from "../../src/aci/dev_quote.ts";
import {
  ed25519PrivateKeyFromSeed,
  ed25519RawPublicKey,
  ed25519Sign,
} from "../../src/aci/ed25519.ts";
import { bytesToHex } from "../../src/aci/hex.ts";
import { jcsBytes } from "../../src/aci/jcs.ts";
import { reportData, reportDataSlot } from "../../src/aci/statement.ts";

const b64 = (b: Uint8Array) => btoa(String.fromCharCode(...b));
const leaf = (e: Uint8Array) => sha256(concatBytes([new Uint8Array([0]), e]));
const node = (l: Uint8Array, r: Uint8Array) => sha256(concatBytes([new Uint8Array([1]), l, r]));

function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** RFC 6962 MTH over leaf hashes. */
function mth(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 1) return leaves[0];
  const k = split(leaves.length);
  return node(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

/** RFC 6962 PATH(m, D[n]). */
function path(m: number, leaves: Uint8Array[]): Uint8Array[] {
  if (leaves.length <= 1) return [];
  const k = split(leaves.length);
  return m < k
    ? [...path(m, leaves.slice(0, k)), mth(leaves.slice(k))]
    : [...path(m - k, leaves.slice(k)), mth(leaves.slice(0, k))];
}

export interface TlogGateway {
  url: string;
  baseURL: string;
  close(): Promise<void>;
}

export interface TlogGatewayOptions {
  /** The inclusion endpoint answers 404 receipt_not_found (the receipt was never logged). */
  omitFromLog?: boolean;
  /** The inclusion endpoint answers 503 log_pending this many times first. */
  pendingTimes?: number;
  /** Sign checkpoints with a key other than the attested one. */
  wrongLogKey?: boolean;
  /** List no log key in the keyset (a gateway without a transparency log). */
  noLogKey?: boolean;
}

export function startTlogGateway(o: TlogGatewayOptions = {}): TlogGateway {
  const receiptKey = ed25519PrivateKeyFromSeed(new Uint8Array(randomBytes(32)));
  const logKey = ed25519PrivateKeyFromSeed(new Uint8Array(randomBytes(32)));
  const signingLogKey = o.wrongLogKey
    ? ed25519PrivateKeyFromSeed(new Uint8Array(randomBytes(32)))
    : logKey;
  const keyset = {
    subject: null,
    not_after: Math.floor(Date.now() / 1000) + 3600,
    receipt_signing_keys: [
      { key_id: "rk1", algo: "ed25519", public_key: bytesToHex(ed25519RawPublicKey(receiptKey)) },
      ...(o.noLogKey ? [] : [{
        key_id: "log1",
        algo: "c2sp-note-ed25519",
        public_key: bytesToHex(ed25519RawPublicKey(logKey)),
      }]),
    ],
    e2ee_public_keys: [],
    tls_public_keys: [],
  };
  const digest = sha256Prefixed(jcsBytes(keyset));
  // Filler entries so proofs have several levels.
  const entries: Uint8Array[] = [0, 1, 2, 3, 4].map((i) =>
    jcsBytes({ kind: "session", session_id: bytesToHex(sha256(`s${i}`)) })
  );
  const receipts = new Map<string, Record<string, unknown>>();
  let pending = o.pendingTimes ?? 0;
  let origin = "";

  const answer = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    new Response(JSON.stringify(body), {
      status,
      headers: {
        "content-type": "application/json",
        "x-aci-version": "aci/1",
        "x-aci-keyset-digest": digest,
        ...headers,
      },
    });

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    if (url.pathname === "/v1/aci/attestation") {
      const nonce = url.searchParams.get("nonce");
      const rd = reportData(digest, nonce);
      return answer(200, {
        api_version: "aci/1",
        workload_keyset_digest: digest,
        attestation: {
          tee_type: DEV_TEE_TYPE,
          workload_keyset: keyset,
          report_data: bytesToHex(rd),
          source_provenance: null,
          evidence: { quote: bytesToHex(devQuote(reportDataSlot(rd))) },
        },
        service_capabilities: { serving: "aggregator", supported_e2ee_versions: [] },
        all_attestations: [],
      });
    }
    if (req.method === "POST" && url.pathname === "/v1/chat/completions") {
      const body = new Uint8Array(await req.arrayBuffer());
      const out = new TextEncoder().encode(JSON.stringify({
        id: "chatcmpl-tlog",
        object: "chat.completion",
        created: 1,
        model: "demo/echo",
        choices: [{
          index: 0,
          message: { role: "assistant", content: "logged answer" },
          finish_reason: "stop",
        }],
        usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
      }));
      const id = `rcpt-${bytesToHex(new Uint8Array(randomBytes(8)))}`;
      const unsigned = {
        api_version: "aci/1",
        receipt_id: id,
        chat_id: "chatcmpl-tlog",
        model: "demo/echo",
        workload_keyset_digest: digest,
        endpoint: "/v1/chat/completions",
        method: "POST",
        served_at: Math.floor(Date.now() / 1000),
        event_log: [
          { type: "request.received", body_hash: sha256Prefixed(body) },
          { type: "response.returned", body_hash: sha256Prefixed(out) },
        ],
        key_id: "rk1",
      };
      const receipt = {
        ...unsigned,
        signature: bytesToHex(ed25519Sign(receiptKey, jcsBytes(unsigned))),
      };
      receipts.set(id, receipt);
      if (!o.omitFromLog) {
        entries.push(
          jcsBytes({ kind: "receipt", receipt_digest: sha256Prefixed(jcsBytes(receipt)) }),
        );
      }
      return new Response(out, {
        headers: {
          "content-type": "application/json",
          "x-receipt-id": id,
          "x-aci-keyset-digest": digest,
        },
      });
    }
    const m = /^\/v1\/aci\/receipts\/([^/]+)(\/inclusion)?$/.exec(url.pathname);
    const receipt = m ? receipts.get(m[1]) : undefined;
    if (!m || !receipt) {
      return answer(404, {
        error: { type: "not_found", code: "receipt_not_found", message: "unknown", param: null },
      });
    }
    if (!m[2]) return answer(200, receipt);
    if (pending > 0) {
      pending--;
      return answer(503, {
        error: { type: "log_pending", code: "log_pending", message: "pending", param: null },
      }, { "retry-after": "0" });
    }
    const entry = jcsBytes({ kind: "receipt", receipt_digest: sha256Prefixed(jcsBytes(receipt)) });
    const index = entries.findIndex((e) => bytesToHex(e) === bytesToHex(entry));
    if (index < 0) {
      return answer(404, {
        error: { type: "not_found", code: "receipt_not_found", message: "not logged", param: null },
      });
    }
    const leaves = entries.map(leaf);
    const body = `${origin}\n${leaves.length}\n${b64(mth(leaves))}\n`;
    const keyHash = sha256(
      concatBytes([
        new TextEncoder().encode(`${origin}\n`),
        new Uint8Array([1]),
        ed25519RawPublicKey(logKey),
      ]),
    ).subarray(0, 4);
    const sig = ed25519Sign(signingLogKey, new TextEncoder().encode(body));
    const note = `${body}\n\u2014 ${origin} ${b64(concatBytes([keyHash, sig]))}\n`;
    return answer(200, {
      origin,
      leaf_index: index,
      tree_size: leaves.length,
      inclusion_proof: path(index, leaves).map(b64),
      checkpoint: note,
    });
  });
  const port = (server.addr as Deno.NetAddr).port;
  origin = `127.0.0.1:${port}/v1/aci/log`;
  const url = `http://127.0.0.1:${port}`;
  return { url, baseURL: `${url}/v1`, close: () => server.shutdown() };
}
