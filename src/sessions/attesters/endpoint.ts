/**
 * The HTTP side of upstream verification: where an upstream's evidence
 * lives relative to its configured base URL, fetching it over the pinned
 * channel with a size bound, and packaging the exact bytes as session
 * evidence (`data:` URL plus `sha256:` digest of those same bytes).
 */
import { bytesToHex, concatBytes, sha256Prefixed } from "../../aci/mod.ts";
import type { AttestationTarget, AttesterDeps } from "../types.ts";
import { refuse } from "./outcome.ts";

/** Evidence documents are small; anything larger is refused rather than buffered. */
export const MAX_EVIDENCE_BYTES = 4 * 1024 * 1024;

/** The `https:` origin of a base URL (`https://host[:port]`). */
export function upstreamOrigin(baseUrl: string): string {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    refuse("provider base_url is not a URL");
  }
  if (url.protocol !== "https:") refuse("a verified upstream must be reached over https");
  return url.origin;
}

/**
 * `{base}/v1{path}?{query}` whether the base URL already ends in `/v1` or
 * not (never `/v1/v1`).
 */
export function v1Url(baseUrl: string, path: string, query: Record<string, string>): string {
  const url = new URL(baseUrl);
  const prefix = url.pathname.replace(/\/+$/, "");
  url.pathname = (prefix.endsWith("/v1") ? prefix : `${prefix}/v1`) + path;
  url.search = new URLSearchParams(query).toString();
  url.hash = "";
  return url.toString();
}

/** 32 fresh random bytes as 64 lowercase hex. */
export function freshNonce(deps: Pick<AttesterDeps, "randomBytes">): string {
  const b = deps.randomBytes(32);
  if (b.length !== 32) refuse("random source returned the wrong number of bytes");
  return bytesToHex(b);
}

/** The verifier's confidential settings, or a refusal when the provider has none. */
export function confidentialOf(target: AttestationTarget) {
  const c = target.provider.confidential;
  if (!c) refuse(`provider ${target.name} has no confidential configuration`);
  return c;
}

/** GETs `url` with the pinned fetch and returns the body's exact bytes (200 only, bounded). */
export async function fetchEvidence(
  fetch: (url: string, init?: RequestInit) => Promise<Response>,
  url: string,
  what: string,
): Promise<Uint8Array> {
  const res = await fetch(url, { method: "GET", headers: { accept: "application/json" } });
  if (res.status !== 200) {
    await res.body?.cancel();
    refuse(`${what} answered HTTP ${res.status}`);
  }
  const declared = Number(res.headers.get("content-length") ?? "0");
  if (declared > MAX_EVIDENCE_BYTES) {
    await res.body?.cancel();
    refuse(`${what} is larger than ${MAX_EVIDENCE_BYTES} bytes`);
  }
  if (!res.body) return new Uint8Array(0);
  const parts: Uint8Array[] = [];
  let total = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_EVIDENCE_BYTES) {
      await reader.cancel();
      refuse(`${what} is larger than ${MAX_EVIDENCE_BYTES} bytes`);
    }
    parts.push(value);
  }
  return concatBytes(parts, total);
}

/** Parses evidence bytes as a JSON object. */
export function parseJsonObject(bytes: Uint8Array, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    refuse(`${what} is not valid JSON`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) refuse(`${what} is not an object`);
  return v as Record<string, unknown>;
}

function base64(bytes: Uint8Array): string {
  let bin = "";
  const CHUNK = 0x8000;
  for (let i = 0; i < bytes.length; i += CHUNK) {
    bin += String.fromCharCode(...bytes.subarray(i, i + CHUNK));
  }
  return btoa(bin);
}

/** Session evidence over the exact bytes consumed. */
export function sessionEvidence(
  mediaType: string,
  bytes: Uint8Array,
): { digest: string; data: string } {
  return { digest: sha256Prefixed(bytes), data: `data:${mediaType};base64,${base64(bytes)}` };
}

/** Epoch ms → integer Unix seconds. */
export function unixSeconds(ms: number): number {
  return Math.floor(ms / 1000);
}

/**
 * The opening every evidence-fetching verifier shares: the provider's
 * confidential settings, the upstream's TLS key observed, and the evidence at
 * `path` (query built around a fresh nonce) fetched over a channel pinned to
 * that key, as exact bytes.
 */
export async function fetchBoundEvidence(
  target: AttestationTarget,
  deps: AttesterDeps,
  evidence: { path: string; query: (nonce: string) => Record<string, string>; what: string },
) {
  const conf = confidentialOf(target);
  const origin = upstreamOrigin(target.baseUrl);
  const tls = await deps.observeTls(origin, conf.tls_ca_pem);
  const nonce = freshNonce(deps);
  const bytes = await fetchEvidence(
    deps.pinnedFetch(tls.spkiSha256, conf.tls_ca_pem),
    v1Url(target.baseUrl, evidence.path, evidence.query(nonce)),
    evidence.what,
  );
  return { conf, origin, tls, nonce, bytes };
}
