/**
 * The client's `nonce` for `GET /v1/aci/attestation`, validated as a request
 * parameter (a bad one is a 400 naming `nonce`). Here, not in `src/aci/`, so
 * the ACI primitives never depend on HTTP errors.
 */
import { isLowerHex } from "../aci/mod.ts";
import { badParam } from "../http/mod.ts";

/**
 * The `nonce` query parameter of `GET /v1/aci/attestation`: absent → null;
 * otherwise exactly 64 lowercase hex characters. A repeated parameter is
 * rejected rather than picking one, so the bound nonce is never ambiguous.
 */
export function parseAciNonce(value: string | null | string[]): string | null {
  if (value === null) return null;
  if (Array.isArray(value)) {
    if (value.length === 0) return null;
    if (value.length > 1) throw badParam("nonce", "nonce must be given at most once");
    return parseAciNonce(value[0]);
  }
  if (!isLowerHex(value, 32)) {
    throw badParam("nonce", "nonce must be exactly 64 lowercase hex characters");
  }
  return value;
}
