/**
 * Offline verification of an evidence bundle (`GET /v1/aci/receipts/{id}/bundle`,
 * `task verify --bundle FILE [--at T]`): nothing is fetched. The receipt
 * against its archived report (the report's own checks, its quote with the
 * collateral the bundle archived for it, at time T), the sessions it cites
 * against their ids and re-verified with their archived collateral
 * (bundle_session.ts), its inclusion in the checkpoint, and the checkpoint's
 * signature under a log key of a keyset whose report verifies and which is
 * itself in that tree.
 */
import { Buffer } from "node:buffer";
import {
  isDevQuote,
  jcs,
  jcsBytes,
  keysetEntry,
  leafHash,
  parseCheckpointBody,
  receiptEntry,
  sha256Hex,
  verifyInclusion,
  verifyNote,
} from "../aci/mod.ts";
import { type Check, check } from "./checks.ts";
import { evidenceQuote, type QuoteCheck } from "./evidence.ts";
import { isRecord } from "./json_shape.ts";
import { archiveDigest, archiveSources } from "./collateral_archive.ts";
import { type OfflineTrust, verifySessionOffline } from "./bundle_session.ts";
import { hardwareQuoteCheck } from "./hardware_quote_check.ts";
import { sameTime } from "./nvidia/deps.ts";
import { verifyReceipt } from "./receipt.ts";
import { extractKeyset, verifyReport } from "./report.ts";
import { keysetLogKeys } from "./tlog.ts";

export const BUNDLE_FORMAT = "aci-evidence-bundle/1";

const proofOf = (v: unknown): Uint8Array[] | null =>
  Array.isArray(v) && v.every((p) => typeof p === "string")
    ? v.map((p) => new Uint8Array(Buffer.from(p, "base64")))
    : null;

/** How a bundle is judged: the auditor's roots, and the instant. */
export interface BundleOptions {
  /** The instant reports are judged at: `--at`, else the receipt's `served_at`. */
  now: () => number;
  /** The auditor's pinned roots and `--at` (sessions: their own verification time without it). */
  trust: OfflineTrust;
}

/** `collateral.reports[digest]` and `collateral.sessions[id]` of a bundle. */
function collateralOf(bundle: Record<string, unknown>, kind: "reports" | "sessions") {
  const c = isRecord(bundle.collateral) ? bundle.collateral : {};
  return isRecord(c[kind]) ? c[kind] : {};
}

/**
 * The quote check of one report: its archived collateral (checked against its
 * content address), at `at`, under the auditor's roots; the check saying so.
 */
function reportQuoteCheck(
  report: unknown,
  entry: unknown,
  at: number,
  trust: OfflineTrust,
): { quoteCheck: QuoteCheck; check: Check } {
  const digest = isRecord(report) ? String(report.workload_keyset_digest) : "?";
  const refuse = (why: string): QuoteCheck => () =>
    check("report.quote_verified", false, `no usable collateral in the bundle: ${why}`);
  const att = isRecord(report) && isRecord(report.attestation) ? report.attestation : {};
  const quote = evidenceQuote(att.evidence);
  const dev = typeof quote !== "string" && isDevQuote(quote);
  if (isRecord(entry) && typeof entry.none === "string") {
    return {
      quoteCheck: refuse(entry.none),
      check: check(
        "bundle.report_collateral",
        dev,
        `keyset ${digest}: no collateral, as the gateway says: ${entry.none}`,
      ),
    };
  }
  let actual: string | null = null;
  try {
    actual = isRecord(entry) && isRecord(entry.archive)
      ? archiveDigest(entry.archive as never)
      : null;
  } catch { /* not JCS-able */ }
  const sources = isRecord(entry) ? archiveSources(entry.archive) : "missing";
  if (
    actual === null || !isRecord(entry) || actual !== entry.digest || typeof sources === "string"
  ) {
    const why = typeof sources === "string" ? sources : "the archive does not hash to its digest";
    return {
      quoteCheck: refuse(why),
      check: check("bundle.report_collateral", false, `keyset ${digest}: ${why}`),
    };
  }
  return {
    quoteCheck: hardwareQuoteCheck({
      at,
      tdx: {
        source: sources.tdx,
        rootCaDer: trust.tdxRootCaDer,
        tcbPolicy: trust.tcbPolicy,
        allowSeptVeEnabled: trust.allowSeptVeEnabled,
      },
      snp: { roots: trust.snpRoots, vcek: sources.vcek },
      gpu: { ...trust.gpuRoots, collateral: sources.gpu, times: sameTime },
    }),
    check: check(
      "bundle.report_collateral",
      true,
      `keyset ${digest}: archived collateral ${actual} (${
        (entry.archive as { tdx?: unknown[] }).tdx?.length ?? 0
      } TDX, ${(entry.archive as { sev_snp?: unknown[] }).sev_snp?.length ?? 0} VCEK)`,
    ),
  };
}

/** Checks a bundle; nothing is fetched. */
export async function verifyBundle(bundle: unknown, opts: BundleOptions): Promise<Check[]> {
  if (!isRecord(bundle) || bundle.format !== BUNDLE_FORMAT) {
    return [check("bundle.format", false, `not an ${BUNDLE_FORMAT} file`)];
  }
  const checks: Check[] = [check("bundle.format", true, BUNDLE_FORMAT)];
  const { receipt, report } = bundle;
  const reportCollateral = collateralOf(bundle, "reports");
  const reportOpts = (r: unknown) => {
    const digest = isRecord(r) ? String(r.workload_keyset_digest) : "";
    const q = reportQuoteCheck(r, reportCollateral[digest], opts.now(), opts.trust);
    return {
      check: q.check,
      opts: {
        now: opts.now,
        nonce: null,
        quoteCheck: q.quoteCheck,
        allowDevEvidence: opts.trust.allowDevEvidence,
      },
    };
  };
  const own = reportOpts(report);
  checks.push(own.check);
  checks.push(...await verifyReport(report, own.opts));
  checks.push(...verifyReceipt(receipt, { report }));
  if (!isRecord(receipt)) return checks;

  const sessions = isRecord(bundle.sessions) ? bundle.sessions : {};
  const sessionCollateral = collateralOf(bundle, "sessions");
  for (const [id, doc] of Object.entries(sessions)) {
    let ok = false;
    try {
      ok = doc !== null && sha256Hex(jcsBytes(doc)) === id;
    } catch { /* no JCS form: not the document */ }
    checks.push(
      check(
        "bundle.session",
        ok,
        ok
          ? `session document hashes to its id ${id}`
          : `session ${id}: document missing or altered`,
      ),
    );
    if (ok) checks.push(...await verifySessionOffline(doc, sessionCollateral[id], opts.trust));
  }

  const log = isRecord(bundle.log) ? bundle.log : null;
  if (log === null || typeof log.checkpoint !== "string") {
    checks.push(check("log.inclusion", false, "the bundle has no inclusion proof"));
    return checks;
  }
  const origin = String(log.origin);
  const keysetReports = Array.isArray(log.checkpoint_keysets) ? log.checkpoint_keysets : [];
  const keys = [];
  for (const k of keysetReports) {
    if (!isRecord(k)) continue;
    const ko = reportOpts(k.report);
    const kr = [ko.check, ...await verifyReport(k.report, ko.opts)];
    const failed = kr.find((c) => !c.ok);
    const ks = extractKeyset(k.report);
    const digest = isRecord(k.report) ? String(k.report.workload_keyset_digest) : "";
    checks.push(
      check(
        "log.checkpoint_keyset",
        failed === undefined,
        failed === undefined
          ? `keyset ${digest} (its report verifies) lists the log key`
          : `keyset ${digest}: ${failed.name}: ${failed.detail}`,
      ),
    );
    if (failed === undefined && ks !== null) keys.push(...keysetLogKeys(ks, origin));
  }
  const verified = verifyNote(log.checkpoint, keys);
  const cp = verified ? parseCheckpointBody(verified.note.text) : null;
  checks.push(
    check(
      "log.checkpoint",
      cp !== null,
      cp !== null
        ? `checkpoint ${cp.origin} size ${cp.size} root ${
          Buffer.from(cp.root).toString("base64")
        }, ` +
          "signed by an attested log key"
        : "the checkpoint is not signed by a log key of a verified keyset in the bundle",
    ),
  );
  if (cp === null) return checks;
  const proof = proofOf(log.inclusion_proof);
  const index = Number(log.leaf_index);
  let included = false;
  try {
    included = proof !== null && Number(log.tree_size) === cp.size &&
      verifyInclusion(leafHash(receiptEntry(jcs(receipt))), index, cp.size, proof, cp.root);
  } catch { /* not provable */ }
  checks.push(
    check(
      "log.inclusion",
      included,
      included
        ? `receipt digest is leaf ${index} of the tree of size ${cp.size}`
        : "the inclusion proof does not verify against the checkpoint",
    ),
  );
  // The signing keyset is itself in the same tree (so its key is on the log's record).
  for (const k of keysetReports) {
    if (!isRecord(k) || !isRecord(k.report) || k.leaf_index === null) continue;
    const digest = String(k.report.workload_keyset_digest);
    const p = proofOf(k.inclusion_proof);
    const ok = p !== null &&
      verifyInclusion(
        leafHash(keysetEntry(digest, k.report)),
        Number(k.leaf_index),
        cp.size,
        p,
        cp.root,
      );
    checks.push(
      check(
        "log.checkpoint_keyset_inclusion",
        ok,
        ok
          ? `keyset ${digest} is leaf ${k.leaf_index} of the same tree`
          : `keyset ${digest}: inclusion proof does not verify`,
      ),
    );
  }
  return checks;
}
