/**
 * Content-addressed blobs in KV, for documents larger than one KV value
 * (64 KiB): the bytes are split into chunks under `[prefix, digest, i]` and
 * written in commits that stay under KV's per-commit size. Writing the same
 * bytes twice writes the same rows (idempotent), so a crash between chunks
 * only leaves rows a later write completes; a reader checks the digest, so a
 * partial blob reads as absent, never as wrong bytes.
 */
import { concatBytes, sha256Prefixed } from "../aci/mod.ts";
import { retryTransient } from "./transient.ts";

/** The prefix of collateral archives (sessions' and the gateway's own quotes'). */
export const COLLATERAL_BLOBS = "collateral";

const CHUNK = 60_000;
/** Chunks per commit: 10 × 60 kB stays under KV's 800 KiB of values per commit. */
const PER_COMMIT = 10;
/** A bound on one blob (collateral documents are tens of kB; a GPU with many RIMs, hundreds). */
const MAX_BLOB_BYTES = 8 * 1024 * 1024;

/** Stores `bytes`, kept `expireInMs` (absent: kept); returns their `sha256:` digest. */
export async function putBlob(
  kv: Deno.Kv,
  prefix: string,
  bytes: Uint8Array,
  expireInMs?: number,
): Promise<string> {
  if (bytes.length > MAX_BLOB_BYTES) throw new RangeError("blob too large");
  const digest = sha256Prefixed(bytes);
  const n = Math.max(1, Math.ceil(bytes.length / CHUNK));
  for (let first = 0; first < n; first += PER_COMMIT) {
    await retryTransient(async () => {
      const op = kv.atomic();
      for (let i = first; i < Math.min(n, first + PER_COMMIT); i++) {
        // A copy: a view would be serialized with its whole underlying buffer.
        const part = bytes.slice(i * CHUNK, (i + 1) * CHUNK);
        // Chunk 0 also says how many there are.
        op.set(
          [prefix, digest, i],
          i === 0 ? { n, part } : { part },
          expireInMs === undefined ? undefined : { expireIn: expireInMs },
        );
      }
      const res = await op.commit();
      if (!res.ok) throw new Error("blob commit was not applied");
    });
  }
  return digest;
}

/** The blob's bytes, or null when absent, incomplete or not matching its digest. */
export async function getBlob(
  kv: Deno.Kv,
  prefix: string,
  digest: string,
): Promise<Uint8Array | null> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const e of kv.list<{ n?: number; part: Uint8Array }>({ prefix: [prefix, digest] })) {
    if (e.key[2] !== parts.length) return null;
    if (parts.length === 0) n = e.value.n ?? 0;
    parts.push(e.value.part);
  }
  if (parts.length === 0 || parts.length !== n) return null;
  const bytes = concatBytes(parts);
  return sha256Prefixed(bytes) === digest ? bytes : null;
}
