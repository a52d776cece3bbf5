/**
 * `GET /v1/aci/receipts/{id}/bundle`: one JSON file holding everything needed
 * to verify a receipt offline, years later (`task verify --bundle`): the
 * receipt, the archived report and keyset that signed it, the session
 * documents it cites, the inclusion proof and the checkpoint, the archived
 * reports of the keysets whose log keys signed that checkpoint, with their
 * own inclusion proofs, and the collateral each quote's check consumed (or
 * why there is none). Digests, documents and certificates only: no prompt,
 * body or key. Same access rule as the receipt.
 */
import type {
  AccountDeps,
  AttestationDeps,
  ClockDeps,
  ConfigDeps,
  RecordDeps,
  RequestPathDeps,
  UpstreamDeps,
} from "./context.ts";
import { GatewayError, jsonResponse, type Params } from "../http/mod.ts";
import {
  b64,
  bytesEqual,
  keyId,
  keysetEntry,
  NOTE_KEY_ALGO,
  parseHex,
  parseNote,
  SIG_ED25519,
} from "../aci/mod.ts";
import { type CanonicalReport, KEYSET_ARCHIVE, type ReportCollateral } from "../attestation/mod.ts";
import { receiptLeaf } from "./tlog.ts";
import { BUNDLE_FORMAT } from "../verify/mod.ts";

/** What this module uses of the gateway's context. */
type Deps =
  & ConfigDeps
  & ClockDeps
  & AccountDeps
  & RequestPathDeps
  & AttestationDeps
  & UpstreamDeps
  & RecordDeps;

/** Archived keysets scanned for the checkpoint's signer (rotations × replicas stay far below). */
const MAX_KEYSETS = 10_000;

export async function getEvidenceBundle(
  req: Request,
  ctx: Deps,
  params: Params,
): Promise<Response> {
  const { receipt, index } = await receiptLeaf(req, ctx, params.id);
  const cp = await ctx.tlog.checkpoint();
  const size = cp?.size ?? 0;
  if (cp === null || index >= size) {
    // In the log, but the served checkpoint (awaiting cosignatures) does not cover it yet.
    throw new GatewayError("log_pending", "the receipt is not in a served checkpoint yet", {
      headers: { "retry-after": "1" },
    });
  }
  const report = await ctx.reports.archived(receipt.workload_keyset_digest);
  const sessions: Record<string, unknown> = {};
  const sessionCollateral: Record<string, unknown> = {};
  for (const e of receipt.event_log) {
    const id = (e as { session_id?: unknown }).session_id;
    if (typeof id === "string" && !(id in sessions)) {
      sessions[id] = await ctx.sessions.get(id);
      sessionCollateral[id] = await ctx.sessions.collateral(id) ?? {
        none: "this session's verification archived no collateral (its verifier used none)",
      };
    }
  }
  const proof = await ctx.tlog.inclusion(index, size);
  const keysets = await checkpointKeysets(ctx, cp.checkpoint, size);
  const reportCollateral: Record<string, unknown> = {};
  for (const r of [report, ...keysets.map((k) => k.report)]) {
    reportCollateral[r.workload_keyset_digest] ??= await bounded(ctx, ctx.reportCollateral(r));
  }
  return jsonResponse(
    {
      format: BUNDLE_FORMAT,
      receipt,
      report,
      sessions,
      // What each quote's check consumed, so `task verify --bundle` needs no network:
      // per report (by keyset digest) and per session (by id), an archive or why there is none.
      collateral: { reports: reportCollateral, sessions: sessionCollateral },
      log: {
        origin: ctx.tlog.origin,
        leaf_index: index,
        tree_size: size,
        inclusion_proof: proof.map(b64),
        checkpoint: cp.checkpoint,
        checkpoint_keysets: keysets,
      },
    },
    200,
    { "content-disposition": `attachment; filename="receipt-${params.id}.aci-bundle.json"` },
  );
}

/** How long a bundle waits for the collateral of the gateway's own quote (PCS/PCCS, KDS). */
const OWN_COLLATERAL_WAIT_MS = 10_000;

/** The collateral, or after the wait a `none` saying so (the fetch goes on; the next bundle has it). */
function bounded(ctx: Deps, p: Promise<ReportCollateral>): Promise<ReportCollateral> {
  return new Promise((resolve, reject) => {
    const d = ctx.deadlines.after(OWN_COLLATERAL_WAIT_MS, () =>
      resolve({
        none: `the collateral of the gateway's own quote was not obtained within ${
          OWN_COLLATERAL_WAIT_MS / 1000
        } s; a later bundle will carry it`,
      }));
    p.then((v) => {
      d.cancel();
      resolve(v);
    }, (e) => {
      d.cancel();
      reject(e);
    });
  });
}

/** The archived reports whose log key signed `note`, each with its keyset entry's inclusion proof. */
async function checkpointKeysets(ctx: Deps, note: string, size: number) {
  const parsed = parseNote(note);
  if (parsed === null) return [];
  const ids = parsed.signatures.filter((s) => s.name === ctx.tlog.origin).map((s) => s.id);
  const out: { report: CanonicalReport; leaf_index: number | null; inclusion_proof: unknown }[] =
    [];
  let scanned = 0;
  for await (
    const e of ctx.kv.list<
      { keyset: { receipt_signing_keys: unknown[] }; report: CanonicalReport }
    >({
      prefix: [KEYSET_ARCHIVE],
    })
  ) {
    if (++scanned > MAX_KEYSETS) break;
    const keys = e.value.keyset.receipt_signing_keys as { algo?: string; public_key?: string }[];
    const signer = keys.some((k) => {
      const raw = k.algo === NOTE_KEY_ALGO && k.public_key ? parseHex(k.public_key) : null;
      return raw !== null &&
        ids.some((id) => bytesEqual(id, keyId(ctx.tlog.origin, SIG_ED25519, raw)));
    });
    if (!signer) continue;
    const digest = String(e.key[1]);
    const leaf = await ctx.tlog.leafIndex(keysetEntry(digest, e.value.report));
    const proof = leaf !== null && leaf < size ? await ctx.tlog.inclusion(leaf, size) : null;
    out.push({
      report: e.value.report,
      leaf_index: proof ? leaf : null,
      inclusion_proof: proof?.map(b64) ?? null,
    });
  }
  return out;
}
