/**
 * What a caller accepts of a gateway: the measurements (and, optionally, the
 * build manifests) of the builds it trusts, whether development evidence is
 * acceptable (only ever by explicit opt-in), and how strict the per-answer
 * checks are. The proxy reads the same object from its `--policy` JSON file.
 */
import { z } from "zod";
import { bytesToHex } from "../aci/hex.ts";
import { type Check, check } from "../verify/checks.ts";
import { evidenceQuote } from "../verify/evidence.ts";
import { isRecord } from "../verify/json_shape.ts";
import { parseSnpReport } from "../verify/sev_snp/report.ts";
import { parseTdxQuote, tdReportToHex } from "../verify/tdx/quote.ts";

const hex = (bytes: number) =>
  z.string().regex(new RegExp(`^[0-9a-fA-F]{${bytes * 2}}$`)).transform((s) => s.toLowerCase());

const measurement = z.discriminatedUnion("tee_type", [
  z.strictObject({
    tee_type: z.literal("tdx"),
    mrtd: hex(48),
    rtmr0: hex(48).optional(),
    rtmr1: hex(48).optional(),
    rtmr2: hex(48).optional(),
    rtmr3: hex(48).optional(),
  }),
  z.strictObject({ tee_type: z.literal("sev_snp"), measurement: hex(48) }),
]);

const manifest = z.strictObject({
  source_digest: z.string().optional(),
  binary_sha256: z.string().optional(),
  bundle_sha256: z.string().optional(),
  source_commit: z.string().optional(),
});

/** An accepted measurement (hex, either case). */
export type Measurement =
  | {
    tee_type: "tdx";
    mrtd: string;
    rtmr0?: string;
    rtmr1?: string;
    rtmr2?: string;
    rtmr3?: string;
  }
  | { tee_type: "sev_snp"; measurement: string };

/** Fields of `attestation.source_provenance.image_provenance` a build manifest pins. */
export interface BuildManifest {
  source_digest?: string;
  binary_sha256?: string;
  bundle_sha256?: string;
  source_commit?: string;
}

/** The policy (JSON names, as in a `--policy` file); see the schema below for each meaning. */
export interface ClientPolicy {
  measurements: Measurement[];
  accept_any_measurement: boolean;
  build_manifests: BuildManifest[];
  allow_dev_evidence: boolean;
  require_verified_upstream: boolean;
  inclusion: "required" | "when_offered" | "off";
  inclusion_wait_ms: number;
  inclusion_verdict: "before_answer" | "deferred";
  e2ee: "auto" | "required" | "off";
}

/** What a caller writes: every field optional (defaults are the strict ones). */
export type ClientPolicyInput = Partial<ClientPolicy>;

const policySchema = z.strictObject({
  /** Accepted measurements; a report matching none is refused. */
  measurements: z.array(measurement).default([]),
  /** Accept any hardware-verified measurement (explicit; the default refuses without a list). */
  accept_any_measurement: z.boolean().default(false),
  /** When given, `source_provenance.image_provenance` must match one entry in every field named. */
  build_manifests: z.array(manifest).default([]),
  /** Development (non-hardware) evidence: refused unless true. */
  allow_dev_evidence: z.boolean().default(false),
  /** Every answer's receipt must say its upstream was verified. */
  require_verified_upstream: z.boolean().default(false),
  /** Inclusion of every receipt in the gateway's transparency log. */
  inclusion: z.enum(["required", "when_offered", "off"]).default("when_offered"),
  /** How long to wait for a receipt to reach a checkpoint (503 log_pending), ms. */
  inclusion_wait_ms: z.number().int().min(0).max(600_000).default(15_000),
  /**
   * When the inclusion verdict comes: before the answer is released (default; the answer waits
   * for the log's next checkpoint), or after it ("deferred": the answer is released once its
   * receipt verified, the inclusion verdict follows through `onVerdict` and `settle()`).
   */
  inclusion_verdict: z.enum(["before_answer", "deferred"]).default("before_answer"),
  /** E2EE v2 where the endpoint supports it: when offered, always (refuse otherwise), or never. */
  e2ee: z.enum(["auto", "required", "off"]).default("auto"),
});

/** A policy from JSON (e.g. the proxy's `--policy` file); throws a readable error. */
export function parsePolicy(value: unknown): ClientPolicy {
  const r = policySchema.safeParse(value ?? {});
  if (!r.success) {
    const first = r.error.issues[0];
    throw new TypeError(`policy: ${first.path.join(".") || "(root)"}: ${first.message}`);
  }
  const policy: ClientPolicy = r.data;
  return policy;
}

/** The measured values of a report's quote, by TEE (hex), or why there are none. */
export function measuredValues(report: unknown): Record<string, string> | string {
  const att = isRecord(report) && isRecord(report["attestation"]) ? report["attestation"] : null;
  const tee = att && typeof att["tee_type"] === "string" ? att["tee_type"] : "(none)";
  const quote = evidenceQuote(att?.["evidence"]);
  if (typeof quote === "string") return quote;
  if (tee === "tdx") {
    const q = parseTdxQuote(quote);
    if (!q.ok) return q.reason;
    const h = tdReportToHex(q.quote.report);
    return {
      tee_type: "tdx",
      mrtd: h.mrTd,
      rtmr0: h.rtmr0,
      rtmr1: h.rtmr1,
      rtmr2: h.rtmr2,
      rtmr3: h.rtmr3,
    };
  }
  if (tee === "sev_snp") {
    const r = parseSnpReport(quote);
    return r.ok ? { tee_type: "sev_snp", measurement: bytesToHex(r.report.measurement) } : r.reason;
  }
  return `tee_type ${tee} has no hardware measurement`;
}

/** `policy.measurement`: the report's measurement is one the caller accepts. */
export function measurementCheck(report: unknown, policy: ClientPolicy, dev: boolean): Check {
  const name = "policy.measurement";
  if (dev) {
    return check(
      name,
      policy.allow_dev_evidence,
      policy.allow_dev_evidence
        ? "development evidence (no measurement), accepted by explicit opt-in"
        : "development evidence refused: allow_dev_evidence is not set",
    );
  }
  const measured = measuredValues(report);
  if (typeof measured === "string") return check(name, false, measured);
  const shown = Object.entries(measured).filter(([k]) => k !== "tee_type").map(([k, v]) =>
    `${k}=${v}`
  ).join(" ");
  const hit = policy.measurements.find((m) =>
    Object.entries(m).every(([k, v]) => measured[k] === v)
  );
  if (hit) return check(name, true, `${measured.tee_type} measurement accepted (${shown})`);
  if (policy.measurements.length === 0 && policy.accept_any_measurement) {
    return check(name, true, `any measurement accepted by policy (${shown})`);
  }
  return check(name, false, `${measured.tee_type} measurement is not in the policy (${shown})`);
}

/** `policy.build_manifest`: when the policy names manifests, the report's provenance matches one. */
export function manifestCheck(report: unknown, policy: ClientPolicy): Check | null {
  if (policy.build_manifests.length === 0) return null;
  const att = isRecord(report) && isRecord(report["attestation"]) ? report["attestation"] : {};
  const prov = isRecord(att["source_provenance"]) ? att["source_provenance"] : {};
  const image = isRecord(prov["image_provenance"]) ? prov["image_provenance"] : {};
  const ok = policy.build_manifests.some((m) =>
    Object.entries(m).every(([k, v]) => v === undefined || image[k] === v)
  );
  return check(
    "policy.build_manifest",
    ok,
    ok
      ? "source provenance matches an accepted build manifest"
      : "source provenance matches no accepted build manifest",
  );
}
