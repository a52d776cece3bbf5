/**
 * A receipt's inclusion in the gateway's transparency log, per the team
 * contract: `GET /v1/aci/receipts/{id}/inclusion` returns the leaf index, the
 * tree size, an RFC 6962 inclusion proof and the signed checkpoint; the
 * client recomputes the entry from the receipt it verified, checks the proof
 * against the checkpoint root, and the checkpoint's signature under the log
 * key listed in the attested keyset. A 503 `log_pending` is waited out up to
 * the policy's limit: at the gateway (`?wait=`: it answers when the receipt's
 * checkpoint is signed), or by polling (Retry-After) when it does not wait.
 */
import { type Check, check } from "../verify/checks.ts";
import { isRecord } from "../verify/json_shape.ts";
import { leafHash, verifyInclusion } from "../aci/merkle.ts";
import { ARTIFACT_FETCH_MS, type Transport } from "./transport.ts";
import { type Checkpoint, decodeHash, receiptEntry, verifyCheckpoint } from "./tlog.ts";
import { bytesToHex } from "../aci/hex.ts";

export interface InclusionDeps {
  baseURL: string;
  transport: Transport;
  tlsCheck: (spki: string) => Promise<void>;
  /** The caller's own credential headers (the receipt's owner). */
  auth: Headers;
  waitMs: number;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  /**
   * Nobody waits on the answer (a deferred verdict): ask once a few batch intervals later and
   * poll slowly, sparing the gateway the polls a waiting answer needs.
   */
  patient?: boolean;
}

/** A deferred check's first ask: by then most receipts are in a checkpoint. */
const PATIENT_FIRST_MS = 250;
/** The longest `?wait=` a gateway holds a request (src/handlers/tlog.ts). */
const SERVER_WAIT_MS = 5_000;

/**
 * Checkpoints already verified, by note text and key: answers sequenced together share one
 * checkpoint, so its Ed25519 signature is checked once (pure JS in a browser: worth sparing).
 */
export class CheckpointCache {
  #seen = new Map<string, Checkpoint>();

  verify(note: string, logKey: Uint8Array): Checkpoint | string {
    const id = `${bytesToHex(logKey)}\n${note}`;
    const hit = this.#seen.get(id);
    if (hit) return hit;
    const cp = verifyCheckpoint(note, logKey);
    if (typeof cp === "string") return cp;
    this.#seen.set(id, cp);
    if (this.#seen.size > 8) this.#seen.delete(this.#seen.keys().next().value!);
    return cp;
  }
}

/** Checks the served proof against the receipt and the attested log key. */
export function inclusionCheck(
  receipt: unknown,
  proof: unknown,
  logKey: Uint8Array,
  checkpoints?: CheckpointCache,
): Check {
  const name = "receipt.log_inclusion";
  if (!isRecord(proof)) return check(name, false, "inclusion answer is not a JSON object");
  const { leaf_index: index, tree_size: size, inclusion_proof: path, checkpoint } = proof;
  if (
    typeof index !== "number" || typeof size !== "number" || !Array.isArray(path) ||
    typeof checkpoint !== "string" || path.length > 64
  ) {
    return check(name, false, "inclusion answer lacks leaf_index, tree_size, proof or checkpoint");
  }
  const cp = checkpoints
    ? checkpoints.verify(checkpoint, logKey)
    : verifyCheckpoint(checkpoint, logKey);
  if (typeof cp === "string") return check(name, false, cp);
  if (proof["origin"] !== undefined && proof["origin"] !== cp.origin) {
    return check(name, false, "the answer's origin is not the checkpoint's");
  }
  if (cp.size !== size) {
    return check(name, false, `proof for size ${size}, checkpoint size ${cp.size}`);
  }
  const hashes = path.map(decodeHash);
  if (hashes.some((h) => h === null)) return check(name, false, "a proof hash is not 32 bytes");
  const leaf = leafHash(receiptEntry(receipt));
  if (!verifyInclusion(leaf, index, size, hashes as Uint8Array[], cp.root)) {
    return check(
      name,
      false,
      `the receipt is not leaf ${index} of the signed tree of size ${size}`,
    );
  }
  return check(
    name,
    true,
    `leaf ${index} of the tree of size ${size} signed by the attested log key (${cp.origin})`,
  );
}

/**
 * Fetches a receipt's inclusion proof, waiting out `log_pending`: the proof
 * JSON, or the failed check saying why there is none. Runs alongside the
 * receipt's own fetch; the proof is checked once the receipt verified.
 */
export async function fetchInclusionProof(
  receiptId: string,
  d: InclusionDeps,
): Promise<{ proof: unknown } | Check> {
  const name = "receipt.log_inclusion";
  const url = new URL(`${d.baseURL}/aci/receipts/${encodeURIComponent(receiptId)}/inclusion`);
  const deadline = d.now() + d.waitMs;
  let attempt = 0;
  // The gateway holds the request until the proof exists; one that answers 503 well before
  // the wait asked (older, not waiting, or at its waiter cap) is polled instead. A deferred
  // check's first ask comes late and usually finds the proof: it asks without waiting.
  let serverWait = !d.patient;
  let waitTried = serverWait;
  if (d.patient) await d.sleep(Math.min(PATIENT_FIRST_MS, d.waitMs));
  for (;;) {
    const ask = serverWait ? Math.min(SERVER_WAIT_MS, Math.floor(deadline - d.now())) : 0;
    if (ask > 0) url.searchParams.set("wait", String(ask));
    else url.searchParams.delete("wait");
    const sent = d.now();
    const res = await d.transport.send(url, {
      method: "GET",
      headers: d.auth,
      // The gateway holds a waiting ask for at most `ask` ms; past that and a margin, gone.
      signal: AbortSignal.timeout(ask + ARTIFACT_FETCH_MS),
    }, d.tlsCheck);
    if (res.status === 200) return { proof: await res.json().catch(() => null) };
    await res.body?.cancel();
    if (res.status === 400 && ask > 0) {
      serverWait = false; // a gateway that knows no `wait` and refuses it: ask without
      continue;
    }
    if (res.status !== 503) {
      return check(name, false, `the log has no proof for this receipt (HTTP ${res.status})`);
    }
    if (!waitTried && deadline - d.now() > 0) {
      serverWait = waitTried = true;
      continue;
    }
    if (ask > 0) {
      if (d.now() - sent >= ask / 2) {
        // It waited and the receipt is still not in a checkpoint: ask again while time is left.
        if (d.now() >= deadline) return late(d.waitMs);
        continue;
      }
      serverWait = false;
    }
    // The next checkpoint is usually a batch interval away: poll every 10–50 ms for
    // the first second, then back off to the server's Retry-After.
    const after = Number(res.headers.get("retry-after") ?? "1");
    const cap = Math.min(Math.max(Number.isFinite(after) ? after : 1, 0.05), 2) * 1000;
    const waited = d.now() + d.waitMs - deadline;
    const waitMs = Math.min(
      cap,
      d.patient
        ? 100 * 2 ** attempt++
        : waited < 1_000
        ? Math.min(50, 10 * 2 ** attempt++)
        : waited,
    );
    if (d.now() + waitMs > deadline) return late(d.waitMs);
    await d.sleep(waitMs);
  }
}

function late(waitMs: number): Check {
  return check(
    "receipt.log_inclusion",
    false,
    `the receipt did not reach a checkpoint within ${waitMs} ms`,
  );
}
