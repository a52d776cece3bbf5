/**
 * Offline verification's front door: TDX, SEV-SNP, NVIDIA GPU, dstack and ACI reports,
 * receipts, and their trust inputs. The client library and the /verify page's script import the
 * files they need directly (their browser builds swap files).
 */

export { VERIFY_PAGE_SCRIPT } from "./browser/bundle.gen.ts";
export { BUNDLE_FORMAT, verifyBundle } from "./bundle.ts";
export { allPassed, type Check, check } from "./checks.ts";
export {
  archiveDigest,
  archiveIsEmpty,
  type CollateralArchive,
  CollateralCollector,
} from "./collateral_archive.ts";
export { verifyEventLog } from "./dstack/event_log.ts";
export { checkReportData, expectedReportData } from "./dstack/report_data.ts";
export { evidenceQuote, type QuoteCheck } from "./evidence.ts";
export { hardwareQuoteCheck } from "./hardware_quote_check.ts";
export { isRecord, recordField } from "./json_shape.ts";
export { EVIDENCE_KINDS, evidenceKind } from "./kinds/table.ts";
export { type AuditChoices, type AuditTrust, evidenceContext } from "./kinds/types.ts";
export { verifyLegacyReport, verifySignatureEnvelope } from "./legacy.ts";
export { parseNearAiReport } from "./near_ai/report.ts";
export { verifyNearSignature } from "./near_ai/signature.ts";
export { type ComponentVerdict, verifyNearAiReport } from "./near_ai/verify.ts";
export { defaultGpuDeps, type GpuDeps } from "./nvidia/deps.ts";
export { parseGpuPayload } from "./nvidia/payload.ts";
export { gpuDepsFromConfig, type GpuSetupIo, type NvidiaTrust } from "./nvidia/setup.ts";
export { verifyGpuEvidence } from "./nvidia/verify.ts";
export { verifyReceipt } from "./receipt.ts";
export { extractKeyset, servedKeysetDigest, verifyReport } from "./report.ts";
export { verifySessionGpu } from "./session_gpu.ts";
export { parseSnpReport, type SnpReport, snpReportHex, type SnpTcb } from "./sev_snp/report.ts";
export {
  type SnpRoot,
  snpRootsFromPem,
  type SnpTrust,
  snpTrustFromConfig,
} from "./sev_snp/trust.ts";
export {
  AMD_KDS_BASE_URL,
  kdsVcekSource,
  localVcekSource,
  type VcekSource,
} from "./sev_snp/vcek_source.ts";
export { type SnpVerified, splitAskArkPem, verifySnpReport } from "./sev_snp/verify_report.ts";
export { verifyReleaseBundle } from "./sigstore/release.ts";
export { collateralFromDcapQvlJson } from "./tdx/collateral.ts";
export {
  type CollateralSource,
  INTEL_PCS_BASE_URL,
  LocalCollateralSource,
  PcsCollateralSource,
  verifyTdxQuoteWithSource,
} from "./tdx/collateral_source.ts";
export { quoteCollateralKey, type TdxVerified } from "./tdx/dcap.ts";
export { DEFAULT_ACCEPTED_TCB_STATUSES, type TdxTcbPolicy } from "./tdx/tcb_policy.ts";
export { tdxQuoteCheck } from "./tdx_quote_check.ts";
export {
  matchRelease,
  parseTinfoilEvidence,
  tinfoilBinding,
  type TinfoilEvidence,
} from "./tinfoil/attestation.ts";
export { type Fetch, followLog, keysetLogKeys, LogReader, type MonitorState } from "./tlog.ts";
export { pemCertificatesToDer } from "./x509/pem.ts";
