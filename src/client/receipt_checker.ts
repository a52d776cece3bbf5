/**
 * An answer's receipt, checked: fetched and verified against the keyset it
 * cites, then its log inclusion, at once or (policy `inclusion_verdict:
 * "deferred"`) after the answer, its verdict reported through `onVerdict`
 * and collected by `settle()`.
 */
import { allPassed, type Check, check } from "../verify/checks.ts";
import { isRecord } from "../verify/json_shape.ts";
import { verifyReceipt } from "../verify/receipt.ts";
import type { AttestedKeysets } from "./attested_keysets.ts";
import { AciVerificationError, failedText } from "./errors.ts";
import { CheckpointCache, fetchInclusionProof, inclusionCheck } from "./inclusion.ts";
import type { ClientPolicy } from "./policy.ts";
import type { Transport } from "./transport.ts";
import type { Verdict } from "./verdict.ts";
import { ARTIFACT_FETCH_MS } from "./transport.ts";

/** Deferred inclusion checks in flight at most (each holds one receipt and its poll). */
const MAX_DEFERRED = 256;

export interface ReceiptCheckerDeps {
  baseURL: string;
  transport: Transport;
  policy: ClientPolicy;
  keysets: AttestedKeysets;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  onVerdict?: (v: Verdict) => void;
}

/** One answer's receipt and what it is checked against. */
export interface ReceiptAsk {
  receiptId: string;
  endpoint: string;
  /** The caller's own credential headers (the receipt's owner). */
  auth: Headers;
  requestBytes: Uint8Array;
  responseBytes: Uint8Array;
}

export class ReceiptChecker {
  #d: ReceiptCheckerDeps;
  #checkpoints = new CheckpointCache();
  /** Deferred inclusion checks in flight (bounded: past the bound an answer waits, as by default). */
  #deferred = new Set<Promise<Verdict>>();
  #settled: Verdict[] = [];

  constructor(deps: ReceiptCheckerDeps) {
    this.#d = deps;
  }

  /** The receipt's checks (inclusion included unless deferred or off); throws on a failure. */
  async check(ask: ReceiptAsk): Promise<Check[]> {
    const { policy, transport, keysets } = this.#d;
    const { receiptId } = ask;
    const url = new URL(`${this.#d.baseURL}/aci/receipts/${encodeURIComponent(receiptId)}`);
    const defer = policy.inclusion_verdict === "deferred" && this.#deferred.size < MAX_DEFERRED;
    // The proof is fetched alongside the receipt (one round trip less); checked after it.
    const proof = policy.inclusion === "off" || keysets.current()?.logKey == null || defer
      ? null
      : this.#fetchProof(ask, false);
    proof?.catch(() => {});
    const res = await transport.send(url, {
      method: "GET",
      headers: ask.auth,
      signal: AbortSignal.timeout(ARTIFACT_FETCH_MS),
    }, keysets.tlsCheck);
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new AciVerificationError("receipt_missing", `the receipt answered HTTP ${res.status}`, {
        receiptId,
      });
    }
    const receipt: unknown = await res.json().catch(() => null);
    const a = await keysets.keysetFor(
      isRecord(receipt) ? receipt["workload_keyset_digest"] : null,
      receiptId,
    );
    const checks = verifyReceipt(receipt, {
      report: a.report,
      requestBody: ask.requestBytes,
      responseBody: ask.responseBytes,
      requireVerifiedUpstream: policy.require_verified_upstream,
    });
    checks.push(wholeCheck(receipt));
    if (!allPassed(checks)) {
      throw new AciVerificationError("receipt_invalid", failedText(checks), { checks, receiptId });
    }
    if (policy.inclusion === "off") return checks;
    if (a.logKey === null) {
      if (policy.inclusion === "required") {
        throw new AciVerificationError(
          "inclusion_failed",
          "the attested keyset lists no transparency-log key",
          { checks, receiptId },
        );
      }
      return checks;
    }
    const logKey = a.logKey;
    const included = async (): Promise<Check> => {
      const fetched = await (proof ?? this.#fetchProof(ask, defer));
      return "proof" in fetched
        ? inclusionCheck(receipt, fetched.proof, logKey, this.#checkpoints)
        : fetched;
    };
    if (defer) {
      this.#defer(receiptId, ask.endpoint, included);
      return [
        ...checks,
        check(
          "receipt.log_inclusion_deferred",
          true,
          "inclusion is checked after the answer (inclusion_verdict: deferred): its verdict " +
            "follows through onVerdict and settle()",
        ),
      ];
    }
    const inc = await included();
    if (!inc.ok) {
      throw new AciVerificationError("inclusion_failed", inc.detail, {
        checks: [...checks, inc],
        receiptId,
      });
    }
    return [...checks, inc];
  }

  /**
   * Waits for every deferred inclusion check started so far: their verdicts, or the first
   * failure's error. Nothing deferred: resolves at once.
   */
  async settle(): Promise<Verdict[]> {
    await Promise.all([...this.#deferred]);
    const done = this.#settled;
    this.#settled = [];
    const failed = done.find((v) => !v.ok);
    if (failed) throw failed.error;
    return done;
  }

  #fetchProof(ask: ReceiptAsk, patient: boolean) {
    const { baseURL, transport, policy, keysets, now, sleep } = this.#d;
    return fetchInclusionProof(ask.receiptId, {
      baseURL,
      transport,
      tlsCheck: keysets.tlsCheck,
      auth: ask.auth,
      waitMs: policy.inclusion_wait_ms,
      now,
      sleep,
      patient,
    });
  }

  /** Runs an answer's inclusion check after its release; the verdict goes to onVerdict and settle(). */
  #defer(receiptId: string, endpoint: string, included: () => Promise<Check>): void {
    const job = included().catch((e): Check =>
      check("receipt.log_inclusion", false, e instanceof Error ? e.message : String(e))
    ).then((inc): Verdict => {
      const v = inclusionVerdict(inc, endpoint, receiptId);
      try {
        this.#d.onVerdict?.(v);
      } finally {
        this.#deferred.delete(job);
        this.#settled.push(v);
      }
      return v;
    });
    this.#deferred.add(job);
  }
}

/** A deferred inclusion check's verdict. */
function inclusionVerdict(inc: Check, endpoint: string, receiptId: string): Verdict {
  if (inc.ok) {
    return {
      endpoint,
      receiptId,
      phase: "inclusion",
      ok: true,
      verified: ["log-inclusion"],
      checks: [inc],
    };
  }
  return {
    endpoint,
    receiptId,
    phase: "inclusion",
    ok: false,
    verified: [],
    checks: [inc],
    error: new AciVerificationError("inclusion_failed", inc.detail, {
      checks: [inc],
      receiptId,
    }),
  };
}

/**
 * The answer reached this client whole: its receipt does not say the gateway saw the client
 * leave first. The receipt binds the bytes written until then, so an intermediary that cuts
 * the gateway's stream and ends the client's cleanly would otherwise pass every hash check.
 */
function wholeCheck(receipt: unknown): Check {
  const log = isRecord(receipt) && Array.isArray(receipt["event_log"]) ? receipt["event_log"] : [];
  const cut = log.some((e) => isRecord(e) && e["type"] === "stream.client_disconnected");
  return check(
    "receipt.delivered_whole",
    !cut,
    cut
      ? "the gateway recorded that this stream's client left before its end: what arrived was cut"
      : "not cut short (no stream.client_disconnected event)",
  );
}
