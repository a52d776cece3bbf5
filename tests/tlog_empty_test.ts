/**
 * The empty log (C2SP tlog-checkpoint, tlog-tiles): before anything is
 * appended, `GET /v1/aci/log/checkpoint` serves a signed checkpoint of size 0
 * whose root is SHA-256 of the empty string — not an error. Go's sumdb/note
 * opens it with the attested key, `task monitor` accepts it, and once the
 * log has entries the monitor follows on from size 0 (every tree is
 * consistent with the empty one: the proof from size 0 is empty).
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { startTestGateway } from "./support/gateway.ts";
import { fetchReport, keysetOf, postRaw } from "./support/receipt_check.ts";
import { logVkeys, runGoCheck, waitInclusion } from "./support/tlog_check.ts";
import { runToEnd, taskArgs } from "./support/task_line.ts";
import { b64, parseCheckpointBody, parseNote, verifyNote } from "../src/aci/note.ts";
import { emptyRoot, verifyConsistency } from "../src/aci/merkle.ts";

const ORIGIN = "dev.gateway.local/v1/aci/log";

async function monitor(state: string, url: string) {
  const run = await runToEnd(
    Deno.execPath(),
    [...await taskArgs("monitor"), "--gateway", url, "--state", state, "--once", "--allow-dev"],
    { timeoutMs: 120_000 },
  );
  return { code: run.code, out: run.stdout.join("\n") + run.stderr.join("\n") };
}

Deno.test("empty log: a signed size-0 checkpoint; Go and the monitor accept it, then follow on from 0", async () => {
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/gw.kv`;
  const state = `${dir}/monitor.json`;
  // A gateway that logs nothing (not even its keyset): its log stays empty.
  const quiet = await startTestGateway({ kvPath, logEntries: false });
  try {
    const res = await fetch(`${quiet.url}/v1/aci/log/checkpoint`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/plain; charset=utf-8");
    const note = await res.text();
    const cp = parseCheckpointBody(parseNote(note)!.text)!;
    assert.equal(cp.origin, ORIGIN);
    assert.equal(cp.size, 0);
    assert.deepEqual(cp.root, emptyRoot());
    assert.equal(b64(cp.root), "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    // Signed by the checkpoint key of the gateway's attested keyset.
    const keys = logVkeys(keysetOf((await fetchReport(quiet.url)).report), ORIGIN);
    assert.ok(verifyNote(note, keys), "the size-0 checkpoint is signed by the attested log key");
    // No tiles exist for the empty tree; the consistency proof 0 → 0 is empty.
    assert.equal((await fetch(`${quiet.url}/v1/aci/log/tile/0/000.p/1`)).status, 404);
    const cons = await fetch(`${quiet.url}/v1/aci/log/consistency?from=0&to=0`);
    assert.deepEqual(await cons.json(), { proof: [] });

    // An implementation we did not write opens the note with the same key.
    const vkey = `${ORIGIN}+${Buffer.from(keys[0].id).toString("hex")}+${
      Buffer.from([1, ...keys[0].publicKey]).toString("base64")
    }`;
    const go = await runGoCheck(`${quiet.url}/v1/aci/log`, vkey, {
      inclusions: [],
      consistency: [],
    });
    assert.match(go, /size 0 .*note signature verified by sumdb\/note/);
    assert.match(go, /empty tree: root is SHA-256 of the empty string/);

    const first = await monitor(state, quiet.url);
    assert.equal(first.code, 0, first.out);
    assert.match(first.out, /size 0 \(the empty tree\): nothing logged yet/);
    assert.equal(JSON.parse(await Deno.readTextFile(state)).size, 0);
  } finally {
    await quiet.close();
  }

  // The same store, now with a logging gateway: the log grows from the empty tree.
  const gw = await startTestGateway({ kvPath });
  try {
    let last = "";
    for (let i = 0; i < 3; i++) {
      const ex = await postRaw(
        gw.url,
        "/v1/embeddings",
        { model: "demo/embed-small", input: `e${i}` },
        gw.apiKey,
      );
      assert.equal(ex.status, 200);
      last = ex.receiptId!;
    }
    await waitInclusion(gw.url, last, gw.apiKey);
    const note = await (await fetch(`${gw.url}/v1/aci/log/checkpoint`)).text();
    const cp = parseCheckpointBody(parseNote(note)!.text)!;
    assert.ok(cp.size >= 4, "three receipts and the keyset");
    const cons = await (await fetch(`${gw.url}/v1/aci/log/consistency?from=0&to=${cp.size}`))
      .json();
    assert.deepEqual(cons, { proof: [] });
    assert.ok(verifyConsistency(0, cp.size, [], emptyRoot(), cp.root));

    const next = await monitor(state, gw.url);
    assert.equal(next.code, 0, next.out);
    assert.match(next.out, new RegExp(`entries 0\\.\\.${cp.size}: 3 receipts`));
    assert.match(next.out, /keyset sha256:[0-9a-f]{64}: report verified/);
    assert.match(next.out, new RegExp(`checkpoint ${ORIGIN} size ${cp.size} root \\S+ signed by`));
    assert.equal(JSON.parse(await Deno.readTextFile(state)).size, cp.size);
  } finally {
    await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});
