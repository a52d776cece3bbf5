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

export function createReportService(o: ReportServiceOptions): ReportService {
  return new Reports(o);
}

/** The nonce-less report cache per keyset and the bound on quotes in flight. */
class Reports implements ReportService {
  #o: ReportServiceOptions;
  #cache = new Map<string, Promise<AttestationEntry>>();
  #inFlight = 0;
  #max: number;

  constructor(o: ReportServiceOptions) {
    this.#o = o;
    this.#max = o.maxInFlight ?? 32;
  }

  async canonical(nonce: string | null): Promise<CanonicalReport> {
    const snap = this.#o.identity.current();
    const att = nonce === null ? await this.#nonceless(snap) : await this.#entry(snap, nonce);
    return await this.#wrap(att);
  }

  async archived(digest: string): Promise<CanonicalReport> {
    const o = this.#o;
    // The stored report first, even for the current keyset: it is the one whose digest the
    // transparency log holds (a fresh one would list today's replicas instead).
    const stored = await o.kv.get<{ report: CanonicalReport }>([KEYSET_ARCHIVE, digest]);
    if (!stored.value && digest === o.identity.current().digest) {
      return await this.canonical(null);
    }
    if (!stored.value) {
      throw new GatewayError("not_found", "no keyset with this digest was ever served here");
    }
    return stored.value.report;
  }

  async legacy(nonce: string | null, algo: LegacySigningAlgo): Promise<Record<string, unknown>> {
    const snap = this.#o.identity.current();
    const canonical = await this.#wrap(await this.#nonceless(snap));
    const { slot, nonceHex } = legacyReportData(
      legacyAddressBytes(algo, snap.keys),
      nonce,
      this.#o.randomBytes,
    );
    const q = await this.#quote(slot);
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
  }

  async archive(snap: IdentitySnapshot): Promise<CanonicalReport> {
    const report = await this.#wrap(await this.#nonceless(snap));
    // Plain set: the archive only ever grows, one immutable entry per digest.
    await retryTransient(() =>
      this.#o.kv.set([KEYSET_ARCHIVE, snap.digest], { keyset: snap.keyset, report })
    );
    return report;
  }

  async #quote(slot: Uint8Array): Promise<Quote> {
    if (this.#inFlight >= this.#max) {
      throw new GatewayError(
        "unavailable",
        "too many attestation requests in flight; retry shortly",
      );
    }
    this.#inFlight++;
    try {
      return await this.#o.quotes.getQuote(slot);
    } catch {
      throw new GatewayError("unavailable", "the TEE quote could not be obtained");
    } finally {
      this.#inFlight--;
    }
  }

  async #entry(snap: IdentitySnapshot, nonce: string | null): Promise<AttestationEntry> {
    const o = this.#o;
    const rd = reportData(snap.digest, nonce);
    const q = await this.#quote(reportDataSlot(rd));
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
  }

  #nonceless(snap: IdentitySnapshot): Promise<AttestationEntry> {
    let p = this.#cache.get(snap.digest);
    if (!p) {
      p = this.#entry(snap, null);
      this.#cache.set(snap.digest, p);
      p.catch(() => this.#cache.delete(snap.digest));
    }
    return p;
  }

  async #wrap(att: AttestationEntry): Promise<CanonicalReport> {
    const others = await this.#o.replicas.others();
    return {
      api_version: "aci/1",
      workload_keyset_digest: att.workload_keyset_digest,
      attestation: att,
      service_capabilities: this.#o.capabilities,
      all_attestations: [att, ...others],
    };
  }
}
