/**
 * The client's view of the gateway's attested keysets: the current one
 * (attested again once it expires or rotates), the last few a receipt may
 * cite, and the TLS check every new connection passes before anything is sent.
 */
import { attest, type AttestDeps, type AttestedGateway } from "./attest.ts";
import { AciVerificationError } from "./errors.ts";

/** Keysets a receipt may cite: the last few, not every one. */
const KEPT = 16;

export class AttestedKeysets {
  #deps: AttestDeps;
  #current: AttestedGateway | null = null;
  #byDigest = new Map<string, AttestedGateway>();
  #inflight: Promise<AttestedGateway> | null = null;

  constructor(deps: AttestDeps) {
    this.#deps = deps;
    // Passed to the transport as a callback on every send: bound once here.
    this.tlsCheck = this.tlsCheck.bind(this);
  }

  /** The current attestation, if any. */
  current(): AttestedGateway | null {
    return this.#current;
  }

  /** Whether a keyset digest is one already attested. */
  knows(digest: string): boolean {
    return this.#byDigest.has(digest);
  }

  /** The current attestation while valid, else a fresh one. */
  async attested(): Promise<AttestedGateway> {
    const c = this.#current;
    return c !== null && this.#deps.now() < c.validUntilMs ? c : await this.reattest();
  }

  /** Attests now (fresh nonce); concurrent callers share one attestation. */
  reattest(): Promise<AttestedGateway> {
    this.#inflight ??= attest(this.#deps)
      .then((a) => {
        this.#current = a;
        this.#byDigest.set(a.digest, a);
        while (this.#byDigest.size > KEPT) {
          this.#byDigest.delete(this.#byDigest.keys().next().value!);
        }
        return a;
      })
      .finally(() => (this.#inflight = null));
    return this.#inflight;
  }

  /** A new connection's key must be an attested one; an unknown key is attested again once. */
  async tlsCheck(spki: string): Promise<void> {
    const a = await this.attested();
    if (a.tlsKeys.has(spki)) return;
    const fresh = await this.reattest();
    if (fresh.tlsKeys.has(spki)) return;
    if (fresh.tlsKeys.size === 0) {
      throw new AciVerificationError(
        "tls_pin_mismatch",
        "the attested keyset lists no TLS key (TLS ends outside the TEE): nothing to pin, nothing " +
          "was sent; use a transport without pinning, which insists on E2EE",
      );
    }
    throw new AciVerificationError(
      "tls_pin_mismatch",
      `the server's TLS key (SPKI sha256 ${spki}) is not in the attested keyset; nothing was sent`,
    );
  }

  /** The attested keyset a receipt cites: a known one, or one attested again now. */
  async keysetFor(digest: unknown, receiptId: string): Promise<AttestedGateway> {
    const known = typeof digest === "string" ? this.#byDigest.get(digest) : undefined;
    if (known) return known;
    const fresh = await this.reattest();
    if (fresh.digest === digest) return fresh;
    throw new AciVerificationError(
      "keyset_mismatch",
      `the receipt cites keyset ${String(digest)}, the attested gateway holds ${fresh.digest}`,
      { receiptId },
    );
  }
}
