/**
 * One attestation of one keyset: the entry a canonical report carries (and
 * every live replica announces). Its own module so the report service and
 * the replica registry both name it without importing each other.
 */
import type { SourceProvenance } from "./provenance.ts";
import type { IdentitySnapshot } from "./identity.ts";

/** A keyset, its digest, the REPORTDATA binding it, and the quote over it. */
export interface AttestationEntry {
  tee_type: string;
  workload_keyset: IdentitySnapshot["keyset"];
  workload_keyset_digest: string;
  report_data: string;
  source_provenance: SourceProvenance | null;
  evidence: { quote: string; provider: string; aux?: string; hardware: boolean };
  replica_id?: string;
}
