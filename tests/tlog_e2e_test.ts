/**
 * The transparency log end to end through the real gateway: receipts
 * (answers, streams, refusals), attested sessions and keysets enter the log;
 * the checkpoint is a C2SP signed note under the key the attested keyset
 * lists; every receipt's inclusion proof verifies within the stated bound;
 * tiles, bundles and checkpoints have the C2SP paths, types and caching; and
 * Go's golang.org/x/mod/sumdb/tlog and sumdb/note accept the same bytes.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import canonicalize from "canonicalize";
import { startTestGateway } from "./support/gateway.ts";
import {
  fetchReceipt,
  fetchReport,
  type Json,
  keysetOf,
  postRaw,
} from "./support/receipt_check.ts";
import {
  checkInclusion,
  logVkeys,
  receiptEntryOf,
  runGoCheck,
  waitInclusion,
} from "./support/tlog_check.ts";
import { decodeBundle } from "../src/tlog/tiles.ts";
import { parseCheckpointBody, verifyNote } from "../src/aci/note.ts";
import { verifyConsistency } from "../src/aci/merkle.ts";

/** The inclusion bound stated in docs/decisions/transparency-log-cadence.md. */
const INCLUSION_BOUND_MS = 2_000;

const chat = (content: string, stream = false) => ({
  model: "demo/echo",
  stream,
  messages: [{ role: "user", content }],
});

Deno.test("transparency log: receipts, sessions and keysets are logged and provable, Go agrees", async () => {
  const gw = await startTestGateway();
  try {
    const base = gw.url;
    const prefix = `${base}/v1/aci/log`;
    const { report } = await fetchReport(base);
    const keyset = keysetOf(report);
    // The origin is the configured subject's log prefix (dev: dev.gateway.local).
    const origin = "dev.gateway.local/v1/aci/log";
    const keys = logVkeys(keyset, origin);
    assert.equal(keys.length, 1, "the attested keyset lists one checkpoint key");

    // Answers (whole and streamed) and a refusal, each with its receipt.
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const ex = await postRaw(
        base,
        "/v1/chat/completions",
        chat(`hello ${i}`, i % 2 === 1),
        gw.apiKey,
      );
      assert.equal(ex.status, 200);
      ids.push(ex.receiptId!);
    }
    // An answer from the confidential upstream: its attested session is logged too.
    const attested = await postRaw(base, "/v1/chat/completions", {
      model: "demo/private",
      messages: [{ role: "user", content: "attested" }],
    }, gw.apiKey);
    assert.equal(attested.status, 200);
    ids.push(attested.receiptId!);
    const refused = await postRaw(
      base,
      "/v1/chat/completions",
      { model: "no/such", messages: [] },
      gw.apiKey,
    );
    assert.ok(refused.status >= 400);
    assert.ok(refused.receiptId, "a refusal has a receipt");
    ids.push(refused.receiptId);

    let first: { size: number; root: Uint8Array } | null = null;
    let firstCheckpoint = "";
    const inclusions: Json[] = [];
    for (const id of ids) {
      const { answer, waitedMs } = await waitInclusion(base, id, gw.apiKey);
      assert.ok(waitedMs < INCLUSION_BOUND_MS, `inclusion took ${waitedMs} ms`);
      const receipt = (await fetchReceipt(base, id, gw.apiKey)).body as Json;
      const entry = receiptEntryOf(receipt);
      const cp = checkInclusion(answer, entry, keys);
      first ??= cp;
      firstCheckpoint ||= answer.checkpoint;
      inclusions.push({ ...answer, entry: Buffer.from(entry).toString("base64") });
    }
    // Someone else's receipt is not theirs to prove; unknown ids are receipt_not_found.
    const other = await gw.newKey();
    const foreign = await fetch(`${base}/v1/aci/receipts/${ids[0]}/inclusion`, {
      headers: { authorization: `Bearer ${other}` },
    });
    assert.equal(foreign.status, 404);
    assert.equal((await foreign.json()).error.code, "receipt_not_found");

    // More traffic, then the served checkpoint must be consistent with the first one seen.
    for (let i = 0; i < 300; i++) {
      const ex = await postRaw(base, "/v1/embeddings", {
        model: "demo/embed-small",
        input: `x${i}`,
      }, gw.apiKey);
      assert.equal(ex.status, 200);
      if (i === 299) await waitInclusion(base, ex.receiptId!, gw.apiKey);
    }
    const cpRes = await fetch(`${prefix}/checkpoint`);
    assert.equal(cpRes.headers.get("content-type"), "text/plain; charset=utf-8");
    assert.match(cpRes.headers.get("cache-control")!, /max-age=[0-5]\b/);
    const note = await cpRes.text();
    const opened = verifyNote(note, keys);
    assert.ok(opened);
    const latest = parseCheckpointBody(opened.note.text)!;
    assert.equal(latest.origin, origin);
    assert.ok(latest.size > 256, "the tree spans more than one tile");
    const cons = await (await fetch(`${prefix}/consistency?from=${first!.size}&to=${latest.size}`))
      .json();
    const consProof = (cons.proof as string[]).map((p) => new Uint8Array(Buffer.from(p, "base64")));
    assert.ok(verifyConsistency(first!.size, latest.size, consProof, first!.root, latest.root));

    // Tiles: full and partial, immutable, octet-stream; bad paths 404.
    const full = await fetch(`${prefix}/tile/0/000`);
    assert.equal(full.status, 200);
    assert.equal(full.headers.get("content-type"), "application/octet-stream");
    assert.match(full.headers.get("cache-control")!, /immutable/);
    assert.equal((await full.arrayBuffer()).byteLength, 8192);
    const w = latest.size % 256;
    if (w > 0) {
      const part = await fetch(`${prefix}/tile/0/001.p/${w}`);
      assert.equal((await part.arrayBuffer()).byteLength, w * 32);
    }
    const level1 = await fetch(`${prefix}/tile/1/000.p/${Math.floor(latest.size / 256)}`);
    assert.equal((await level1.arrayBuffer()).byteLength, 32 * Math.floor(latest.size / 256));
    for (
      const bad of [
        "tile/0/0",
        "tile/0/001.p/0",
        "tile/0/001.p/256",
        "tile/0/x000/001",
        "tile/64/000",
        "tile/0/009",
      ]
    ) {
      const r = await fetch(`${prefix}/${bad}`);
      assert.equal(r.status, 404, bad);
      await r.body?.cancel();
    }

    // The entries: receipts, this replica's keyset (with its archived report's digest); digests only.
    const bundle = new Uint8Array(await (await fetch(`${prefix}/tile/entries/000`)).arrayBuffer());
    const entries = decodeBundle(bundle).map((e) => JSON.parse(new TextDecoder().decode(e)));
    assert.equal(entries.length, 256);
    // Served again (from the full-bundle cache) and as a prefix: the same bytes.
    const again = new Uint8Array(await (await fetch(`${prefix}/tile/entries/000`)).arrayBuffer());
    assert.deepEqual(again, bundle);
    const head = new Uint8Array(
      await (await fetch(`${prefix}/tile/entries/000.p/10`)).arrayBuffer(),
    );
    assert.deepEqual(decodeBundle(head), decodeBundle(bundle).slice(0, 10));
    assert.deepEqual(head, bundle.subarray(0, head.length));
    const kinds = new Set(entries.map((e) => e.kind));
    assert.ok(
      kinds.has("receipt") && kinds.has("keyset") && kinds.has("session"),
      [...kinds].join(","),
    );
    const attestedReceipt = (await fetchReceipt(base, attested.receiptId!, gw.apiKey)).body as Json;
    const sessionId = (attestedReceipt.event_log as Json[]).find((e) =>
      e.type === "upstream.verified"
    )
      ?.session_id;
    assert.ok(
      entries.some((e) => e.kind === "session" && e.session_id === sessionId),
      "the receipt's session is logged",
    );
    const keysetDigest = report.workload_keyset_digest as string;
    const ks = entries.find((e) => e.kind === "keyset" && e.keyset_digest === keysetDigest);
    assert.ok(ks, "the current keyset is logged");
    const archived =
      (await (await fetch(`${base}/v1/aci/attestation?keyset_digest=${keysetDigest}`))
        .json()) as Json;
    const reportDigest = "sha256:" +
      createHash("sha256").update(canonicalize(archived)!).digest("hex");
    assert.equal(ks.report_digest, reportDigest);
    for (const e of entries) {
      assert.deepEqual(
        Object.keys(e).sort().filter((k) =>
          !["kind", "receipt_digest", "session_id", "keyset_digest", "report_digest"].includes(k)
        ),
        [],
      );
    }
    assert.ok(!new TextDecoder().decode(bundle).includes("hello"), "no content in the log");

    // An implementation we did not write accepts the same bytes.
    const vkey = `${origin}+${Buffer.from(keys[0].id).toString("hex")}+${
      Buffer.from([1, ...keys[0].publicKey]).toString("base64")
    }`;
    const out = await runGoCheck(prefix, vkey, {
      inclusions,
      consistency: [{ from: first!.size, to: latest.size, proof: cons.proof }, {
        from: 0,
        to: latest.size,
        proof: [],
      }],
      old_checkpoint: firstCheckpoint,
    });
    assert.match(out, /OK\n$/);
  } finally {
    await gw.close();
  }
});
