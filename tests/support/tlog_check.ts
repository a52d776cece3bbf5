/**
 * Transparency log test helpers: the log's verifier keys from attested
 * keysets, checkpoints opened and checked, inclusion proofs waited for and
 * verified, and the Go interop program (tests/interop/tlogcheck.go, on
 * Debian's golang.org/x/mod/sumdb) run against a live gateway.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import canonicalize from "canonicalize";
import { type Json } from "./receipt_check.ts";
import {
  parseCheckpointBody,
  type ParsedVerifierKey,
  parseVerifierKey,
  SIG_ED25519,
  verifierKey,
  verifyNote,
} from "../../src/aci/note.ts";
import { leafHash, verifyInclusion } from "../../src/aci/merkle.ts";

export interface InclusionAnswer {
  origin: string;
  leaf_index: number;
  tree_size: number;
  inclusion_proof: string[];
  checkpoint: string;
}

/** The checkpoint vkeys listed in a keyset (algo c2sp-note-ed25519). */
export function logVkeys(keyset: Json, origin: string): ParsedVerifierKey[] {
  const keys = keyset.receipt_signing_keys as Json[];
  return keys.filter((k) => k.algo === "c2sp-note-ed25519").map((k) =>
    parseVerifierKey(
      verifierKey(origin, SIG_ED25519, new Uint8Array(Buffer.from(k.public_key as string, "hex"))),
    )!
  );
}

/** The receipt's log entry (CONTRACTS.md): JCS of {kind, receipt_digest}. */
export function receiptEntryOf(receipt: Json): Uint8Array {
  const digest = "sha256:" + createHash("sha256").update(canonicalize(receipt)!).digest("hex");
  return new TextEncoder().encode(canonicalize({ kind: "receipt", receipt_digest: digest })!);
}

/** Polls `GET /v1/aci/receipts/{id}/inclusion` until 200 (503 log_pending before); returns it. */
export async function waitInclusion(
  base: string,
  id: string,
  apiKey: string,
  timeoutMs = 10_000,
): Promise<{ answer: InclusionAnswer; waitedMs: number; pendingSeen: number }> {
  const started = performance.now();
  let pendingSeen = 0;
  for (;;) {
    const res = await fetch(`${base}/v1/aci/receipts/${encodeURIComponent(id)}/inclusion`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    const body = await res.json();
    if (res.status === 200) {
      return {
        answer: body as InclusionAnswer,
        waitedMs: performance.now() - started,
        pendingSeen,
      };
    }
    assert.equal(res.status, 503, JSON.stringify(body));
    assert.equal(body.error.code, "log_pending");
    assert.ok(res.headers.get("retry-after"));
    pendingSeen++;
    if (performance.now() - started > timeoutMs) throw new Error(`receipt ${id} never logged`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Checks an inclusion answer: note signature under `keys`, and the proof against its root. */
export function checkInclusion(
  answer: InclusionAnswer,
  entry: Uint8Array,
  keys: ParsedVerifierKey[],
): { size: number; root: Uint8Array } {
  const verified = verifyNote(answer.checkpoint, keys);
  assert.ok(verified, "checkpoint signature does not verify under the attested log key");
  const cp = parseCheckpointBody(verified.note.text);
  assert.ok(cp);
  assert.equal(cp.origin, answer.origin);
  assert.equal(cp.size, answer.tree_size);
  const proof = answer.inclusion_proof.map((p) => new Uint8Array(Buffer.from(p, "base64")));
  assert.ok(
    verifyInclusion(leafHash(entry), answer.leaf_index, answer.tree_size, proof, cp.root),
    "inclusion proof does not verify",
  );
  return { size: cp.size, root: cp.root };
}

/** `go run tests/interop/tlogcheck.go ARGS` against Debian's x/mod (no network, no modules). */
async function goTlogcheck(args: string[]): Promise<{ code: number; text: string }> {
  const src = new URL("../interop/tlogcheck.go", import.meta.url).pathname;
  const out = await new Deno.Command("go", {
    args: ["run", src, ...args],
    env: {
      GOPATH: "/usr/share/gocode",
      GO111MODULE: "off",
      GOFLAGS: "",
      GOPROXY: "off",
      // The default build cache (under HOME) is kept: compiling net/http afresh takes long.
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: out.code,
    text: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr),
  };
}

/** Runs the Go checker on the live log; returns its output (throws with it on failure). */
export async function runGoCheck(prefix: string, vkey: string, proofs: Json): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "tlogcheck-" });
  try {
    const file = `${dir}/proofs.json`;
    await Deno.writeTextFile(file, JSON.stringify(proofs));
    const { code, text } = await goTlogcheck([prefix, vkey, file]);
    assert.equal(code, 0, `Go tlog check failed:\n${text}`);
    return text;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Checks a cosigned checkpoint in Go (`tlogcheck cosig`): sumdb/note's
 * note.Open with the log's vkey and a cosignature/v1 verifier over Go's
 * crypto/ed25519. Returns the exit code and output (0 only when both verify).
 */
export async function goCosigCheck(
  logVkey: string,
  witnessVkey: string,
  checkpoint: string,
): Promise<{ code: number; text: string }> {
  const dir = await Deno.makeTempDir({ prefix: "tlogcheck-" });
  try {
    const file = `${dir}/checkpoint`;
    await Deno.writeTextFile(file, checkpoint);
    return await goTlogcheck(["cosig", logVkey, witnessVkey, file]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Every entry of the log up to `size`, read from its entry bundles. */
export async function readEntries(prefix: string, size: number): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  for (let b = 0; b * 256 < size; b++) {
    const w = Math.min(256, size - b * 256);
    const idx = String(b % 1000).padStart(3, "0");
    assert.ok(b < 1000, "test logs stay under 256,000 entries");
    const res = await fetch(`${prefix}/tile/entries/${idx}${w < 256 ? `.p/${w}` : ""}`);
    assert.equal(res.status, 200);
    const bytes = new Uint8Array(await res.arrayBuffer());
    let pos = 0;
    while (pos < bytes.length) {
      const n = (bytes[pos] << 8) | bytes[pos + 1];
      out.push(bytes.slice(pos + 2, pos + 2 + n));
      pos += 2 + n;
    }
  }
  assert.equal(out.length, size);
  return out;
}

/**
 * The checkpoint keys of every keyset the log holds: each keyset entry's
 * archived report is fetched, must hash to the logged report digest, and its
 * keyset to the logged keyset digest; its c2sp-note-ed25519 key is the vkey.
 */
export async function logKeysFromEntries(
  base: string,
  origin: string,
  entries: Uint8Array[],
): Promise<ParsedVerifierKey[]> {
  const keys: ParsedVerifierKey[] = [];
  for (const raw of entries) {
    const e = JSON.parse(new TextDecoder().decode(raw)) as Json;
    if (e.kind !== "keyset") continue;
    const res = await fetch(
      `${base}/v1/aci/attestation?workload_keyset_digest=${e.keyset_digest}`,
    );
    assert.equal(res.status, 200);
    const report = await res.json() as Json;
    const digest = "sha256:" + createHash("sha256").update(canonicalize(report)!).digest("hex");
    assert.equal(digest, e.report_digest, "archived report hashes to the logged digest");
    keys.push(...logVkeys((report.attestation as Json).workload_keyset as Json, origin));
  }
  return keys;
}
