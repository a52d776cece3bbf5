/**
 * NEAR AI Cloud's per-chat signature (`GET /v1/signature/{chat_id}`):
 * `{text, signature, signing_address, signing_algo: "ecdsa"}` where `text`
 * is `sha256(request body):sha256(response body)` and `signature` an
 * EIP-191 signature by the attested model's signing key. Checked against the
 * exact bytes the gateway sent and received and the address the session
 * attested.
 */
import { createHash } from "node:crypto";
import { hexToBytes, recoverEip191Address } from "../../aci/mod.ts";
import { type Check, check } from "../checks.ts";
import { isRecord } from "../json_shape.ts";

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** The checks of one signature envelope; `attested` lists the addresses the session verified. */
export function verifyNearSignature(
  envelope: unknown,
  exchange:
    | { requestBody: Uint8Array; responseBody: Uint8Array }
    | { requestHash: string; responseHash: string },
  attested: readonly string[],
): Check[] {
  if (!isRecord(envelope)) return [check("signature.format", false, "not a JSON object")];
  const { text, signature, signing_address: address, signing_algo: algo } = envelope;
  if (
    typeof text !== "string" || typeof signature !== "string" || typeof address !== "string" ||
    algo !== "ecdsa"
  ) {
    return [
      check("signature.format", false, "needs string text, signature, signing_address; ecdsa"),
    ];
  }
  // Hex sha256 of the exact bytes, computed here or (the gateway) taken from the receipt.
  const expected = "requestHash" in exchange
    ? `${exchange.requestHash}:${exchange.responseHash}`
    : `${sha256(exchange.requestBody)}:${sha256(exchange.responseBody)}`;
  const checks = [check(
    "signature.text",
    text === expected,
    text === expected
      ? "sha256(request):sha256(response) of the exact bytes"
      : `expected ${expected}`,
  )];
  let recovered: string | null = null;
  try {
    const sig = hexToBytes(signature.replace(/^0x/, ""));
    recovered = recoverEip191Address(text, sig);
  } catch {
    recovered = null;
  }
  const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
  checks.push(check(
    "signature.valid",
    recovered !== null && same(recovered, address),
    recovered === null ? "signature does not recover" : `recovers to ${recovered}`,
  ));
  const listed = attested.some((a) => same(a, address));
  checks.push(check(
    "signature.key_attested",
    listed,
    listed ? "signing_address is an attested signing key" : "signing_address was not attested",
  ));
  return checks;
}
