/**
 * A release measurement published through Sigstore (Tinfoil's model): a
 * Sigstore bundle whose DSSE envelope carries an in-toto statement about
 * the release artefact, signed by a short-lived Fulcio certificate issued to
 * the repository's GitHub Actions workflow, logged in Rekor. Verified
 * offline against a configured trusted root with `@sigstore/verify` (bundle
 * signature, Fulcio chain, SCTs, Rekor inclusion, all at the log's integrated
 * time); then the policy: OIDC issuer (v2 extension preferred over v1),
 * workflow repository, workflow ref under a prefix (the ref extension and,
 * where present, the build signer URI), DSSE payload type, statement type,
 * subject digest, predicate type, and the measurement registers the
 * predicate must carry. Failures carry the conformance suite's rejection
 * codes (tinfoilsh/tinfoil-conformance).
 */
import { bundleFromJSON } from "@sigstore/bundle";
import { TrustedRoot } from "@sigstore/protobuf-specs";
import { toSignedEntity, toTrustMaterial, Verifier } from "@sigstore/verify";
import { installEcDefaultDigest } from "./node_compat.ts";

installEcDefaultDigest();

const MULTIPLATFORM_V1 = "https://tinfoil.sh/predicate/snp-tdx-multiplatform/v1";
const IN_TOTO_V1 = "https://in-toto.io/Statement/v1";
const HEX48 = /^[0-9a-f]{96}$/;

export interface ReleasePolicy {
  /** `owner/name`. */
  repo: string;
  oidcIssuer: string;
  workflowRefPrefix: string;
  /** null: any; default [MULTIPLATFORM_V1]. */
  predicateTypes?: string[] | null;
  /** null: any; default [IN_TOTO_V1]. */
  statementTypes?: string[] | null;
  /** Default `application/vnd.in-toto+json`. */
  payloadType?: string;
  /** Rekor entries required (default 1) and allowed (default: any). */
  tlogMin?: number;
  tlogMax?: number | null;
  /** SCTs required (default 1). */
  sctMin?: number;
}

export interface ReleaseMeasurement {
  predicateType: string;
  /** SnpTdxMultiPlatformV1: [SEV-SNP MEASUREMENT, TDX RTMR1, TDX RTMR2]. */
  registers: string[];
  subjectName: string;
  subjectDigest: string;
  signerUri: string;
  integratedTime: number;
}

export type ReleaseResult =
  | ({ ok: true } & ReleaseMeasurement)
  | { ok: false; code: string; reason: string };

const no = (code: string, reason: string): ReleaseResult => ({ ok: false, code, reason });

const OID = {
  issuerV1: "1.3.6.1.4.1.57264.1.1",
  repoV1: "1.3.6.1.4.1.57264.1.5",
  refV1: "1.3.6.1.4.1.57264.1.6",
  issuerV2: "1.3.6.1.4.1.57264.1.8",
  buildSigner: "1.3.6.1.4.1.57264.1.9",
  sourceRepo: "1.3.6.1.4.1.57264.1.12",
  sourceRef: "1.3.6.1.4.1.57264.1.14",
};

/** Fulcio v1 extensions are raw strings; v2 are DER UTF8String (short or long form length). */
function extText(raw: Uint8Array, der: boolean): string | null {
  const dec = new TextDecoder("utf-8", { fatal: true });
  try {
    if (!der) return dec.decode(raw);
    if (raw[0] !== 0x0c || raw.length < 2) return null;
    let len = raw[1];
    let off = 2;
    if (len & 0x80) {
      const n = len & 0x7f;
      if (n < 1 || n > 2) return null;
      len = 0;
      for (let i = 0; i < n; i++) len = (len << 8) | raw[2 + i];
      off = 2 + n;
    }
    if (off + len !== raw.length) return null;
    return dec.decode(raw.subarray(off));
  } catch {
    return null;
  }
}

function extensions(oids: readonly { oid?: { id: number[] }; value: Uint8Array }[]) {
  const out = new Map<string, Uint8Array>();
  for (const o of oids) if (o.oid) out.set(o.oid.id.join("."), new Uint8Array(o.value));
  const get = (id: string, der: boolean) => {
    const v = out.get(id);
    return v === undefined ? null : extText(v, der);
  };
  return {
    issuer: get(OID.issuerV2, true) ?? get(OID.issuerV1, false),
    repo: get(OID.repoV1, false) ??
      get(OID.sourceRepo, true)?.replace(/^https:\/\/github\.com\//, "") ?? null,
    ref: get(OID.refV1, false) ?? get(OID.sourceRef, true),
    buildSigner: get(OID.buildSigner, true),
  };
}

function libraryCode(e: unknown): string {
  const code = (e as { code?: unknown })?.code;
  const text = String((e as Error)?.message ?? e);
  switch (code) {
    case "TLOG_INCLUSION_PROOF_ERROR":
    case "TLOG_INCLUSION_PROMISE_ERROR":
    case "TLOG_BODY_ERROR":
      return "REKOR_INCLUSION_INVALID";
    case "TLOG_MISSING_INCLUSION_ERROR":
    case "TIMESTAMP_ERROR":
      return "OBSERVER_TIMESTAMP_INSUFFICIENT";
    case "CERTIFICATE_ERROR":
      return /expired|not yet valid|validity/i.test(text) ? "CERT_EXPIRED" : "FULCIO_CHAIN_INVALID";
    case "SIGNATURE_ERROR":
      return "DSSE_SIGNATURE_INVALID";
    case "UNTRUSTED_SIGNER_ERROR":
      return "FULCIO_CHAIN_INVALID";
  }
  if (/sct/i.test(text)) return "SCT_INSUFFICIENT";
  return "BUNDLE_MALFORMED";
}

function parseStatement(payload: Uint8Array): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload));
    return typeof v === "object" && v !== null && !Array.isArray(v)
      ? v as Record<string, unknown>
      : null;
  } catch {
    return null;
  }
}

function registersOf(type: string, predicate: unknown): string[] | null {
  if (type !== MULTIPLATFORM_V1 || typeof predicate !== "object" || predicate === null) return null;
  const p = predicate as Record<string, unknown>;
  const tdx = p["tdx_measurement"] as Record<string, unknown> | undefined;
  const regs = [p["snp_measurement"], tdx?.["rtmr1"], tdx?.["rtmr2"]];
  return regs.every((r) => typeof r === "string" && HEX48.test(r)) ? regs as string[] : null;
}

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
/** Verifies a release bundle offline; never throws. */
export function verifyReleaseBundle(
  bundleJson: unknown,
  trustedRootJson: unknown,
  policy: ReleasePolicy,
  expectedDigest?: string,
): ReleaseResult {
  let trust;
  try {
    trust = toTrustMaterial(TrustedRoot.fromJSON(trustedRootJson));
  } catch (e) {
    return no("TRUST_ROOT_INVALID", `trusted root: ${String(e).slice(0, 200)}`);
  }
  let bundle;
  try {
    bundle = bundleFromJSON(bundleJson);
  } catch (e) {
    return no("BUNDLE_MALFORMED", `bundle: ${String(e).slice(0, 200)}`);
  }
  if (bundle.content.$case !== "dsseEnvelope") {
    return no("BUNDLE_MALFORMED", "the bundle carries no DSSE envelope");
  }
  if (bundle.verificationMaterial.content.$case !== "certificate") {
    return no("BUNDLE_MALFORMED", "the bundle's signer is not a single Fulcio certificate");
  }
  const env = bundle.content.dsseEnvelope;
  if (env.signatures.length !== 1) {
    return no("DSSE_SIGNATURE_INVALID", `the envelope has ${env.signatures.length} signatures`);
  }
  const tlogs = bundle.verificationMaterial.tlogEntries.length;
  if (tlogs < (policy.tlogMin ?? 1) || (policy.tlogMax != null && tlogs > policy.tlogMax)) {
    return no("TLOG_COUNT_OUT_OF_RANGE", `${tlogs} Rekor entries`);
  }
  // The library checks inclusion against the signed checkpoint's root only; the proof's own
  // rootHash must be that root too (Tinfoil SPEC §5.2; conformance 033).
  for (const t of bundle.verificationMaterial.tlogEntries) {
    const proof = t.inclusionProof;
    if (!proof?.checkpoint) continue;
    const rootLine = proof.checkpoint.envelope.split("\n")[2] ?? "";
    if (rootLine !== btoa(String.fromCharCode(...proof.rootHash))) {
      return no("CHECKPOINT_ROOT_MISMATCH", "inclusion proof root differs from the checkpoint's");
    }
  }
  let signer;
  try {
    const verifier = new Verifier(trust, {
      tlogThreshold: policy.tlogMin ?? 1,
      ctlogThreshold: policy.sctMin ?? 1,
    });
    signer = verifier.verify(toSignedEntity(bundle));
  } catch (e) {
    return no(libraryCode(e), `Sigstore verification: ${String(e).slice(0, 200)}`);
  }
  const ext = extensions(signer.identity?.oids ?? []);
  if (ext.issuer !== policy.oidcIssuer) {
    return no("OIDC_ISSUER_MISMATCH", `certificate issuer ${ext.issuer ?? "(none)"}`);
  }
  if (ext.repo !== policy.repo) {
    return no("WORKFLOW_REPOSITORY_MISMATCH", `certificate repository ${ext.repo ?? "(none)"}`);
  }
  const signerRef = ext.buildSigner?.split("@")[1] ?? null;
  if (
    ext.ref === null || !ext.ref.startsWith(policy.workflowRefPrefix) ||
    (signerRef !== null && !signerRef.startsWith(policy.workflowRefPrefix))
  ) {
    return no("WORKFLOW_REF_PREFIX_MISMATCH", `workflow ref ${ext.ref ?? "(none)"}`);
  }
  if (env.payloadType !== (policy.payloadType ?? "application/vnd.in-toto+json")) {
    return no("PAYLOAD_TYPE_MISMATCH", `payload type ${env.payloadType}`);
  }
  const st = parseStatement(env.payload);
  if (st === null) return no("BUNDLE_MALFORMED", "the DSSE payload is not a JSON object");
  const extra = Object.keys(st).filter((k) =>
    !["_type", "subject", "predicateType", "predicate"].includes(k)
  );
  if (extra.length) return no("BUNDLE_MALFORMED", `statement has unknown field ${extra[0]}`);
  const stTypes = policy.statementTypes === undefined ? [IN_TOTO_V1] : policy.statementTypes;
  if (stTypes !== null && !stTypes.includes(String(st["_type"]))) {
    return no("IN_TOTO_STATEMENT_TYPE_NOT_ALLOWED", `statement type ${String(st["_type"])}`);
  }
  const subjects = st["subject"];
  const first = Array.isArray(subjects) ? subjects[0] as Record<string, unknown> : undefined;
  const digest = (first?.["digest"] as Record<string, unknown> | undefined)?.["sha256"];
  if (typeof digest !== "string") return no("SUBJECT_MISSING", "the statement names no subject");
  if (expectedDigest !== undefined && digest.toLowerCase() !== expectedDigest.toLowerCase()) {
    return no("SUBJECT_DIGEST_MISMATCH", `subject digest ${digest}`);
  }
  const type = String(st["predicateType"]);
  const types = policy.predicateTypes === undefined ? [MULTIPLATFORM_V1] : policy.predicateTypes;
  if (types !== null && !types.includes(type)) {
    return no("PREDICATE_TYPE_NOT_ALLOWED", `predicate type ${type}`);
  }
  const registers = registersOf(type, st["predicate"]);
  if (registers === null) {
    return no("PREDICATE_MEASUREMENT_INVALID", `no ${type} measurement registers`);
  }
  return {
    ok: true,
    predicateType: type,
    registers,
    subjectName: String(first?.["name"] ?? ""),
    subjectDigest: digest.toLowerCase(),
    signerUri: ext.buildSigner ?? String(signer.identity?.subjectAlternativeName ?? ""),
    integratedTime: Number(bundle.verificationMaterial.tlogEntries[0]?.integratedTime ?? 0),
  };
}
