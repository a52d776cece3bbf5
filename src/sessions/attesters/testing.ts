/**
 * Test helpers for the upstream attesters: a provider config with a
 * confidential block, verifier dependencies over real loopback sockets with
 * a fixed clock, and decoding of a session's `data:` evidence. Test-only.
 */
import tls from "node:tls";
import type { ProviderConfig } from "../../config/mod.ts";
import type { AttestationTarget, AttesterDeps, SessionDocument } from "../types.ts";
import type { CollateralSource } from "../../verify/mod.ts";
import { createAttesterDeps } from "./mod.ts";

type Confidential = NonNullable<ProviderConfig["confidential"]>;

/** A verify target for `baseUrl` with the given confidential settings (defaults as the schema's). */
export function targetFor(
  baseUrl: string,
  confidential: Partial<Confidential> & Pick<Confidential, "verifier">,
  name = "secure",
): AttestationTarget {
  const provider: ProviderConfig = {
    name,
    base_url: baseUrl,
    zdr: true,
    priority: 0,
    timeout_ms: 60_000,
    native_formats: [],
    confidential: {
      allowed_mrtd: [],
      allowed_compose_hashes: [],
      session_ttl_seconds: 3600,
      reverify_margin_seconds: 300,
      ...confidential,
    },
  };
  return { name, baseUrl, provider };
}

/** Real-socket deps with a fixed clock and counting random source. */
export function testDeps(
  nowMs: number,
  tdx: { collateral: CollateralSource; rootCaDer?: Uint8Array },
  sevSnp?: AttesterDeps["sevSnp"],
): AttesterDeps {
  return createAttesterDeps({
    now: () => nowMs,
    tdx,
    sevSnp,
    randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
    tlsConnect: tls.connect,
    connectTimeoutMs: 5_000,
  });
}

/** The bytes and media type of a session's `evidence.data`. */
export function decodeEvidence(doc: SessionDocument): { mediaType: string; bytes: Uint8Array } {
  const m = /^data:([^;,]+);base64,(.*)$/.exec(doc.evidence.data);
  if (!m) throw new Error("evidence.data is not a base64 data URL");
  return { mediaType: m[1]!, bytes: Uint8Array.from(atob(m[2]!), (c) => c.charCodeAt(0)) };
}
