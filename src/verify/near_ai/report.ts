/**
 * NEAR AI Cloud's attestation report
 * (`GET /v1/attestation/report?model&nonce&signing_algo&include_tls_fingerprint`),
 * narrowed from untrusted JSON: one `gateway_attestation` and the
 * `model_attestations[]`, each a dstack CVM's TDX quote, event log, `info`
 * (app id, compose), signing identity, echoed nonce, and for models the
 * NVIDIA payload; `tls_cert_fingerprint` where the TLS key was requested.
 */
import { hexToBytes } from "../../aci/mod.ts";
import { isRecord } from "../json_shape.ts";
import { type Checked, fail } from "../x509/verify_result.ts";

/** One attested CVM of the report. */
export interface NearComponent {
  /** `gateway` or `model[i]`. */
  subject: string;
  modelName: string | null;
  /** As served (`0x…`). */
  signingAddress: string;
  addressBytes: Uint8Array;
  /** Hex as served (NEAR: 64 raw bytes x‖y), or null. */
  signingPublicKey: string | null;
  requestNonce: string | null;
  quote: Uint8Array;
  /** As served (JSON text or array), or null. */
  eventLog: unknown;
  nvidiaPayload: unknown;
  /** sha256 of the TLS key's SPKI DER (hex), when the report carries it. */
  tlsFingerprint: string | null;
  /** `info.compose_hash`, `info.app_id`, `info.tcb_info.app_compose` when present. */
  infoComposeHash: string | null;
  infoAppId: string | null;
  appCompose: string | null;
}

export interface NearReport {
  gateway: NearComponent;
  models: NearComponent[];
}

const ADDRESS_RE = /^0x[0-9a-fA-F]{40}$/;
/** Each model CVM costs a DCAP verification; a report listing more is refused, not verified. */
const MAX_MODEL_ATTESTATIONS = 16;
const HEX_RE = /^(0x)?([0-9a-fA-F]{2})+$/;

function str(o: Record<string, unknown>, k: string): string | null {
  const v = o[k];
  return typeof v === "string" ? v : null;
}

function tcbInfoOf(info: Record<string, unknown>): Record<string, unknown> | null {
  const t = info["tcb_info"];
  if (isRecord(t)) return t;
  if (typeof t === "string") {
    try {
      const v: unknown = JSON.parse(t);
      return isRecord(v) ? v : null;
    } catch {
      return null;
    }
  }
  return null;
}

function component(v: unknown, subject: string): Checked<{ c: NearComponent }> {
  if (!isRecord(v)) return fail(`${subject} is not an object`);
  if (v["signing_algo"] !== undefined && v["signing_algo"] !== "ecdsa") {
    return fail(`${subject} signing_algo ${JSON.stringify(v["signing_algo"])} is not "ecdsa"`);
  }
  const address = str(v, "signing_address");
  if (address === null || !ADDRESS_RE.test(address)) {
    return fail(`${subject} signing_address is not a 0x-prefixed 20-byte address`);
  }
  const quoteHex = str(v, "intel_quote");
  if (quoteHex === null || !HEX_RE.test(quoteHex)) return fail(`${subject} has no hex intel_quote`);
  const info = isRecord(v["info"]) ? v["info"] : {};
  const tcb = tcbInfoOf(info);
  const fp = str(v, "tls_cert_fingerprint");
  if (fp !== null && !/^[0-9a-fA-F]{64}$/.test(fp)) {
    return fail(`${subject} tls_cert_fingerprint is not 32 bytes of hex`);
  }
  const pub = str(v, "signing_public_key");
  return {
    ok: true,
    c: {
      subject,
      modelName: str(v, "model_name"),
      signingAddress: address,
      addressBytes: hexToBytes(address.slice(2)),
      signingPublicKey: pub,
      requestNonce: str(v, "request_nonce"),
      quote: hexToBytes(quoteHex.replace(/^0x/, "")),
      eventLog: v["event_log"] ?? null,
      nvidiaPayload: v["nvidia_payload"] ?? null,
      tlsFingerprint: fp === null ? null : fp.toLowerCase(),
      infoComposeHash: str(info, "compose_hash"),
      infoAppId: str(info, "app_id"),
      appCompose: tcb ? str(tcb, "app_compose") : null,
    },
  };
}

/** Narrows a parsed NEAR AI report. */
export function parseNearAiReport(v: unknown): Checked<{ report: NearReport }> {
  if (!isRecord(v)) return fail("report is not a JSON object");
  const g = component(v["gateway_attestation"], "gateway");
  if (!g.ok) return g;
  const list = v["model_attestations"] ?? [];
  if (!Array.isArray(list)) return fail("model_attestations is not an array");
  if (list.length > MAX_MODEL_ATTESTATIONS) {
    return fail(`model_attestations lists ${list.length} CVMs (at most ${MAX_MODEL_ATTESTATIONS})`);
  }
  const models: NearComponent[] = [];
  for (let i = 0; i < list.length; i++) {
    const m = component(list[i], `model[${i}]`);
    if (!m.ok) return m;
    models.push(m.c);
  }
  return { ok: true, report: { gateway: g.c, models } };
}
