/**
 * The bench's E2EE v2 rows: one request at a time on one keep-alive
 * connection, plain and E2EE chat requests alternating against the same
 * gateway, so their latency and server CPU compare under the same
 * conditions. E2EE requests are encrypted before the clock starts (each with
 * its own nonce); the gateway's part is its decryption, the replay claim (one
 * atomic KV commit), and the encryption of the answer. The claim alone is
 * measured on a fresh KV file too.
 */
import { randomBytes } from "node:crypto";
import { encodeRequest, HttpConn } from "./http_conn.ts";
import { chatBody, type Target } from "./load.ts";
import { cpuMs } from "./processes.ts";
import { median, percentile } from "./stats.ts";
import { fmt, type Row } from "./report.ts";
import { encryptField, generateKeyPair, requestAad, X25519_ALGO } from "../src/e2ee/crypto.ts";
import { bytesToHex } from "../src/aci/hex.ts";
import { createReplayGuard } from "../src/e2ee/replay.ts";

const rnd = (n: number) => new Uint8Array(randomBytes(n));
/** Requests per batch: each batch is one kind, batches alternate. */
const BATCH = 50;

interface Side {
  latencies: number[];
  cpuUs: number[];
  e2eePhase: number[];
}

/** An encrypted copy of the bench's chat request, as the client module would send it. */
function e2eeRequest(t: Target, serviceKey: string, model: string): Uint8Array {
  const nonce = randomBytes(32).toString("hex");
  const ts = Math.floor(Date.now() / 1000);
  const plain = JSON.parse(chatBody(model, false));
  const ctx = { algo: X25519_ALGO, model, nonce, ts } as const;
  plain.messages[0].content = encryptField(
    X25519_ALGO,
    serviceKey,
    new TextEncoder().encode(plain.messages[0].content),
    requestAad(ctx, "messages.0.content"),
    rnd,
  );
  const client = generateKeyPair(X25519_ALGO);
  return encodeRequest(new URL("/v1/chat/completions", t.base), {
    headers: {
      "content-type": "application/json",
      ...t.headers,
      "x-e2ee-version": "2",
      "x-client-pub-key": bytesToHex(client.publicKey),
      "x-model-pub-key": serviceKey,
      "x-e2ee-nonce": nonce,
      "x-e2ee-timestamp": String(ts),
    },
    body: JSON.stringify(plain),
  });
}

/** E2EE vs plain rows for `seconds` of alternating batches against the gateway at `pid`. */
export async function measureE2ee(
  t: Target,
  pid: number,
  dir: string,
  seconds: number,
): Promise<{ rows: Row[]; ok: number }> {
  const report = await (await fetch(`${t.base}/v1/aci/attestation`)).json();
  const key = report.attestation.workload_keyset.e2ee_public_keys
    .find((k: { algo: string }) => k.algo === X25519_ALGO).public_key as string;
  const model = t.model("chat");
  const plainReq = encodeRequest(new URL("/v1/chat/completions", t.base), {
    headers: { "content-type": "application/json", ...t.headers },
    body: chatBody(model, false),
  });
  const conn = await HttpConn.open(new URL(t.base));
  const sides: Record<"plain" | "e2ee", Side> = {
    plain: { latencies: [], cpuUs: [], e2eePhase: [] },
    e2ee: { latencies: [], cpuUs: [], e2eePhase: [] },
  };
  let ok = 0;
  const deadline = performance.now() + seconds * 2000;
  try {
    while (performance.now() < deadline) {
      for (const kind of ["plain", "e2ee"] as const) {
        const reqs = Array.from(
          { length: BATCH },
          () => kind === "plain" ? plainReq : e2eeRequest(t, key, model),
        );
        const s = sides[kind];
        const cpu0 = cpuMs(pid);
        for (const req of reqs) {
          const t0 = performance.now();
          const res = await conn.request(req);
          const t1 = performance.now();
          if (res.status !== 200) throw new Error(`${kind} request answered ${res.status}`);
          ok++;
          s.latencies.push(t1 - t0);
          const m = res.serverTiming?.match(/e2ee;dur=([\d.]+)/);
          if (m) s.e2eePhase.push(Number(m[1]));
        }
        s.cpuUs.push(((cpuMs(pid) - cpu0) * 1000) / BATCH);
      }
    }
  } finally {
    conn.close();
  }
  const claim = await claimLatency(dir);
  const ms = (v: number) => fmt(v, 3);
  const lat = (k: "plain" | "e2ee") => median(sides[k].latencies);
  const cpu = (k: "plain" | "e2ee") => median(sides[k].cpuUs);
  return {
    ok,
    rows: [
      {
        metric: "E2EE v2 chat vs plain, c=1: p50 latency plain → E2EE (ms) / added (ms)",
        gateway: `${ms(lat("plain"))} → ${ms(lat("e2ee"))} / +${ms(lat("e2ee") - lat("plain"))}`,
      },
      {
        metric: "E2EE v2 chat vs plain, c=1: server CPU per request plain → E2EE (µs) / added (µs)",
        gateway: `${fmt(cpu("plain"), 0)} → ${fmt(cpu("e2ee"), 0)} / +${
          fmt(cpu("e2ee") - cpu("plain"), 0)
        }`,
      },
      {
        metric: "E2EE request step (Server-Timing e2ee: decrypt + replay claim), p50 / p99 (ms)",
        gateway: `${ms(median(sides.e2ee.e2eePhase))} / ${
          ms(percentile(sides.e2ee.e2eePhase, 99))
        }`,
      },
      {
        metric: "E2EE replay claim alone (atomic KV check-and-set, fresh file), p50 / p99 (ms)",
        gateway: `${ms(claim.p50)} / ${ms(claim.p99)}`,
      },
    ],
  };
}

async function claimLatency(dir: string, n = 300): Promise<{ p50: number; p99: number }> {
  const kv = await Deno.openKv(`${dir}/e2ee-claims.kv`);
  const guard = createReplayGuard(kv, Date.now);
  const times: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const tuple = { serviceKey: "bb".repeat(32), nonce: `${i}` };
      const t0 = performance.now();
      if (!await guard.claim(tuple, Date.now() + 301_000)) throw new Error("claim refused");
      times.push(performance.now() - t0);
    }
  } finally {
    kv.close();
  }
  return { p50: median(times), p99: percentile(times, 99) };
}

/** `deno run -A bench/e2ee.ts [--seconds S]`: only these rows, on a mock upstream and one gateway. */
if (import.meta.main) {
  const { spawnPinned } = await import("./processes.ts");
  const { startGateway, gatewayModel } = await import("./gateway_setup.ts");
  const { renderTable } = await import("./report.ts");
  const i = Deno.args.indexOf("--seconds");
  const seconds = i >= 0 ? Number(Deno.args[i + 1]) : 2;
  const dir = await Deno.makeTempDir({ prefix: "gateway-bench-e2ee-" });
  const mock = await spawnPinned(
    1,
    ["run", "-A", "bench/mock_upstream.ts"],
    /mock listening on (\S+)/,
  );
  const gw = await startGateway(dir, mock.url, 0);
  try {
    const t = { base: gw.url, headers: { authorization: `Bearer ${gw.key}` }, model: gatewayModel };
    const { rows } = await measureE2ee(t, gw.pid, dir, seconds);
    console.log(renderTable(rows));
  } finally {
    await gw.stop();
    await mock.stop();
    await Deno.remove(dir, { recursive: true });
  }
}
