/**
 * Offline verification of an ACI receipt against an attested keyset, the
 * four checks of the user's spec: the keyset digest matches the report, the
 * Ed25519 signature verifies under the `receipt_signing_keys` entry named by
 * `key_id` (over JCS of the receipt minus `signature`), the request/response
 * body hashes match the bytes the client holds, and `upstream.verified`.
 */

import { PREFIXED_DIGEST_RE, sha256Prefixed } from "../aci/digest.ts";
import { ed25519Verify } from "../aci/ed25519.ts";
import { hexToBytes, isLowerHex } from "../aci/hex.ts";
import { jcsBytes } from "../aci/jcs.ts";
import { type Check, check } from "./checks.ts";
import { isRecord, stringField } from "./json_shape.ts";
import { extractKeyset, servedKeysetDigest } from "./report.ts";

/** Options of {@link verifyReceipt}. */
export interface ReceiptVerifyOptions {
  /** A report whose checks passed (its `attestation.workload_keyset` is used), or a bare keyset. */
  report?: unknown;
  /** The exact request body bytes sent. */
  requestBody?: Uint8Array;
  /** The exact response bytes received (for SSE, the whole raw stream). */
  responseBody?: Uint8Array;
  /** Fail unless `upstream.verified` says `verified` (confidential serving demanded). */
  requireVerifiedUpstream?: boolean;
}

/** The first event of `type` in a receipt's event log. */
export function findEvent(
  receipt: Record<string, unknown>,
  type: string,
): Record<string, unknown> | undefined {
  const log = receipt["event_log"];
  if (!Array.isArray(log)) return undefined;
  return log.find((e): e is Record<string, unknown> => isRecord(e) && e["type"] === type);
}

function signatureCheck(receipt: Record<string, unknown>, report: unknown): Check {
  const name = "receipt.signature";
  const keyset = report === undefined ? null : extractKeyset(report);
  if (keyset === null) return check(name, false, "no attested keyset given to look the key up in");
  const keyId = stringField(receipt, "key_id");
  const entry = keyset.receipt_signing_keys.find((k) => isRecord(k) && k.key_id === keyId);
  if (!entry) {
    return check(name, false, `key_id ${JSON.stringify(keyId)} is not in receipt_signing_keys`);
  }
  if (entry.algo !== "ed25519") {
    return check(name, false, `key ${keyId} has unsupported algo ${entry.algo}`);
  }
  const sig = receipt["signature"];
  if (!isLowerHex(entry.public_key, 32) || !isLowerHex(sig, 64)) {
    return check(name, false, "malformed public key or signature hex");
  }
  const { signature: _omit, ...unsigned } = receipt;
  let message: Uint8Array;
  try {
    message = jcsBytes(unsigned);
  } catch {
    return check(name, false, "receipt has no canonical JSON form");
  }
  const ok = ed25519Verify(hexToBytes(entry.public_key), hexToBytes(sig), message);
  return check(
    name,
    ok,
    ok ? `Ed25519 signature valid under ${keyId}` : `Ed25519 signature INVALID under ${keyId}`,
  );
}

function bodyCheck(
  receipt: Record<string, unknown>,
  name: string,
  type: string,
  body: Uint8Array,
): Check {
  const event = findEvent(receipt, type);
  const recorded = event ? stringField(event, "body_hash") : undefined;
  if (recorded === undefined) return check(name, false, `no ${type} event with a body_hash`);
  const actual = sha256Prefixed(body);
  return check(
    name,
    recorded === actual,
    recorded === actual
      ? `${type} body_hash ${actual}`
      : `${type} records ${recorded}, the given bytes hash to ${actual}`,
  );
}

function upstreamCheck(receipt: Record<string, unknown>, required: boolean): Check {
  const name = "receipt.upstream_verified";
  const event = servedVerification(receipt);
  if (!event) {
    return check(
      name,
      !required,
      "no upstream.verified event: the upstream was not attested for this response",
    );
  }
  const tee = event["tee_attested"];
  if (required && event["result"] === "verified" && tee === "not_hardware_proven") {
    return check(name, false, "verified, but the session's TEE claim is not hardware_proven");
  }
  const result = event["result"];
  const req = event["required"];
  if (result === "verified") {
    const session = event["session_id"];
    if (!isLowerHex(session, 32)) {
      return check(name, false, "verified, but session_id is not 64 lowercase hex");
    }
    const strength = req === true
      ? "verified serving was required"
      : "verified serving was not required by the request";
    return check(name, true, `upstream verified (${strength}); attested session ${session}`);
  }
  const reason = typeof event["reason"] === "string" ? `: ${event["reason"]}` : "";
  return check(
    name,
    !required,
    `upstream verification ${JSON.stringify(result)}${reason} (required=${String(req)})`,
  );
}

/**
 * Verifies a receipt. Returns `receipt.api_version`, `receipt.keyset_digest`,
 * `receipt.signature`, `receipt.event_log`, the body checks for the bodies
 * given, and `receipt.upstream_verified`.
 */
export function verifyReceipt(receipt: unknown, opts: ReceiptVerifyOptions = {}): Check[] {
  if (!isRecord(receipt)) return [check("receipt.format", false, "receipt is not a JSON object")];
  const checks: Check[] = [];
  const version = receipt["api_version"];
  checks.push(
    check("receipt.api_version", version === "aci/1", `api_version ${JSON.stringify(version)}`),
  );

  const keyset = opts.report === undefined ? null : extractKeyset(opts.report);
  const stated = stringField(receipt, "workload_keyset_digest");
  if (keyset === null) {
    checks.push(check("receipt.keyset_digest", false, "no attested report or keyset given"));
  } else {
    const digest = servedKeysetDigest(keyset);
    checks.push(
      check(
        "receipt.keyset_digest",
        stated === digest,
        stated === digest
          ? `matches the attested keyset ${digest}`
          : `receipt cites ${stated ?? "(none)"}, attested keyset is ${digest}`,
      ),
    );
  }

  checks.push(signatureCheck(receipt, opts.report));

  const log = receipt["event_log"];
  const first = Array.isArray(log) ? log[0] : undefined;
  // A body refused unread (e.g. 413) has no hash to bind: then the log must say so
  // and show the request was refused, never forwarded.
  const unread = isRecord(first) && first["type"] === "request.received" &&
    first["body_hash"] === null && first["body_read"] === false &&
    (log as unknown[]).some((e) => isRecord(e) && e["type"] === "request.refused") &&
    !(log as unknown[]).some((e) => isRecord(e) && e["type"] === "request.forwarded");
  const logOk = unread || (isRecord(first) && first["type"] === "request.received" &&
    typeof first["body_hash"] === "string" && PREFIXED_DIGEST_RE.test(first["body_hash"]));
  checks.push(
    check(
      "receipt.event_log",
      logOk,
      unread
        ? `${(log as unknown[]).length} events: the request was refused before its body was read`
        : logOk
        ? `${(log as unknown[]).length} events, starting with request.received`
        : "event_log must start with a request.received event carrying a body_hash",
    ),
  );

  if (opts.requestBody) {
    checks.push(
      bodyCheck(receipt, "receipt.request_body_hash", "request.received", opts.requestBody),
    );
  }
  if (opts.responseBody) {
    checks.push(
      bodyCheck(receipt, "receipt.response_body_hash", "response.returned", opts.responseBody),
    );
  }
  checks.push(upstreamCheck(receipt, opts.requireVerifiedUpstream ?? false));
  return checks;
}

/**
 * The `upstream.verified` event of the attempt that served the response: the
 * one whose `attempt` matches `route.served` (receipts with attempt numbers),
 * else the last one (older receipts, one attempt each).
 */
function servedVerification(receipt: Record<string, unknown>): Record<string, unknown> | null {
  const log = Array.isArray(receipt["event_log"]) ? receipt["event_log"] as unknown[] : [];
  const events = log.filter(isRecord);
  const served = events.find((e) => e["type"] === "route.served");
  const verified = events.filter((e) => e["type"] === "upstream.verified");
  if (served && typeof served["attempt"] === "number") {
    return verified.find((e) => e["attempt"] === served["attempt"]) ?? null;
  }
  return verified.at(-1) ?? null;
}
