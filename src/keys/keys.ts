/**
 * API keys: creation, lookup, revocation and bearer authentication.
 *
 * A key is `cgw-` + 32 random bytes in base64url. Only its SHA-256 digest is
 * stored (`["keys_by_digest", hex] → key_id`); the key itself is shown once at
 * creation and never stored or logged. `key_id` (`key_<12 hex>`) is public.
 *
 * Caching: `createAuthenticator` keeps successful lookups in process for
 * `ttlMs` (default 2 s, `AUTH_CACHE_TTL_MS`), so a key revoked elsewhere stops
 * working within that TTL; a revocation through the same authenticator's
 * `invalidate` takes effect at once. Failures are never cached.
 */

import { Buffer } from "node:buffer";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { GatewayError } from "../http/mod.ts";
import { retryTransient } from "../store/mod.ts";
import { balanceKey, digestIndexKey, keyRecordKey } from "./kv_layout.ts";

export const KEY_PREFIX = "cgw-";
/** How long a positive authentication may be served from memory. */
export const AUTH_CACHE_TTL_MS = 2_000;
const KEY_RE = /^cgw-[A-Za-z0-9_-]{43}$/;
const KEY_ID_RE = /^key_[0-9a-f]{12}$/;
/** Prefixes of other platforms' keys, refused with a pointed message. */
const FOREIGN_PREFIXES = ["sk-", "sk_", "pk-", "rk-", "xai-", "gsk_", "AIza", "hf_", "r8_"];

export const TIERS = ["free", "pro", "enterprise"] as const;
export type Tier = (typeof TIERS)[number];

export interface KeyRecord {
  key_id: string;
  name: string;
  tier: Tier;
  /** Epoch milliseconds. */
  created_at: number;
  /** Epoch milliseconds, or null while active. */
  revoked_at: number | null;
  /** SHA-256 of the key, lowercase hex. */
  digest: string;
  /** Per-key overrides of the tier limits (enterprise). */
  rpm?: number;
  tpm?: number;
}

export function isTier(v: unknown): v is Tier {
  return v === "free" || v === "pro" || v === "enterprise";
}

export function isKeyId(v: string): boolean {
  return KEY_ID_RE.test(v);
}

/** SHA-256 hex of a key string. */
export function keyDigest(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** Narrows a stored key record; anything else means the store is corrupt. */
export function parseKeyRecord(v: unknown): KeyRecord {
  if (typeof v !== "object" || v === null) throw new Error("corrupt key record");
  const o = v as Record<string, unknown>;
  const { key_id, name, tier, created_at, revoked_at, digest, rpm, tpm } = o;
  if (
    typeof key_id !== "string" || typeof name !== "string" || !isTier(tier) ||
    typeof created_at !== "number" || (revoked_at !== null && typeof revoked_at !== "number") ||
    typeof digest !== "string" ||
    (rpm !== undefined && typeof rpm !== "number") || (tpm !== undefined && typeof tpm !== "number")
  ) {
    throw new Error("corrupt key record");
  }
  const rec: KeyRecord = { key_id, name, tier, created_at, revoked_at, digest };
  if (rpm !== undefined) rec.rpm = rpm;
  if (tpm !== undefined) rec.tpm = tpm;
  return rec;
}

export interface CreateKeyOptions {
  tier: Tier;
  name?: string;
  /** Per-key limits; only meaningful for enterprise keys. */
  rpm?: number;
  tpm?: number;
  /** Initial balance in nano-credits, set in the same atomic write. */
  creditsNano?: bigint;
  now: () => number;
}

function checkLimit(name: string, v: number | undefined): void {
  if (v !== undefined && (!Number.isSafeInteger(v) || v <= 0)) {
    throw new RangeError(`${name} must be a positive integer`);
  }
}

/** Creates a key. The returned `key` is the only copy: show it once. */
export async function createKey(
  kv: Deno.Kv,
  opts: CreateKeyOptions,
): Promise<{ key: string; record: KeyRecord }> {
  if (!isTier(opts.tier)) throw new RangeError("unknown tier");
  checkLimit("rpm", opts.rpm);
  checkLimit("tpm", opts.tpm);
  const credits = opts.creditsNano ?? 0n;
  if (credits < 0n || credits >= 1n << 63n) throw new RangeError("credits out of range");
  for (let attempt = 0; attempt < 5; attempt++) {
    const key = KEY_PREFIX + randomBytes(32).toString("base64url");
    const keyId = "key_" + randomBytes(6).toString("hex");
    const digest = keyDigest(key);
    const record: KeyRecord = {
      key_id: keyId,
      name: opts.name ?? "",
      tier: opts.tier,
      created_at: opts.now(),
      revoked_at: null,
      digest,
    };
    if (opts.rpm !== undefined) record.rpm = opts.rpm;
    if (opts.tpm !== undefined) record.tpm = opts.tpm;
    // Another process on the same file (the gateway, a replica) may hold the write lock.
    const res = await retryTransient(() => {
      const atomic = kv.atomic()
        .check({ key: keyRecordKey(keyId), versionstamp: null })
        .check({ key: digestIndexKey(digest), versionstamp: null })
        .set(keyRecordKey(keyId), record)
        .set(digestIndexKey(digest), keyId);
      if (credits > 0n) atomic.set(balanceKey(keyId), new Deno.KvU64(credits));
      return atomic.commit();
    });
    if (res.ok) return { key, record };
    // A key id collision (48 random bits): draw again.
  }
  throw new Error("could not allocate a key id");
}

export async function getKey(kv: Deno.Kv, keyId: string): Promise<KeyRecord | null> {
  const e = await kv.get(keyRecordKey(keyId));
  return e.value === null ? null : parseKeyRecord(e.value);
}

export async function listKeys(kv: Deno.Kv): Promise<KeyRecord[]> {
  const out: KeyRecord[] = [];
  for await (const e of kv.list({ prefix: ["keys"] })) out.push(parseKeyRecord(e.value));
  return out;
}

/** Another writer changed the record between the read and the commit: read it again. */
const CHANGED = Symbol("changed");

/** Marks a key revoked; returns the updated record, or null if unknown. Idempotent. */
export async function revokeKey(
  kv: Deno.Kv,
  keyId: string,
  now: () => number,
): Promise<KeyRecord | null> {
  for (;;) {
    const out = await retryTransient(async () => {
      const e = await kv.get(keyRecordKey(keyId));
      if (e.value === null) return null;
      const rec = parseKeyRecord(e.value);
      if (rec.revoked_at !== null) return rec;
      const updated: KeyRecord = { ...rec, revoked_at: now() };
      const res = await kv.atomic().check(e).set(keyRecordKey(keyId), updated).commit();
      return res.ok ? updated : CHANGED;
    });
    if (out !== CHANGED) return out;
  }
}

/**
 * Extracts and shape-checks the bearer key. Messages never echo the key.
 * Returns the key's digest.
 */
function bearerDigest(header: string | null): string {
  if (header === null || header.trim() === "") {
    throw new GatewayError(
      "invalid_api_key",
      "Missing API key: send it as 'Authorization: Bearer <API_KEY>'.",
    );
  }
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(header);
  if (m === null) {
    throw new GatewayError(
      "invalid_api_key",
      "Malformed Authorization header: expected 'Bearer <API_KEY>'.",
    );
  }
  const key = m[1];
  if (!key.startsWith(KEY_PREFIX) && FOREIGN_PREFIXES.some((p) => key.startsWith(p))) {
    throw new GatewayError(
      "invalid_api_key",
      "API keys from other platforms are not accepted; create a key in the dashboard.",
    );
  }
  if (!KEY_RE.test(key)) throw new GatewayError("invalid_api_key", "Malformed API key.");
  return keyDigest(key);
}

const UNKNOWN = () => new GatewayError("invalid_api_key", "Invalid API key.");

/** Read in place of a record when the digest is unknown (no key id has this form). */
const NO_KEY_ID = "-";

/**
 * Unknown, revoked and live keys do the same work: the index
 * read, one record read (of a key id that cannot exist when the digest is
 * unknown), and one constant-time comparison, so their timing tells an
 * outsider nothing about which keys were ever issued.
 */
async function lookup(kv: Deno.Kv, digest: string): Promise<KeyRecord> {
  const idx = await kv.get(digestIndexKey(digest));
  const id = typeof idx.value === "string" ? idx.value : NO_KEY_ID;
  const rec = await getKey(kv, id);
  const b = Buffer.from(digest, "hex");
  // Compared against itself when there is no record: the same work, a result ignored.
  const a = rec === null ? b : Buffer.from(rec.digest, "hex");
  const same = a.length === b.length && timingSafeEqual(a, b);
  if (id === NO_KEY_ID || rec === null || !same) throw UNKNOWN();
  // A revoked key answers exactly like an unknown one: the 401 tells an outsider nothing.
  if (rec.revoked_at !== null) throw UNKNOWN();
  return rec;
}

/** Authenticates an `Authorization` header against KV (no cache). */
export function authenticate(kv: Deno.Kv, authorizationHeader: string | null): Promise<KeyRecord> {
  let digest: string;
  try {
    digest = bearerDigest(authorizationHeader);
  } catch (e) {
    return Promise.reject(e);
  }
  return lookup(kv, digest);
}

export interface Authenticator {
  authenticate(authorizationHeader: string | null): Promise<KeyRecord>;
  /** Drops a key from this process's cache (call after revoking it here). */
  invalidate(keyId: string): void;
}

/** An authenticator with a short-lived positive cache keyed by digest. */
export function createAuthenticator(
  kv: Deno.Kv,
  opts: { now: () => number; ttlMs?: number; maxEntries?: number },
): Authenticator {
  const ttl = opts.ttlMs ?? AUTH_CACHE_TTL_MS;
  const maxEntries = opts.maxEntries ?? 10_000;
  if (!(ttl >= 0) || !Number.isInteger(maxEntries) || maxEntries < 1) {
    throw new RangeError("bad authenticator cache options");
  }
  const cache = new Map<string, { rec: KeyRecord; until: number }>();
  return {
    async authenticate(header) {
      const digest = bearerDigest(header);
      const hit = cache.get(digest);
      const t = opts.now();
      if (hit !== undefined && hit.until > t) return hit.rec;
      if (hit !== undefined) cache.delete(digest);
      const rec = await lookup(kv, digest);
      if (cache.size >= maxEntries) {
        // Evict the oldest insertion; entries are short-lived anyway.
        const first = cache.keys().next();
        if (!first.done) cache.delete(first.value);
      }
      cache.set(digest, { rec, until: t + ttl });
      return rec;
    },
    invalidate(keyId) {
      for (const [d, v] of cache) if (v.rec.key_id === keyId) cache.delete(d);
    },
  };
}
