/**
 * The development attestation endpoint of the confidential demo upstream:
 * `GET /v1/attestation/report?nonce=<64 hex>&signing_algo=ecdsa` answered in
 * the dstack vllm-proxy shape, with a DEV quote (not hardware evidence: see
 * `src/aci/dev_quote.ts`) whose report-data slot binds the signing address,
 * the upstream's own TLS key and the nonce exactly like the v2 layout:
 * `sha256(address ‖ sha256(SPKI DER)) ‖ nonce`. It lets the gateway exercise
 * the whole verified-upstream path where no TEE exists, while every verifier
 * can tell that nothing here proves a TEE.
 */
import { bytesToHex, devQuote, hexToBytes, isLowerHex } from "../aci/mod.ts";
import { GatewayError } from "../http/mod.ts";
import { expectedReportData } from "../verify/mod.ts";

/** The path the endpoint answers. */
const DEV_ATTESTATION_PATH = "/v1/attestation/report";

/** What the endpoint binds. */
export interface DevAttestationOptions {
  /** EIP-55 `0x…` address of the upstream's signing key. */
  signingAddress: string;
  /** The 20 raw address bytes (must match `signingAddress`). */
  addressBytes: Uint8Array;
  /** SHA-256 (lowercase hex) of the SPKI DER of the TLS key the upstream serves with. */
  spkiSha256: string;
  /** Random bytes for a nonce when the client sends none. */
  randomBytes: (n: number) => Uint8Array;
}

/** The report body (dstack shape) for a given nonce. */
export function devAttestationReport(
  opts: Omit<DevAttestationOptions, "randomBytes">,
  nonceHex: string,
): Record<string, unknown> {
  if (!isLowerHex(nonceHex, 32)) throw new RangeError("nonce must be 64 lowercase hex");
  const rd = expectedReportData({
    version: "v2",
    address: opts.addressBytes,
    spkiSha256: hexToBytes(opts.spkiSha256),
    nonce: hexToBytes(nonceHex),
  });
  if (!rd.ok) throw new RangeError(rd.reason);
  return {
    signing_address: opts.signingAddress,
    signing_algo: "ecdsa",
    request_nonce: nonceHex,
    intel_quote: bytesToHex(devQuote(rd.reportData)),
    nvidia_payload: null,
    event_log: [],
    info: { development: true },
  };
}

/**
 * A route handler for `startDemoUpstream({ extraRoutes })`: answers the
 * attestation path and returns null for every other path. Validates its
 * inputs once, so a misconfiguration fails at start-up.
 */
export function devAttestationRoutes(
  opts: DevAttestationOptions,
): (req: Request) => Response | null {
  if (opts.addressBytes.length !== 20) throw new RangeError("addressBytes must be 20 bytes");
  if (opts.signingAddress.toLowerCase() !== "0x" + bytesToHex(opts.addressBytes)) {
    throw new RangeError("signingAddress does not match addressBytes");
  }
  if (!isLowerHex(opts.spkiSha256, 32)) throw new RangeError("spkiSha256 must be 64 lowercase hex");
  const fixed = {
    signingAddress: opts.signingAddress,
    addressBytes: Uint8Array.from(opts.addressBytes),
    spkiSha256: opts.spkiSha256,
  };
  return (req) => {
    const url = new URL(req.url);
    if (url.pathname !== DEV_ATTESTATION_PATH) return null;
    if (req.method !== "GET") {
      throw new GatewayError("method_not_allowed", "use GET", { headers: { allow: "GET" } });
    }
    const algo = url.searchParams.getAll("signing_algo");
    if (algo.length > 1 || (algo.length === 1 && algo[0] !== "ecdsa")) {
      throw new GatewayError("invalid_request", "only signing_algo=ecdsa is served here", {
        param: "signing_algo",
      });
    }
    const nonces = url.searchParams.getAll("nonce");
    if (nonces.length > 1 || (nonces.length === 1 && !isLowerHex(nonces[0], 32))) {
      throw new GatewayError("invalid_request", "nonce must be 64 lowercase hex characters", {
        param: "nonce",
      });
    }
    // Like vllm-proxy: no nonce → a random one, reported back in request_nonce.
    const nonce = nonces[0] ?? bytesToHex(opts.randomBytes(32));
    return new Response(JSON.stringify(devAttestationReport(fixed, nonce)), {
      headers: { "content-type": "application/json" },
    });
  };
}
