/**
 * Where TDX collateral comes from: a `CollateralSource` keyed by FMSPC and PCK
 * CA kind. `LocalCollateralSource` is a map the caller fills (offline, tests);
 * `PcsCollateralSource` fetches from Intel PCS or a PCCS and caches each
 * collateral set until its earliest nextUpdate.
 */
import "reflect-metadata";
import { X509Crl } from "@peculiar/x509";
import { ownBytes } from "../../aci/bytes.ts";
import { errorText } from "../x509/verify_result.ts";
import { collateralFromPcsResponses, type TdxCollateral } from "./collateral.ts";
import {
  quoteCollateralKey,
  type TdxVerifyOptions,
  type TdxVerifyResult,
  verifyTdxQuote,
} from "./dcap.ts";

export type PckCaKind = "platform" | "processor";

/** Supplies collateral; `get` rejects when none is available. */
export interface CollateralSource {
  get(fmspc: string, ca: PckCaKind): Promise<TdxCollateral>;
}

/** Intel's public PCS. */
export const INTEL_PCS_BASE_URL = "https://api.trustedservices.intel.com";

const keyOf = (fmspc: string, ca: PckCaKind) => `${fmspc.toLowerCase()}/${ca}`;

/** An in-memory map of collateral the caller fills. */
export class LocalCollateralSource implements CollateralSource {
  #entries = new Map<string, TdxCollateral>();

  set(fmspc: string, ca: PckCaKind, collateral: TdxCollateral): this {
    this.#entries.set(keyOf(fmspc, ca), collateral);
    return this;
  }

  get(fmspc: string, ca: PckCaKind): Promise<TdxCollateral> {
    const c = this.#entries.get(keyOf(fmspc, ca));
    return c
      ? Promise.resolve(c)
      : Promise.reject(new Error(`no local collateral for FMSPC ${fmspc} (${ca})`));
  }
}

function nextUpdateOfJson(raw: string): number | null {
  try {
    const v: unknown = JSON.parse(raw);
    if (
      typeof v === "object" && v !== null && "nextUpdate" in v && typeof v.nextUpdate === "string"
    ) {
      const t = Date.parse(v.nextUpdate);
      return Number.isFinite(t) ? t : null;
    }
  } catch {
    // fall through: unparsable documents give no expiry and are not cached
  }
  return null;
}

function nextUpdateOfCrl(der: Uint8Array): number | null {
  try {
    return new X509Crl(ownBytes(der)).nextUpdate?.getTime() ?? null;
  } catch {
    return null;
  }
}

/** Earliest nextUpdate (epoch ms) of the collateral's documents and CRLs, or null if any is unreadable. */
function collateralNextUpdateMs(c: TdxCollateral): number | null {
  const all = [
    nextUpdateOfJson(c.tcbInfo),
    nextUpdateOfJson(c.qeIdentity),
    nextUpdateOfCrl(c.pckCrl),
    nextUpdateOfCrl(c.rootCaCrl),
  ];
  if (all.some((x) => x === null)) return null;
  return Math.min(...(all as number[]));
}

export interface PcsSourceOptions {
  /** PCS or PCCS base, e.g. `INTEL_PCS_BASE_URL`; the v4 API paths are appended. */
  baseUrl: string;
  fetch: typeof fetch;
  /** Clock, epoch ms. */
  now: () => number;
  /** Root CA CRL URL. Default: `${baseUrl}/sgx/certification/v4/rootcacrl` (PCCS). */
  rootCaCrlUrl?: string;
}

interface CacheEntry {
  collateral: TdxCollateral;
  expiresAtMs: number;
}

/** Fetches collateral from PCS/PCCS (API v4) and caches it until its earliest nextUpdate. */
export class PcsCollateralSource implements CollateralSource {
  #opts: PcsSourceOptions;
  #cache = new Map<string, CacheEntry>();
  #inflight = new Map<string, Promise<TdxCollateral>>();

  constructor(opts: PcsSourceOptions) {
    this.#opts = { ...opts, baseUrl: opts.baseUrl.replace(/\/+$/, "") };
  }

  get(fmspc: string, ca: PckCaKind): Promise<TdxCollateral> {
    if (!/^[0-9a-fA-F]{12}$/.test(fmspc)) {
      return Promise.reject(new Error("FMSPC must be 6 bytes of hex"));
    }
    const key = keyOf(fmspc, ca);
    const hit = this.#cache.get(key);
    if (hit && this.#opts.now() < hit.expiresAtMs) return Promise.resolve(hit.collateral);
    const pending = this.#inflight.get(key);
    if (pending) return pending;
    const p = this.#fetchAll(fmspc, ca).finally(() => this.#inflight.delete(key));
    this.#inflight.set(key, p);
    return p;
  }

  async #fetchAll(fmspc: string, ca: PckCaKind): Promise<TdxCollateral> {
    const b = this.#opts.baseUrl;
    const [tcb, qe, pckCrl, rootCrl] = await Promise.all([
      this.#fetch(`${b}/tdx/certification/v4/tcb?fmspc=${fmspc.toUpperCase()}`),
      this.#fetch(`${b}/tdx/certification/v4/qe/identity`),
      this.#fetch(`${b}/sgx/certification/v4/pckcrl?ca=${ca}&encoding=der`),
      this.#fetch(this.#opts.rootCaCrlUrl ?? `${b}/sgx/certification/v4/rootcacrl`),
    ]);
    const chain = (r: Response, ...names: string[]) => {
      for (const n of names) {
        const v = r.headers.get(n);
        if (v) return decodeURIComponent(v);
      }
      throw new Error(`PCS response lacks ${names[0]} header`);
    };
    const built = collateralFromPcsResponses({
      tcbInfoBody: new TextDecoder().decode(tcb.body),
      tcbInfoIssuerChain: chain(tcb.res, "TCB-Info-Issuer-Chain", "SGX-TCB-Info-Issuer-Chain"),
      qeIdentityBody: new TextDecoder().decode(qe.body),
      qeIdentityIssuerChain: chain(qe.res, "SGX-Enclave-Identity-Issuer-Chain"),
      pckCrlBody: pckCrl.body,
      pckCrlIssuerChain: chain(pckCrl.res, "SGX-PCK-CRL-Issuer-Chain"),
      rootCaCrlBody: rootCrl.body,
    });
    if (!built.ok) throw new Error(built.reason);
    const expiresAtMs = collateralNextUpdateMs(built.collateral);
    // Only cache what says how long it is good for.
    if (expiresAtMs !== null) {
      this.#cache.set(keyOf(fmspc, ca), { collateral: built.collateral, expiresAtMs });
    }
    return built.collateral;
  }

  async #fetch(url: string): Promise<{ res: Response; body: Uint8Array }> {
    const res = await this.#opts.fetch(url);
    const body = new Uint8Array(await res.arrayBuffer());
    if (res.status !== 200) {
      throw new Error(`PCS ${new URL(url).pathname} returned HTTP ${res.status}`);
    }
    return { res, body };
  }
}

/** Options of `verifyTdxQuoteWithSource`: those of `verifyTdxQuote` with a source instead of collateral. */
export type TdxSourceVerifyOptions = Omit<TdxVerifyOptions, "collateral"> & {
  source: CollateralSource;
};

/** Picks the collateral for the quote's FMSPC and CA from `source`, then verifies; never throws. */
export async function verifyTdxQuoteWithSource(
  quote: Uint8Array,
  opts: TdxSourceVerifyOptions,
): Promise<TdxVerifyResult> {
  const key = quoteCollateralKey(quote);
  if (!key.ok) return { ok: false, stage: "parse", reason: key.reason };
  let collateral: TdxCollateral;
  try {
    collateral = await opts.source.get(key.fmspc, key.ca);
  } catch (e) {
    return { ok: false, stage: "collateral", reason: `collateral unavailable: ${errorText(e)}` };
  }
  const { source: _source, ...rest } = opts;
  return verifyTdxQuote(quote, { ...rest, collateral });
}
