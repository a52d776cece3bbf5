/**
 * The attestation report of the dstack vllm-proxy lineage
 * (`GET /v1/attestation/report`), narrowed from untrusted JSON: signing
 * identity, echoed nonce, the quote bytes, the raw event log and the GPU
 * payload. Only the
 * ecdsa algorithm is accepted (its address is what report data v2 binds).
 */
import { hexToBytes } from "../../aci/mod.ts";
import { refuse } from "./outcome.ts";

/** The fields the verifiers use. */
export interface DstackReport {
  /** As served (`0x…`). */
  signingAddress: string;
  /** The 20 raw address bytes. */
  addressBytes: Uint8Array;
  signingAlgo: "ecdsa";
  quote: Uint8Array;
  /** `event_log` as served (array or JSON text), or null when absent. */
  eventLog: unknown;
  /** `nvidia_payload` as served (NRAS request JSON text or object), or null when absent. */
  nvidiaPayload: unknown;
}

const ADDRESS_RE = /^0x[0-9a-fA-F]{40}$/;

/** Narrows a parsed report, requiring it to echo `nonce`. */
export function parseDstackReport(report: Record<string, unknown>, nonce: string): DstackReport {
  const algo = report["signing_algo"];
  if (algo !== "ecdsa") refuse(`report signing_algo ${JSON.stringify(algo)} is not "ecdsa"`);
  const address = report["signing_address"];
  if (typeof address !== "string" || !ADDRESS_RE.test(address)) {
    refuse("report signing_address is not a 0x-prefixed 20-byte address");
  }
  const echoed = report["request_nonce"];
  if (echoed !== undefined && (typeof echoed !== "string" || echoed.toLowerCase() !== nonce)) {
    refuse("report request_nonce is not the nonce the verifier sent");
  }
  const quoteHex = report["intel_quote"];
  if (typeof quoteHex !== "string" || quoteHex.length === 0) refuse("report has no intel_quote");
  let quote: Uint8Array;
  try {
    quote = hexToBytes(quoteHex.startsWith("0x") ? quoteHex.slice(2) : quoteHex);
  } catch {
    refuse("report intel_quote is not hex");
  }
  const log = report["event_log"];
  return {
    signingAddress: address,
    addressBytes: hexToBytes(address.slice(2)),
    signingAlgo: "ecdsa",
    quote,
    eventLog: log === undefined || log === null ? null : log,
    nvidiaPayload: report["nvidia_payload"] ?? null,
  };
}
