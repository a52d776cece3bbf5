/**
 * Prefix-cache isolation (vLLM's `cache_salt`, CVE-2025-46570): a shared
 * prefix cache lets one tenant time another's prompts, so every request to an
 * upstream that takes a salt carries one derived server-side from its API key
 * (HMAC-SHA256 under a secret the clients never see: unguessable, stable per
 * key). A client-supplied salt is refused: it could join another key's cache.
 * The receipt records the salt's digest, never the salt.
 */
import { createHash, createHmac } from "node:crypto";
import { badParam } from "../http/mod.ts";

/** The domain of this derivation (a salt is never another HMAC of the same secret). */
const LABEL = "aci.cache_salt.v1\0";

export interface CacheSalter {
  /** The salt of the key with this digest (base64url, 43 characters). */
  saltFor(keyDigest: string): string;
}

export function createCacheSalter(secret: Uint8Array): CacheSalter {
  if (secret.length < 32) throw new Error("cache salt secret: at least 32 bytes");
  const cache = new Map<string, string>();
  return {
    saltFor(keyDigest) {
      let salt = cache.get(keyDigest);
      if (salt === undefined) {
        salt = createHmac("sha256", secret).update(LABEL + keyDigest).digest("base64url");
        // Bounded: keys are few next to requests; a full map is simply rebuilt.
        if (cache.size >= 10_000) cache.clear();
        cache.set(keyDigest, salt);
      }
      return salt;
    },
  };
}

/** `sha256:<hex>` of a salt, as the receipt's `cache.salted` event records it. */
export function saltDigest(salt: string): string {
  return `sha256:${createHash("sha256").update(salt).digest("hex")}`;
}

/** A request body may not choose its cache salt (400 naming `cache_salt`). */
export function refuseClientSalt(body: unknown): void {
  if (body && typeof body === "object" && Object.hasOwn(body, "cache_salt")) {
    throw badParam(
      "cache_salt",
      "cache_salt is set by the gateway (per API key); requests may not send one",
    );
  }
}

/** The upstream body with the key's salt (an object body; others are left alone). */
export function withSalt(body: unknown, salt: string): unknown {
  if (!body || typeof body !== "object" || Array.isArray(body)) return body;
  return { ...body, cache_salt: salt };
}
