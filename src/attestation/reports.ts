/**
 * The gateway's attestation reports. The canonical report binds the keyset
 * digest and the client's nonce into the quote's REPORTDATA through the ACI
 * statement; the legacy report gets its own quote in the vllm-proxy layout
 * (signing address ‖ nonce). Nonce-less reports are cached per keyset;
 * reports with a nonce are always fresh. Every keyset's nonce-less report is
 * archived in KV so old receipts stay verifiable after rotation or restart.
 */
import {
  bytesToHex,
  legacyAddressBytes,
  legacyReportData,
  legacySigningAddress,
  type LegacySigningAlgo,
  legacySigningPublicKey,
  reportData,
  reportDataSlot,
} from "../aci/mod.ts";
import { GatewayError } from "../http/mod.ts";
import type { Identity, IdentitySnapshot } from "./identity.ts";
import type { Quote, QuoteProvider } from "./quote_provider.ts";
import type { SourceProvenance } from "./provenance.ts";
import type { ReplicaRegistry } from "./replicas.ts";
import type { AttestationEntry } from "./entry.ts";
import { retryTransient } from "../store/mod.ts";

export const KEYSET_ARCHIVE = "keysets";

export interface CanonicalReport {
  api_version: "aci/1";
  workload_keyset_digest: string;
  attestation: AttestationEntry;
  service_capabilities: Record<string, unknown>;
  all_attestations: AttestationEntry[];
}

// Its own module so the replica registry can name it without importing this one.
export type { AttestationEntry } from "./entry.ts";

export interface ReportServiceOptions {
  identity: Identity;
  quotes: QuoteProvider;
  kv: Deno.Kv;
  provenance: SourceProvenance | null;
  capabilities: Record<string, unknown>;
  replicas: ReplicaRegistry;
  randomBytes: (n: number) => Uint8Array;
  /** Bound on quote requests in flight; beyond it, 503 rather than an unbounded queue. */
  maxInFlight?: number;
}

export interface ReportService {
  canonical(nonce: string | null): Promise<CanonicalReport>;
  archived(digest: string): Promise<CanonicalReport>;
  legacy(nonce: string | null, algo: LegacySigningAlgo): Promise<Record<string, unknown>>;
  /** Archive the current keyset's report (start-up, rotation). */
  archive(snapshot: IdentitySnapshot): Promise<CanonicalReport>;
}

// Long as one closure over shared state; each inner function is short.
export function createReportService(o: ReportServiceOptions): ReportService {
  const cache = new Map<string, Promise<AttestationEntry>>();
  let inFlight = 0;
  const max = o.maxInFlight ?? 32;

  const quote = async (slot: Uint8Array): Promise<Quote> => {
    if (inFlight >= max) {
      throw new GatewayError(
        "unavailable",
        "too many attestation requests in flight; retry shortly",
      );
    }
    inFlight++;
    try {
      return await o.quotes.getQuote(slot);
    } catch {
      throw new GatewayError("unavailable", "the TEE quote could not be obtained");
    } finally {
      inFlight--;
    }
  };

  const entry = async (snap: IdentitySnapshot, nonce: string | null): Promise<AttestationEntry> => {
    const rd = reportData(snap.digest, nonce);
    const q = await quote(reportDataSlot(rd));
    return {
      tee_type: q.tee_type,
      workload_keyset: snap.keyset,
      workload_keyset_digest: snap.digest,
      report_data: bytesToHex(rd),
      source_provenance: o.provenance,
      evidence: {
        quote: bytesToHex(q.quote),
        provider: q.provider,
        ...(q.aux ? { aux: bytesToHex(q.aux) } : {}),
        hardware: o.quotes.hardware,
      },
      replica_id: o.replicas.id,
    };
  };

  const nonceless = (snap: IdentitySnapshot): Promise<AttestationEntry> => {
    let p = cache.get(snap.digest);
    if (!p) {
      p = entry(snap, null);
      cache.set(snap.digest, p);
      p.catch(() => cache.delete(snap.digest));
    }
    return p;
  };

  const wrap = async (att: AttestationEntry): Promise<CanonicalReport> => {
    const others = await o.replicas.others();
    return {
      api_version: "aci/1",
      workload_keyset_digest: att.workload_keyset_digest,
      attestation: att,
      service_capabilities: o.capabilities,
      all_attestations: [att, ...others],
    };
  };

  const service: ReportService = {
    async canonical(nonce) {
      const snap = o.identity.current();
      const att = nonce === null ? await nonceless(snap) : await entry(snap, nonce);
      return await wrap(att);
    },
    async archived(digest) {
      // The stored report first, even for the current keyset: it is the one whose digest the
      // transparency log holds (a fresh one would list today's replicas instead).
      const stored = await o.kv.get<{ report: CanonicalReport }>([KEYSET_ARCHIVE, digest]);
      if (!stored.value && digest === o.identity.current().digest) {
        return await service.canonical(null);
      }
      if (!stored.value) {
        throw new GatewayError("not_found", "no keyset with this digest was ever served here");
      }
      return stored.value.report;
    },
    async legacy(nonce, algo) {
      const snap = o.identity.current();
      const canonical = await wrap(await nonceless(snap));
      const { slot, nonceHex } = legacyReportData(
        legacyAddressBytes(algo, snap.keys),
        nonce,
        o.randomBytes,
      );
      const q = await quote(slot);
      const own = canonical.attestation;
      return {
        ...canonical,
        signing_address: legacySigningAddress(algo, snap.keys),
        signing_algo: algo,
        signing_public_key: legacySigningPublicKey(algo, snap.keys),
        request_nonce: nonceHex,
        intel_quote: bytesToHex(q.quote),
        nvidia_payload: null,
        legacy_report_data: bytesToHex(slot),
        all_attestations: [{
          ...own,
          signing_address: legacySigningAddress(algo, snap.keys),
          signing_algo: algo,
          intel_quote: bytesToHex(q.quote),
        }],
      };
    },
    async archive(snap) {
      const report = await wrap(await nonceless(snap));
      // Plain set: the archive only ever grows, one immutable entry per digest.
      await retryTransient(() =>
        o.kv.set([KEYSET_ARCHIVE, snap.digest], { keyset: snap.keyset, report })
      );
      return report;
    },
  };
  return service;
}
