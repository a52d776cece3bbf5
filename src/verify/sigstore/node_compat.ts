/**
 * Deno 2.9's `node:crypto` `verify(null | undefined, data, ecKey, sig)`
 * throws "no default digest" where Node uses the key's default (SHA-256 for
 * EC keys); `@sigstore/verify` relies on that default for Rekor SETs,
 * checkpoints, SCTs and DSSE signatures. This installs that one default on
 * the module object the library calls through — only for EC keys and only
 * when no algorithm is named; every other call is passed through unchanged.
 * Idempotent. Remove when Deno's `node:crypto` matches Node here.
 */
import nodeCrypto from "node:crypto";

const MARK = Symbol.for("gateway.sigstore.ecDefaultDigest");
type VerifyFn = typeof nodeCrypto.verify;

/** Installs the EC default digest on `node:crypto`'s `verify` (once). */
export function installEcDefaultDigest(): void {
  const holder = nodeCrypto as unknown as Record<string | symbol, unknown>;
  if (holder[MARK]) return;
  const original: VerifyFn = nodeCrypto.verify;
  const patched = ((algorithm, data, key, signature, callback) => {
    if (algorithm === null || algorithm === undefined) {
      const k = key instanceof nodeCrypto.KeyObject
        ? key
        : nodeCrypto.createPublicKey(key as Parameters<typeof nodeCrypto.createPublicKey>[0]);
      if (k.asymmetricKeyType === "ec") {
        return callback
          ? original("sha256", data, k, signature, callback)
          : original("sha256", data, k, signature);
      }
    }
    return callback
      ? original(algorithm, data, key, signature, callback)
      : original(algorithm, data, key, signature);
  }) as VerifyFn;
  holder["verify"] = patched;
  holder[MARK] = true;
}
