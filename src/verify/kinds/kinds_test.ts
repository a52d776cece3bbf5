import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { allPassed } from "../checks.ts";
import { defaultGpuDeps } from "../nvidia/deps.ts";
import { EVIDENCE_KINDS, evidenceKind } from "./table.ts";
import { textToBytes } from "./decode.ts";
import type { EvidenceContext } from "./types.ts";

const ctx: EvidenceContext = {
  at: Date.parse("2026-01-20T00:00:00Z"),
  tdx: { source: { get: () => Promise.reject(new Error("no collateral here")) } },
  snp: { roots: [] },
  gpu: defaultGpuDeps(),
};

/** Hostile and malformed inputs, bounded in count and size. */
function hostileInputs(): [string, Uint8Array][] {
  const enc = new TextEncoder();
  const random = new Uint8Array(5000).map((_, i) => (i * 2654435761) >>> 24);
  const snpLike = new Uint8Array(1184);
  snpLike[0] = 5;
  snpLike[0x34] = 1;
  snpLike.set([0x1a, 0x02, 0x01], 0x188);
  const tdxLike = new Uint8Array(1020);
  tdxLike.set([4, 0, 2, 0, 0x81, 0, 0, 0]);
  const bomb = gzipSync(new Uint8Array(64 * 1024 * 1024));
  return [
    ["empty", new Uint8Array(0)],
    ["random bytes", random],
    ["empty object", enc.encode("{}")],
    ["array", enc.encode("[1,2,3]")],
    ["quote not hex", enc.encode('{"quote":"zz-not-hex","event_log":"[not json"}')],
    ["odd hex", enc.encode("0x123")],
    ["corrupt gzip in base64", enc.encode(btoa("\x1f\x8b\x08\x00garbage-after-the-header"))],
    [
      "gzip bomb (64 MiB of zeros)",
      enc.encode(btoa(String.fromCharCode(...bomb.subarray(0, 60000)))),
    ],
    ["SNP-shaped zeros (Turin v5, no signature)", snpLike],
    ["TDX header without a body", tdxLike],
    ["report field of numbers", enc.encode(JSON.stringify({ report: [1, 2, 3], vcek: "x" }))],
    [
      "nvidia payload, no evidence",
      enc.encode('{"nonce":"' + "ab".repeat(32) + '","arch":"HOPPER","evidence_list":[]}'),
    ],
    ["deeply nested JSON", enc.encode("[".repeat(5000) + "]".repeat(5000))],
  ];
}

Deno.test("evidence kinds: hostile input never throws and never passes", async () => {
  for (const name of Object.keys(EVIDENCE_KINDS)) {
    const kind = evidenceKind(name)!;
    for (const [what, input] of hostileInputs()) {
      const checks = await kind.verify(input, ctx);
      assert.ok(checks.length > 0, `${name} / ${what}: no checks`);
      assert.equal(allPassed(checks), false, `${name} / ${what} passed`);
    }
  }
});

Deno.test("evidence decoding: hex, base64, gzip; corrupt gzip and bombs are refused, not thrown", () => {
  assert.deepEqual(textToBytes("0x0a0B"), Uint8Array.from([10, 11]));
  assert.deepEqual(textToBytes(btoa("\x01\x02")), Uint8Array.from([1, 2]));
  const gz = gzipSync(Uint8Array.from([7, 8, 9]));
  assert.deepEqual(textToBytes(btoa(String.fromCharCode(...gz))), Uint8Array.from([7, 8, 9]));
  assert.equal(textToBytes(btoa("\x1f\x8b\x08\x00not a gzip stream")), null);
  const bomb = gzipSync(new Uint8Array(16 * 1024 * 1024));
  let b = "";
  for (const x of bomb) b += String.fromCharCode(x);
  assert.equal(textToBytes(btoa(b)), null, "inflating past 4 MiB is refused");
  assert.equal(textToBytes(""), null);
  assert.equal(evidenceKind("toString"), null);
  assert.equal(evidenceKind("nope"), null);
});
