/**
 * Test support only: builds canonical and legacy reports around a
 * development quote (and synthetic TDX quote headers) from real workload
 * keys, so the verifiers and the CLI can be exercised end to end without a
 * TEE. Never used to serve reports.
 */

import {
  buildKeyset,
  bytesToHex,
  DEV_TEE_TYPE,
  devQuote,
  keysetDigest,
  legacyAddressBytes,
  legacyReportData,
  legacySigningAddress,
  type LegacySigningAlgo,
  legacySigningPublicKey,
  type Receipt,
  reportData,
  reportDataSlot,
  sha256Prefixed,
  signReceipt,
  type WorkloadKeys,
  type WorkloadKeyset,
} from "../aci/mod.ts";

/** A canonical report over `keys` bound to `nonce`, carrying `quote(slot)` as evidence. */
export function makeReport(
  keys: WorkloadKeys,
  nonce: string | null,
  opts: { teeType?: string; quote?: (slot: Uint8Array) => Uint8Array; notAfter?: number } = {},
): { report: Record<string, unknown>; keyset: WorkloadKeyset } {
  const keyset = buildKeyset({
    keys,
    subject: "test-gateway",
    notAfter: opts.notAfter ?? 2_000_000_000,
  });
  const digest = keysetDigest(keyset);
  const rd = reportData(digest, nonce);
  const quote = (opts.quote ?? devQuote)(reportDataSlot(rd));
  const attestation = {
    tee_type: opts.teeType ?? DEV_TEE_TYPE,
    workload_keyset: keyset,
    report_data: bytesToHex(rd),
    source_provenance: null,
    evidence: { quote: bytesToHex(quote) },
  };
  return {
    keyset,
    report: {
      api_version: "aci/1",
      workload_keyset_digest: digest,
      attestation,
      service_capabilities: { serving: "aggregator", supported_e2ee_versions: [] },
      all_attestations: [attestation],
    },
  };
}

/**
 * A receipt signed by `keys` for one exchange under `keyset`: `request.received`
 * and `response.returned` with the hashes of `request` and `response`.
 */
export function makeReceipt(
  keys: WorkloadKeys,
  keyset: WorkloadKeyset,
  receiptId: string,
  request: Uint8Array,
  response: Uint8Array,
): Receipt {
  return signReceipt({
    api_version: "aci/1",
    receipt_id: receiptId,
    chat_id: "c1",
    model: "m",
    workload_keyset_digest: keysetDigest(keyset),
    endpoint: "/v1/chat/completions",
    method: "POST",
    served_at: 1_750_000_000,
    event_log: [
      { type: "request.received", body_hash: sha256Prefixed(request) },
      { type: "response.returned", body_hash: sha256Prefixed(response) },
    ],
  }, keys);
}

/** A legacy report: the canonical one plus signing fields and its own legacy-layout dev quote. */
export function makeLegacyReport(
  keys: WorkloadKeys,
  algo: LegacySigningAlgo,
  nonce: string | null,
  randomBytes: (n: number) => Uint8Array,
): Record<string, unknown> {
  const { report } = makeReport(keys, null);
  const { slot, nonceHex } = legacyReportData(legacyAddressBytes(algo, keys), nonce, randomBytes);
  return {
    ...report,
    signing_address: legacySigningAddress(algo, keys),
    signing_algo: algo,
    signing_public_key: legacySigningPublicKey(algo, keys),
    request_nonce: nonceHex,
    intel_quote: bytesToHex(devQuote(slot)),
    nvidia_payload: null,
  };
}

/** A syntactically plausible (unsigned) TDX quote v4 or v5 with `slot` as REPORTDATA. */
export function fakeTdxQuote(slot: Uint8Array, version: 4 | 5 = 4): Uint8Array {
  const q = new Uint8Array(1024);
  q[0] = version;
  q[2] = 2; // ECDSA P-256 attestation key
  q[4] = 0x81; // TDX
  if (version === 5) q[48] = 2; // body type TDX 1.0
  q.set(slot, version === 4 ? 568 : 574);
  return q;
}
