/** Attestation's front door: the gateway's own reports, identity, provenance and replicas. */

export { createIdentity, type Identity } from "./identity.ts";
export { createOwnCollateral, type ReportCollateral } from "./own_collateral.ts";
export type { ImageProvenance, SourceProvenance } from "./provenance.ts";
export {
  assertReportData,
  type Quote,
  type QuoteProvider,
  REPORT_DATA_LENGTH,
} from "./quote_provider.ts";
export { createReplicaRegistry, type ReplicaRegistry } from "./replicas.ts";
export {
  type CanonicalReport,
  createReportService,
  KEYSET_ARCHIVE,
  type ReportService,
} from "./reports.ts";
