/**
 * NEAR AI's per-answer signature (`GET /v1/signature/{chat_id}`), checked
 * after every answer a `near-ai` upstream served: its `text` must be
 * `sha256(the bytes the gateway forwarded):sha256(the bytes it received)` —
 * the receipt's own `request.forwarded` / `response.received` hashes — and
 * the EIP-191 signature must recover to a signing address the upstream's
 * current session attested. The answer has already left (a stream cannot
 * wait for it), so a failure ends the session at once: the upstream gets no
 * further prompt until it verifies again. An unavailable signature (404,
 * timeout) is logged and counted, not a failure. Checks run in the
 * background, a bounded number at a time (excess answers are counted as
 * skipped, never queued without bound).
 */
import type { ProviderConfig } from "../config/mod.ts";
import { verifyNearSignature } from "../verify/mod.ts";
import type { AttesterDeps, SessionDocument } from "./types.ts";
import { AttestationFailure, fetchEvidence, parseJsonObject, v1Url } from "./attesters/mod.ts";

/** What the pipeline reports about a served answer. */
export interface AnsweredExchange {
  provider: string;
  /** The upstream's own response id (`chatcmpl-…`), or null. */
  upstreamChatId: string | null;
  /** `sha256:<hex>` of the bytes sent upstream (the receipt's `request.forwarded`). */
  forwardedHash: string | null;
  /** `sha256:<hex>` of the bytes received (the receipt's `response.received`). */
  receivedHash: string;
}

export interface AnswerSignatureStats {
  verified: number;
  failed: number;
  unavailable: number;
  skipped: number;
}

export interface AnswerSignatureOptions {
  providers: readonly ProviderConfig[];
  /** The upstream's current verified session document and its pinned key, or null. */
  session: (provider: string) => { doc: SessionDocument; spkiSha256: string } | null;
  invalidate: (provider: string, reason: string) => void;
  deps: Pick<AttesterDeps, "pinnedFetch">;
  /** Upstream credentials by provider (`api_key_env`). */
  credential: (provider: string) => string | undefined;
  log: (line: Record<string, unknown>) => void;
  /** Checks in flight at most; default 32. */
  maxInFlight?: number;
}

export interface AnswerSignatures {
  answered(a: AnsweredExchange): void;
  stats(): AnswerSignatureStats;
  /** Resolves when no check is in flight (tests, drain). */
  idle(): Promise<void>;
}

const hexOf = (h: string | null) => (h && h.startsWith("sha256:") ? h.slice(7) : null);

export function createAnswerSignatures(o: AnswerSignatureOptions): AnswerSignatures {
  const near = new Map(
    o.providers.filter((p) => p.confidential?.verifier === "near-ai").map((p) => [p.name, p]),
  );
  const stats: AnswerSignatureStats = { verified: 0, failed: 0, unavailable: 0, skipped: 0 };
  const inflight = new Set<Promise<void>>();
  const max = o.maxInFlight ?? 32;

  const check = async (p: ProviderConfig, a: AnsweredExchange): Promise<void> => {
    const s = o.session(p.name);
    const fwd = hexOf(a.forwardedHash);
    const recv = hexOf(a.receivedHash);
    if (!s || a.upstreamChatId === null || fwd === null || recv === null) {
      stats.unavailable++;
      return;
    }
    const addresses = [
      ...(Array.isArray(s.doc.identity?.model_signing_addresses)
        ? s.doc.identity.model_signing_addresses as string[]
        : []),
    ];
    const model = p.confidential?.near_ai?.model;
    const fetch = o.deps.pinnedFetch(s.spkiSha256, p.confidential?.tls_ca_pem);
    const key = o.credential(p.name);
    const url = v1Url(p.base_url, `/signature/${encodeURIComponent(a.upstreamChatId)}`, {
      ...(model ? { model } : {}),
      signing_algo: "ecdsa",
    });
    let envelope: Record<string, unknown>;
    try {
      const bytes = await fetchEvidence(
        (u, init) =>
          fetch(u, {
            ...init,
            headers: { ...init?.headers, ...(key ? { authorization: `Bearer ${key}` } : {}) },
          }),
        url,
        "signature",
      );
      envelope = parseJsonObject(bytes, "signature");
    } catch (e) {
      stats.unavailable++;
      o.log({
        level: "warn",
        msg: "answer signature unavailable",
        upstream: p.name,
        chat_id: a.upstreamChatId,
        reason: e instanceof AttestationFailure ? e.message : String(e).slice(0, 200),
      });
      return;
    }
    // The check runs on the hashes the receipt holds: the exact bytes, never kept.
    const checks = verifyNearSignature(
      envelope,
      { requestHash: fwd, responseHash: recv },
      addresses,
    );
    const bad = checks.find((c) => !c.ok);
    if (bad) {
      stats.failed++;
      o.invalidate(p.name, `answer signature for ${a.upstreamChatId}: ${bad.name}: ${bad.detail}`);
      return;
    }
    stats.verified++;
  };

  return {
    answered(a) {
      const p = near.get(a.provider);
      if (!p) return;
      if (inflight.size >= max) {
        stats.skipped++;
        return;
      }
      const t: Promise<void> = check(p, a).catch(() => {
        stats.unavailable++;
      }).finally(() => inflight.delete(t));
      inflight.add(t);
    },
    stats: () => ({ ...stats }),
    async idle() {
      while (inflight.size > 0) await Promise.all([...inflight]);
    },
  };
}
