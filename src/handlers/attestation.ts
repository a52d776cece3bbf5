/**
 * The public attestation endpoints: `GET /v1/aci/attestation` (canonical
 * report; `nonce` = 64 lowercase hex; `workload_keyset_digest` = an archived
 * keyset's report) and the legacy `GET /v1/attestation/report`.
 */
import type { AttestationDeps } from "./context.ts";
import { parseAciNonce } from "./aci_nonce.ts";
import { badParam, jsonResponse } from "../http/mod.ts";
import type { LegacySigningAlgo } from "../aci/mod.ts";

/** What this module uses of the gateway's context. */
type Deps = AttestationDeps;

/** `GET /v1/aci/attestation`. */
export async function canonicalAttestation(req: Request, ctx: Deps): Promise<Response> {
  const reports = ctx.reports;
  const q = new URL(req.url).searchParams;
  const digests = q.getAll("workload_keyset_digest");
  if (digests.length > 0) {
    if (digests.length > 1 || !/^sha256:[0-9a-f]{64}$/.test(digests[0])) {
      throw badParam(
        "workload_keyset_digest",
        "workload_keyset_digest must be one sha256:<64 lowercase hex>",
      );
    }
    if (q.has("nonce")) {
      throw badParam("nonce", "an archived report cannot be bound to a new nonce; omit nonce");
    }
    return jsonResponse(await reports.archived(digests[0]), 200, {
      "cache-control": "public, max-age=3600",
    });
  }
  const nonce = parseAciNonce(q.has("nonce") ? q.getAll("nonce") : null);
  const report = await reports.canonical(nonce);
  return jsonResponse(report, 200, {
    "cache-control": nonce === null ? "public, max-age=60" : "no-store",
  });
}

/** `GET /v1/attestation/report`. */
export async function legacyAttestation(req: Request, ctx: Deps): Promise<Response> {
  const reports = ctx.reports;
  const q = new URL(req.url).searchParams;
  const nonces = q.getAll("nonce");
  if (nonces.length > 1) throw badParam("nonce", "nonce may be given once");
  if (nonces.length === 1 && (nonces[0].length === 0 || nonces[0].length > 256)) {
    throw badParam("nonce", "nonce must be 1-256 characters");
  }
  const algo = signingAlgo(q);
  return jsonResponse(await reports.legacy(nonces[0] ?? null, algo), 200, {
    "cache-control": "no-store",
  });
}

export function signingAlgo(q: URLSearchParams): LegacySigningAlgo {
  const all = q.getAll("signing_algo");
  if (all.length === 0) return "ecdsa";
  if (all.length === 1 && (all[0] === "ecdsa" || all[0] === "ed25519")) return all[0];
  throw badParam("signing_algo", "signing_algo must be 'ecdsa' or 'ed25519'");
}
