/**
 * `task monitor` against real gateways: it follows the log across runs
 * (state file), verifies signatures by keys of keysets the log itself holds,
 * checks consistency with the last checkpoint seen and across replicas, and
 * catches a split view made with the gateway's real key. As a C2SP witness it
 * cosigns (tlog-cosignature/v1) for a gateway configured to require it, and
 * answers the tlog-witness error cases.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { startTestGateway } from "./support/gateway.ts";
import { postRaw } from "./support/receipt_check.ts";
import { runToEnd, taskArgs } from "./support/task_line.ts";
import { goCosigCheck, waitInclusion } from "./support/tlog_check.ts";
import {
  b64,
  checkpointBody,
  parseCheckpointBody,
  parseNote,
  parseVerifierKey,
  verifyNote,
} from "../src/aci/note.ts";
import { createNoteSigner } from "../src/aci/note_signer.ts";

async function traffic(base: string, key: string, n: number): Promise<string> {
  let last = "";
  for (let i = 0; i < n; i++) {
    const ex = await postRaw(
      base,
      "/v1/embeddings",
      { model: "demo/embed-small", input: `m${i}` },
      key,
    );
    assert.equal(ex.status, 200);
    last = ex.receiptId!;
  }
  await waitInclusion(base, last, key);
  return last;
}

async function monitor(args: string[]) {
  return await runToEnd(Deno.execPath(), [...await taskArgs("monitor"), ...args], {
    timeoutMs: 120_000,
  });
}

/** `task monitor` following (a witness too): its stdout lines as they come, and a stop. */
async function followingMonitor(args: string[]) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [...await taskArgs("monitor"), ...args],
    stdout: "piped",
    stderr: "inherit",
    env: { NO_COLOR: "1" },
  }).spawn();
  const lines: string[] = [];
  const reading = (async () => {
    let buf = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      buf += chunk;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        lines.push(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    }
  })();
  return {
    lines,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
      await reading;
    },
  };
}

Deno.test("monitor: follows the log across runs, two replicas agree, a forged split view fails", async () => {
  const dir = await Deno.makeTempDir();
  const a = await startTestGateway({ kvPath: `${dir}/gw.kv` });
  const b = await startTestGateway({ kvPath: `${dir}/gw.kv` });
  // A compromised operator's view for one party: A's log, but a checkpoint of another
  // history signed with A's real checkpoint key.
  const forged = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    if (url.pathname === "/v1/aci/log/checkpoint") {
      const real = parseCheckpointBody(
        parseNote(await (await fetch(`${a.url}${url.pathname}`)).text())!.text,
      )!;
      const body = checkpointBody(real.origin, real.size - 1, new Uint8Array(32).fill(7));
      return new Response(body + "\n" + a.gateway.identity.current().log.sign(body));
    }
    return await fetch(`${a.url}${url.pathname}${url.search}`);
  });
  try {
    await traffic(a.url, a.apiKey, 5);
    await traffic(b.url, a.apiKey, 5);
    const state = `${dir}/monitor.json`;
    const first = await monitor([
      "--gateway",
      a.url,
      "--gateway",
      b.url,
      "--state",
      state,
      "--once",
      "--allow-dev",
    ]);
    const out1 = first.stdout.join("\n");
    assert.equal(first.code, 0, out1 + first.stderr.join("\n"));
    assert.match(out1, /keyset sha256:[0-9a-f]{64}: report verified/);
    assert.match(out1, /entries 0\.\.\d+: \d+ receipts/);
    assert.match(out1, /checkpoint dev\.gateway\.local\/v1\/aci\/log size \d+ root \S+ signed by/);
    assert.match(out1, /split view: none — 2 replicas serve one history/);
    const saved = JSON.parse(await Deno.readTextFile(state));
    assert.ok(saved.keysets.length >= 2, "both replicas' keysets were found through the log");

    await traffic(a.url, a.apiKey, 3);
    const second = await monitor([
      "--gateway",
      a.url,
      "--gateway",
      b.url,
      "--state",
      state,
      "--once",
      "--allow-dev",
    ]);
    assert.equal(second.code, 0, second.stdout.join("\n"));
    assert.match(second.stdout.join("\n"), new RegExp(`consistent: ${saved.size} → \\d+`));

    const split = await monitor([
      "--gateway",
      a.url,
      "--gateway",
      `http://127.0.0.1:${forged.addr.port}`,
      "--state",
      state,
      "--once",
      "--allow-dev",
    ]);
    assert.equal(split.code, 1);
    assert.match(split.stdout.join("\n"), /FAIL SPLIT VIEW/);

    // Without --allow-dev, development evidence does not vouch for a checkpoint key.
    const strict = await monitor(["--gateway", a.url, "--state", `${dir}/strict.json`, "--once"]);
    assert.equal(strict.code, 1);
    assert.match(strict.stdout.join("\n"), /does not verify/);
  } finally {
    await forged.shutdown();
    await a.close();
    await b.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("witness: the gateway serves only cosigned checkpoints; tlog-witness errors", async () => {
  const dir = await Deno.makeTempDir();
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const seed = new Uint8Array(32).fill(9);
  await Deno.writeTextFile(`${dir}/witness.key`, Buffer.from(seed).toString("hex"));
  const name = "witness.test/w1";
  const cosigner = createNoteSigner(name, seed);
  const witnessUrl = `http://127.0.0.1:${port}`;
  const gw = await startTestGateway({
    configure: (c) => {
      c.transparency_log.witnesses = [{ url: witnessUrl, vkey: cosigner.cosignerVkey }];
      c.transparency_log.required_cosignatures = 1;
    },
  });
  const monitor = await followingMonitor([
    "--gateway",
    gw.url,
    "--state",
    `${dir}/monitor.json`,
    "--witness-listen",
    `127.0.0.1:${port}`,
    "--witness-key",
    `${dir}/witness.key`,
    "--witness-name",
    name,
    "--allow-dev",
    "--interval",
    "1",
  ]);
  const lines = monitor.lines;
  try {
    while (!lines.some((l) => l.includes("listening"))) await new Promise((r) => setTimeout(r, 20));
    assert.ok(lines.some((l) => l.includes(cosigner.cosignerVkey)), "the witness prints its vkey");
    const id = await traffic(gw.url, gw.apiKey, 4);
    const { answer } = await waitInclusion(gw.url, id, gw.apiKey, 30_000);
    // The served checkpoint carries the witness's cosignature, valid under its vkey.
    const key = parseVerifierKey(cosigner.cosignerVkey)!;
    const opened = verifyNote(answer.checkpoint, [key]);
    assert.ok(opened, "cosignature verifies");
    assert.ok(opened.cosignedAt.get(name)! > 1_700_000_000);
    const served = await (await fetch(`${gw.url}/v1/aci/log/checkpoint`)).text();
    assert.ok(verifyNote(served, [key]));

    // The same bytes checked by code we did not write for the note (Go's sumdb/note
    // note.Open) and Go's crypto/ed25519 for the cosignature/v1 signature: see tlogcheck.go.
    const logVkey = gw.gateway.identity.current().log.vkey;
    const go = await goCosigCheck(logVkey, cosigner.cosignerVkey, served);
    assert.equal(go.code, 0, go.text);
    assert.match(go.text, new RegExp(`cosignature: ${name} cosigned \\S+ size \\d+ at time \\d+`));
    const cosigLine = served.split("\n").find((l) => l.startsWith(`\u2014 ${name} `))!;
    const alter = (at: number) => {
      const raw = Buffer.from(cosigLine.split(" ")[2], "base64");
      raw[at] ^= 1;
      return served.replace(cosigLine, `\u2014 ${name} ${raw.toString("base64")}`);
    };
    // One bit of the Ed25519 signature, or of the 8-byte timestamp it covers: Go refuses both.
    for (const at of [4 + 8 + 20, 4 + 7]) {
      const bad = await goCosigCheck(logVkey, cosigner.cosignerVkey, alter(at));
      assert.equal(bad.code, 1, bad.text);
      assert.match(bad.text, /invalid signature/);
    }
    // Another witness key under the same name: not this witness's cosignature.
    const impostor = createNoteSigner(name, new Uint8Array(32).fill(3)).cosignerVkey;
    const notHis = await goCosigCheck(logVkey, impostor, served);
    assert.equal(notHis.code, 1);
    assert.match(notHis.text, /cosigned by witness\.test\/w1: false/);
    assert.ok(lines.some((l) => l.startsWith("witness: cosigned")));

    // tlog-witness error cases, straight at the witness.
    const cp = parseCheckpointBody(parseNote(served)!.text)!;
    const post = (body: string) =>
      fetch(`${witnessUrl}/add-checkpoint`, { method: "POST", body }).then(async (r) => ({
        status: r.status,
        type: r.headers.get("content-type"),
        text: await r.text(),
      }));
    const stale = await post(`old 0\n\n${served}`);
    assert.equal(stale.status, 409);
    assert.equal(stale.type, "text/x.tlog.size");
    assert.match(stale.text, /^\d+\n$/);
    const witnessed = Number(stale.text.trim());
    assert.ok(witnessed >= cp.size);
    assert.equal((await post(`old ${cp.size + 5}\n\n${served}`)).status, 400);
    const lines2 = served.split("\n");
    const tampered = served.replace(lines2[lines2.length - 3].slice(-8), "AAAAAAA=");
    assert.equal((await post(`old ${witnessed}\n\n${tampered}`)).status, 403);
    // A checkpoint from another log: unknown origin.
    const other = createNoteSigner("elsewhere.example/log");
    const body = checkpointBody("elsewhere.example/log", 1, new Uint8Array(32));
    assert.equal((await post(`old 0\n\n${body}\n${other.sign(body)}`)).status, 404);
    // A bad consistency proof for a newer size signed with the gateway's key.
    const next = checkpointBody(cp.origin, witnessed + 1, new Uint8Array(32).fill(1));
    const signedNext = `${next}\n${gw.gateway.identity.current().log.sign(next)}`;
    const bad = await post(`old ${witnessed}\n${b64(new Uint8Array(32))}\n\n${signedNext}`);
    assert.ok(bad.status === 422 || bad.status === 403, `${bad.status} ${bad.text}`);
    assert.equal((await post("not a request")).status, 400);
    // The witnessed size again with another root, signed with the log's key: a fork (409).
    const fork = checkpointBody(cp.origin, witnessed, new Uint8Array(32).fill(2));
    const forked = await post(`old ${witnessed}

${fork}
${gw.gateway.identity.current().log.sign(fork)}`);
    assert.equal(forked.status, 409, forked.text);
    assert.equal(
      forked.text,
      `${witnessed}
`,
    );
    // Far beyond the log, under the log's name and key id but not its signature: refused
    // (403) before anything is fetched, and the answer names no URL of the log.
    const far = checkpointBody(cp.origin, 5_000_000, new Uint8Array(32).fill(3));
    const realSig = gw.gateway.identity.current().log.sign(far);
    const sigBytes = Buffer.from(realSig.split(" ")[2], "base64");
    sigBytes[10] ^= 1;
    const forgedSig = `${realSig.split(" ").slice(0, 2).join(" ")} ${sigBytes.toString("base64")}
`;
    const unsigned = await post(`old ${witnessed}

${far}
${forgedSig}`);
    assert.equal(unsigned.status, 403, unsigned.text);
    assert.doesNotMatch(unsigned.text, /http/);
    // A body declared larger than a submission can be: refused before it is read.
    const big = await fetch(`${witnessUrl}/add-checkpoint`, {
      method: "POST",
      body: new Uint8Array(1 << 20),
    });
    await big.body?.cancel();
    assert.equal(big.status, 413);
    // A client that sends half its body and waits holds only its own request.
    const slow = await Deno.connect({ hostname: "127.0.0.1", port });
    await slow.write(
      new TextEncoder().encode(
        "POST /add-checkpoint HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nold 0\n",
      ),
    );
    try {
      const t0 = Date.now();
      assert.equal(
        (await post(`old 0

${served}`)).status,
        409,
      );
      assert.ok(Date.now() - t0 < 3_000, `${Date.now() - t0} ms behind a slow client`);
    } finally {
      slow.close();
    }
  } finally {
    await monitor.stop();
    await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("monitor with a witness: a gateway down is a WARN and the witness keeps serving; a new witness key is 0600", async () => {
  const dir = await Deno.makeTempDir();
  const free = () => {
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (l.addr as Deno.NetAddr).port;
    l.close();
    return port;
  };
  const [gone, port] = [free(), free()];
  const monitor = await followingMonitor([
    "--gateway",
    `http://127.0.0.1:${gone}`,
    "--state",
    `${dir}/monitor.json`,
    "--witness-listen",
    `127.0.0.1:${port}`,
    "--witness-key",
    `${dir}/new.key`,
    "--witness-name",
    "witness.test/w2",
    "--interval",
    "1",
  ]);
  const lines = monitor.lines;
  try {
    const deadline = Date.now() + 60_000;
    while (lines.filter((l) => l.startsWith("WARN")).length < 2 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const warns = lines.filter((l) => l.startsWith("WARN"));
    assert.ok(warns.length >= 2, lines.join("\n"));
    assert.match(warns[0], new RegExp(`^WARN http://127\\.0\\.0\\.1:${gone} unreachable`));
    assert.ok(!lines.some((l) => l.startsWith("FAIL")), lines.join("\n"));
    // Still serving: tlog-witness answers a malformed submission with 400.
    const r = await fetch(`http://127.0.0.1:${port}/add-checkpoint`, { method: "POST", body: "x" });
    await r.body?.cancel();
    assert.equal(r.status, 400);
    assert.equal((await Deno.stat(`${dir}/new.key`)).mode! & 0o777, 0o600);
  } finally {
    await monitor.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a witness started after the gateway: a quiet log's checkpoint is cosigned without new entries", async () => {
  const dir = await Deno.makeTempDir();
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const seed = new Uint8Array(32).fill(5);
  await Deno.writeTextFile(`${dir}/witness.key`, Buffer.from(seed).toString("hex"));
  const name = "witness.test/late";
  const cosigner = createNoteSigner(name, seed);
  const gw = await startTestGateway({
    configure: (c) => {
      c.transparency_log.witnesses = [{
        url: `http://127.0.0.1:${port}`,
        vkey: cosigner.cosignerVkey,
      }];
      c.transparency_log.required_cosignatures = 1;
    },
  });
  let monitor: Awaited<ReturnType<typeof followingMonitor>> | null = null;
  try {
    for (let i = 0; i < 3; i++) {
      const ex = await postRaw(gw.url, "/v1/embeddings", {
        model: "demo/embed-small",
        input: `q${i}`,
      }, gw.apiKey);
      assert.equal(ex.status, 200);
    }
    await gw.gateway.ctx.tlog.settle();
    const before = await fetch(`${gw.url}/v1/aci/log/checkpoint`);
    assert.equal(before.status, 503);
    assert.match((await before.json()).error.message, /none is cosigned by the witnesses/);
    monitor = await followingMonitor([
      "--gateway",
      gw.url,
      "--state",
      `${dir}/monitor.json`,
      "--witness-listen",
      `127.0.0.1:${port}`,
      "--witness-key",
      `${dir}/witness.key`,
      "--witness-name",
      name,
      "--allow-dev",
    ]);
    // No request from here on: the gateway asks again by itself.
    const deadline = Date.now() + 45_000;
    let served: Response | null = null;
    while (Date.now() < deadline) {
      served = await fetch(`${gw.url}/v1/aci/log/checkpoint`);
      if (served.status === 200) break;
      await served.body?.cancel();
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.equal(served?.status, 200);
    const note = await served!.text();
    assert.ok(verifyNote(note, [parseVerifierKey(cosigner.cosignerVkey)!]), note);
    assert.ok(parseCheckpointBody(parseNote(note)!.text)!.size >= 3);
  } finally {
    await monitor?.stop();
    await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});
