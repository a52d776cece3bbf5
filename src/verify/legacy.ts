/**
 * Offline verification of the legacy (dstack vllm-proxy lineage) surfaces:
 * the `/v1/signature/{id}` envelope (EIP-191 or Ed25519 over
 * `"<req sha256>:<res sha256>"`) and the legacy report, whose own quote
 * carries `signing address padded to 32 ‖ nonce part` as report data.
 */

import {
  bytesToHex,
  ed25519Verify,
  ethereumAddress,
  ethereumAddressBytes,
  hexToBytes,
  isLowerHex,
  legacyNonceBytes,
  recoverEip191Address,
  sha256Hex,
  toChecksumAddress,
} from "../aci/mod.ts";
import { type Check, check } from "./checks.ts";
import { evidenceChecks, type EvidenceOptions, evidenceQuote } from "./evidence.ts";
import { isRecord, recordField, stringField } from "./json_shape.ts";
import { findEvent, verifyReceipt } from "./receipt.ts";
import { extractKeyset, servedKeysetDigest } from "./report.ts";

const encoder = new TextEncoder();
const TEXT_RE = /^([0-9a-f]{64}):([0-9a-f]{64})$/;

/** Options of {@link verifySignatureEnvelope}. */
export interface EnvelopeVerifyOptions {
  /** The (verified) canonical or legacy report, or a bare keyset. */
  report?: unknown;
  requestBody?: Uint8Array;
  responseBody?: Uint8Array;
  requireVerifiedUpstream?: boolean;
}

/** A secp256k1 key's EIP-55 address from its hex encoding, or null when it is not a valid key. */
function addressOfKeyHex(hex: string): string | null {
  try {
    return ethereumAddress(hexToBytes(hex));
  } catch {
    return null;
  }
}

/** Whether `address` names the same 20 bytes as `expected` and, if mixed-case, has a valid EIP-55 checksum. */
function sameAddress(address: string, expected: string): boolean {
  if (!/^0x[0-9a-fA-F]{40}$/.test(address)) return false;
  const body = address.slice(2);
  const mixed = body !== body.toLowerCase() && body !== body.toUpperCase();
  if (mixed && toChecksumAddress(hexToBytes(body)) !== address) return false;
  return body.toLowerCase() === expected.slice(2).toLowerCase();
}

/** Whether the keyset lists the signing key behind `address` for `algo`. */
function keyInKeyset(report: unknown, algo: string, address: string): Check {
  const name = "signature.key_attested";
  const keyset = report === undefined ? null : extractKeyset(report);
  if (keyset === null) return check(name, false, "no attested report or keyset given");
  const entries = keyset.receipt_signing_keys.filter(isRecord);
  const found = algo === "ecdsa"
    ? entries.some((k) =>
      k["algo"] === "secp256k1" && typeof k["public_key"] === "string" &&
      addressOfKeyHex(k["public_key"]) !== null &&
      sameAddress(address, addressOfKeyHex(k["public_key"]) as string)
    )
    : entries.some((k) => k["algo"] === "ed25519" && k["public_key"] === address);
  return check(
    name,
    found,
    found
      ? `signing key is listed in the attested keyset ${servedKeysetDigest(keyset)}`
      : "signing key is NOT in the attested keyset",
  );
}

/**
 * Verifies a legacy signature envelope `{text, signature, signing_address,
 * signing_algo, receipt}`: text shape, the signature under `signing_address`
 * (ecdsa: address recovered from the EIP-191 signature), that key being in
 * the attested keyset, the body hashes, the text matching the nested
 * receipt's hashes, and the nested receipt itself (see verifyReceipt).
 */
// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
export function verifySignatureEnvelope(
  envelope: unknown,
  opts: EnvelopeVerifyOptions = {},
): Check[] {
  if (!isRecord(envelope)) {
    return [check("signature.format", false, "envelope is not a JSON object")];
  }
  const checks: Check[] = [];
  const text = stringField(envelope, "text") ?? "";
  const sig = stringField(envelope, "signature") ?? "";
  const address = stringField(envelope, "signing_address") ?? "";
  const algo = stringField(envelope, "signing_algo") ?? "";
  const m = TEXT_RE.exec(text);
  checks.push(
    check(
      "signature.text",
      m !== null,
      m ? "text is <request sha256>:<response sha256>" : "text is not two sha256 hex digests",
    ),
  );

  if (algo === "ecdsa") {
    let recovered: string | null = null;
    try {
      recovered = /^0x[0-9a-fA-F]{130}$/.test(sig)
        ? recoverEip191Address(text, hexToBytes(sig.slice(2)))
        : null;
    } catch {
      recovered = null;
    }
    const ok = recovered !== null && sameAddress(address, recovered);
    checks.push(
      check(
        "signature.signature",
        ok,
        recovered === null
          ? "EIP-191 signature is malformed or unrecoverable"
          : ok
          ? `EIP-191 signature recovers to ${recovered}`
          : `EIP-191 signature recovers to ${recovered}, not signing_address ${address}`,
      ),
    );
  } else if (algo === "ed25519") {
    const ok = isLowerHex(address, 32) && isLowerHex(sig, 64) &&
      ed25519Verify(hexToBytes(address), hexToBytes(sig), encoder.encode(text));
    checks.push(
      check(
        "signature.signature",
        ok,
        ok ? "Ed25519 signature valid under signing_address" : "Ed25519 signature INVALID",
      ),
    );
  } else {
    checks.push(
      check("signature.signature", false, `unknown signing_algo ${JSON.stringify(algo)}`),
    );
  }

  checks.push(keyInKeyset(opts.report, algo, address));
  if (isRecord(opts.report)) {
    const top = stringField(opts.report, "signing_address");
    const topAlgo = stringField(opts.report, "signing_algo");
    if (top !== undefined && topAlgo === algo) {
      const ok = algo === "ecdsa" ? sameAddress(address, top) : top === address;
      checks.push(
        check(
          "signature.report_address",
          ok,
          ok ? "matches the report's signing_address" : `report's signing_address is ${top}`,
        ),
      );
    }
  }

  if (opts.requestBody) {
    const h = sha256Hex(opts.requestBody);
    const ok = m !== null && m[1] === h;
    checks.push(
      check(
        "signature.request_body_hash",
        ok,
        ok ? `request sha256 ${h}` : `text cites ${m?.[1] ?? "(none)"}, the request hashes to ${h}`,
      ),
    );
  }
  if (opts.responseBody) {
    const h = sha256Hex(opts.responseBody);
    const ok = m !== null && m[2] === h;
    checks.push(
      check(
        "signature.response_body_hash",
        ok,
        ok
          ? `response sha256 ${h}`
          : `text cites ${m?.[2] ?? "(none)"}, the response hashes to ${h}`,
      ),
    );
  }

  const receipt = envelope["receipt"];
  if (!isRecord(receipt)) {
    checks.push(check("signature.receipt_binding", false, "envelope carries no receipt"));
    return checks;
  }
  const req = findEvent(receipt, "request.received")?.["body_hash"];
  const res = findEvent(receipt, "response.returned")?.["body_hash"];
  const bound = m !== null && req === `sha256:${m[1]}` && res === `sha256:${m[2]}`;
  checks.push(
    check(
      "signature.receipt_binding",
      bound,
      bound
        ? "text equals the receipt's request.received and response.returned hashes"
        : "text does not match the nested receipt's body hashes",
    ),
  );
  checks.push(...verifyReceipt(receipt, opts));
  return checks;
}

/** Options of {@link verifyLegacyReport}. */
export interface LegacyReportVerifyOptions extends EvidenceOptions {
  /** The nonce sent to the legacy endpoint (any string), or null/undefined when none was sent. */
  nonce?: string | null;
}

/**
 * Verifies a legacy report: `signing_address` derives from
 * `signing_public_key`, the key is in the served keyset (whose digest is
 * recomputed), and the legacy quote (`intel_quote`, else
 * `attestation.evidence.quote`) carries `address bytes padded to 32 ‖ nonce
 * part`. Without a nonce the second half can only be compared with the
 * echoed `request_nonce`, and freshness is not established.
 */
// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
export async function verifyLegacyReport(
  report: unknown,
  opts: LegacyReportVerifyOptions = {},
): Promise<Check[]> {
  if (!isRecord(report)) return [check("legacy.format", false, "report is not a JSON object")];
  const checks: Check[] = [];
  const algo = stringField(report, "signing_algo");
  const address = stringField(report, "signing_address") ?? "";
  const pub = stringField(report, "signing_public_key") ?? "";

  let addressBytes: Uint8Array | null = null;
  if (algo === "ecdsa") {
    try {
      const key = hexToBytes(pub);
      const derived = ethereumAddress(key);
      if (sameAddress(address, derived)) addressBytes = ethereumAddressBytes(key);
      checks.push(
        check("legacy.signing_address", addressBytes !== null, `public key derives to ${derived}`),
      );
    } catch {
      checks.push(
        check("legacy.signing_address", false, "signing_public_key is not a secp256k1 key"),
      );
    }
  } else if (algo === "ed25519") {
    const ok = isLowerHex(pub, 32) && pub === address;
    if (ok) addressBytes = hexToBytes(pub);
    checks.push(
      check(
        "legacy.signing_address",
        ok,
        ok ? "address is the Ed25519 public key" : "address differs from signing_public_key",
      ),
    );
  } else {
    checks.push(
      check("legacy.signing_address", false, `unknown signing_algo ${JSON.stringify(algo)}`),
    );
  }

  const keyset = extractKeyset(report);
  const stated = stringField(report, "workload_keyset_digest");
  const digest = keyset ? servedKeysetDigest(keyset) : null;
  checks.push(
    check(
      "legacy.workload_keyset_digest",
      digest !== null && digest === stated,
      digest === null
        ? "report has no keyset"
        : `report states ${stated ?? "(none)"}, JCS(keyset) hashes to ${digest}`,
    ),
  );
  const listed = keyset !== null &&
    keyset.receipt_signing_keys.some((k) =>
      isRecord(k) && k.public_key === pub && k.algo === (algo === "ecdsa" ? "secp256k1" : "ed25519")
    );
  checks.push(
    check(
      "legacy.key_attested",
      listed,
      listed ? "signing key is listed in the keyset" : "signing key is NOT in the keyset",
    ),
  );

  let expected: Uint8Array | null = null;
  const nonceName = "legacy.nonce";
  if (addressBytes !== null) {
    const echoed = stringField(report, "request_nonce");
    let noncePart: Uint8Array | null = null;
    if (opts.nonce !== undefined && opts.nonce !== null) {
      noncePart = legacyNonceBytes(opts.nonce, () => new Uint8Array(0));
      checks.push(
        check(nonceName, true, `report data must carry nonce part ${bytesToHex(noncePart)}`),
      );
    } else if (echoed !== undefined && /^[0-9a-fA-F]{64}$/.test(echoed)) {
      noncePart = hexToBytes(echoed);
      checks.push(
        check(
          nonceName,
          false,
          "no nonce was sent: the report is NOT fresh (compared with the echoed request_nonce only)",
        ),
      );
    } else {
      checks.push(
        check(nonceName, false, "no nonce was sent and none is echoed: freshness unknown"),
      );
    }
    if (noncePart !== null) {
      expected = new Uint8Array(64);
      expected.set(addressBytes);
      expected.set(noncePart, 32);
    }
  }

  const attestation = recordField(report, "attestation");
  const intel = stringField(report, "intel_quote");
  const quote = intel !== undefined
    ? evidenceQuote({ quote: intel })
    : evidenceQuote(attestation?.["evidence"]);
  const teeType = attestation ? stringField(attestation, "tee_type") ?? "(none)" : "(none)";
  checks.push(...await evidenceChecks("legacy", teeType, quote, expected, opts));
  return checks;
}
