/**
 * One log across replicas: two gateway processes append to one tree on one
 * store under concurrent load; one is killed with SIGKILL mid-load (appends
 * and commits in flight). The survivor's tree is one history (every
 * checkpoint seen is consistent with the final one, entries = size, no index
 * twice), and every receipt a client fully received — from either replica —
 * is in it with a verifying inclusion proof.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { createKey } from "../src/keys/keys.ts";
import { NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { baseConfig, spawnGateway, writeConfig } from "./support/process.ts";
import { type Json } from "./support/receipt_check.ts";
import {
  checkInclusion,
  logKeysFromEntries,
  readEntries,
  receiptEntryOf,
  waitInclusion,
} from "./support/tlog_check.ts";
import { parseCheckpointBody, parseNote } from "../src/aci/note.ts";
import { leafHash, verifyConsistency } from "../src/aci/merkle.ts";
import { hashOfHashes } from "../src/aci/merkle.ts";

const ORIGIN = "localhost/v1/aci/log";

Deno.test("two replicas, one log: no fork, no gap, kill -9 loses no acknowledged receipt", async () => {
  const dir = await Deno.makeTempDir();
  const storePath = `${dir}/gw.kv`;
  const upstream = await startDemoUpstream({ name: "plain" });
  upstream.setFault({ kind: "delay", ms: 20 });
  const cfg = await writeConfig(dir, baseConfig({ upstreamUrl: upstream.url, storePath }));
  const kv = await Deno.openKv(storePath);
  let a = await spawnGateway(cfg);
  const b = await spawnGateway(cfg);
  try {
    const { key } = await createKey(kv, {
      tier: "enterprise",
      rpm: 100_000,
      tpm: 100_000_000,
      now: Date.now,
      creditsNano: 1000n * NANO_PER_CREDIT,
    });
    const acknowledged: { id: string; via: string }[] = [];
    const checkpoints: string[] = [];
    let stop = false;
    const worker = async (i: number) => {
      const url = i % 2 === 0 ? a.url : b.url;
      while (!stop) {
        try {
          const r = await fetch(`${url}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body: JSON.stringify({
              model: "demo/echo",
              stream: i % 3 === 0,
              messages: [{ role: "user", content: `log me ${i}` }],
            }),
          });
          await r.text();
          const id = r.headers.get("x-receipt-id");
          if (r.status === 200 && id) acknowledged.push({ id, via: url });
        } catch {
          if (url === a.url) return; // replica A was killed under this request
        }
      }
    };
    const watcher = async () => {
      while (!stop) {
        const r = await fetch(`${b.url}/v1/aci/log/checkpoint`).catch(() => null);
        if (r?.status === 200) checkpoints.push(await r.text());
        else await r?.body?.cancel();
        await new Promise((res) => setTimeout(res, 50));
      }
    };
    const load = [...Array.from({ length: 12 }, (_, i) => worker(i)), watcher()];
    // Wait until both replicas had receipts acknowledged, then kill A mid-load.
    while (acknowledged.filter((x) => x.via === a.url).length < 40 || acknowledged.length < 100) {
      await new Promise((res) => setTimeout(res, 20));
    }
    await a.stop("SIGKILL");
    const beforeKill = acknowledged.length;
    // B keeps taking load for a moment after the crash.
    while (acknowledged.length < beforeKill + 40) await new Promise((res) => setTimeout(res, 20));
    stop = true;
    await Promise.all(load);
    const fromA = acknowledged.filter((x) => x.via === a.url).length;
    assert.ok(fromA >= 40, `${fromA} receipts acknowledged by A`);

    // Every acknowledged receipt is included (A's pending entries are swept by B).
    const prefix = `${b.url}/v1/aci/log`;
    let finalSize = 0;
    for (const { id } of acknowledged) {
      const { answer } = await waitInclusion(b.url, id, key, 20_000);
      finalSize = Math.max(finalSize, answer.tree_size);
    }
    const finalNote = await (await fetch(`${prefix}/checkpoint`)).text();
    const final = parseCheckpointBody(parseNote(finalNote)!.text)!;
    const entries = await readEntries(prefix, final.size);
    // The root over the served entries is the checkpoint's: entries = size, nothing missing.
    assert.deepEqual(hashOfHashes(entries.map(leafHash)), final.root);
    const keys = await logKeysFromEntries(b.url, ORIGIN, entries);
    assert.ok(keys.length >= 2, "both replicas' checkpoint keys are logged with their keysets");
    const indexes = new Set<number>();
    for (const { id } of acknowledged) {
      const { answer } = await waitInclusion(b.url, id, key);
      const receipt = await (await fetch(`${b.url}/v1/aci/receipts/${id}`, {
        headers: { authorization: `Bearer ${key}` },
      })).json() as Json;
      checkInclusion(answer, receiptEntryOf(receipt), keys);
      assert.ok(!indexes.has(answer.leaf_index), "one leaf per receipt");
      indexes.add(answer.leaf_index);
    }
    // Every checkpoint seen during the run is a prefix of the final tree (no fork).
    let checked = 0;
    for (const note of new Set(checkpoints)) {
      const cp = parseCheckpointBody(parseNote(note)!.text)!;
      if (cp.size === 0 || cp.size === final.size) continue;
      const proof = (await (await fetch(`${prefix}/consistency?from=${cp.size}&to=${final.size}`))
        .json()).proof.map((p: string) => new Uint8Array(Buffer.from(p, "base64")));
      assert.ok(verifyConsistency(cp.size, final.size, proof, cp.root, final.root), `${cp.size}`);
      checked++;
    }
    assert.ok(checked > 3, `${checked} intermediate checkpoints checked`);
    // Nothing is left pending.
    const left = [];
    for await (const e of kv.list({ prefix: ["tlog", "pending"] })) left.push(e.key);
    assert.equal(left.length, 0);
    // A restarted A serves the same history.
    a = await spawnGateway(cfg);
    const again = parseCheckpointBody(
      parseNote(await (await fetch(`${a.url}/v1/aci/log/checkpoint`)).text())!.text,
    )!;
    assert.ok(again.size >= final.size);
  } finally {
    await a.stop().catch(() => {});
    await b.stop();
    kv.close();
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
});
