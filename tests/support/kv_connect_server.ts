/**
 * A KV Connect server for tests: the protocol Deno's own client speaks to a
 * remote Deno KV (`Deno.openKv("http://…")` with `DENO_KV_ACCESS_TOKEN`),
 * i.e. what a self-hosted `denokv` or a managed KV serves. No `denokv` server
 * package can be installed here, so the gateway's remote-store path is tested
 * against this one: the metadata exchange (protocol version 2) and the
 * protobuf data path (`snapshot_read`, `atomic_write`) of denokv's
 * `proto/kv-connect.md` and `schema/datapath.proto`, over an in-memory,
 * strictly serialized store (versionstamped entries, checks, set / delete /
 * sum / min / max, expiry). Watches and queues are not served: the gateway
 * uses neither.
 */

/** Protobuf wire reader: just varints and length-delimited fields. */
class Reader {
  #pos = 0;
  constructor(readonly buf: Uint8Array) {}
  get done(): boolean {
    return this.#pos >= this.buf.length;
  }
  varint(): number {
    let out = 0;
    let mul = 1;
    for (;;) {
      if (this.#pos >= this.buf.length) throw new Error("truncated varint");
      const b = this.buf[this.#pos++];
      out += (b & 0x7f) * mul;
      if (b < 0x80) return out;
      mul *= 128;
      if (mul > 2 ** 63) throw new Error("varint too long");
    }
  }
  bytes(): Uint8Array {
    const n = this.varint();
    if (this.#pos + n > this.buf.length) throw new Error("truncated field");
    const out = this.buf.subarray(this.#pos, this.#pos + n);
    this.#pos += n;
    return out;
  }
  /** Each field as [number, wire type]; the caller reads its value or calls `skip`. */
  tag(): [number, number] {
    const t = this.varint();
    return [Math.floor(t / 8), t & 7];
  }
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 2) this.bytes();
    else if (wire === 1) this.#pos += 8;
    else if (wire === 5) this.#pos += 4;
    else throw new Error(`unsupported wire type ${wire}`);
  }
}

/** Protobuf wire writer. */
class Writer {
  #parts: number[] = [];
  varint(v: number): this {
    while (v >= 0x80) {
      this.#parts.push((v % 128) | 0x80);
      v = Math.floor(v / 128);
    }
    this.#parts.push(v);
    return this;
  }
  uint(field: number, v: number): this {
    return v === 0 ? this : this.varint(field * 8).varint(v);
  }
  bytes(field: number, b: Uint8Array): this {
    this.varint(field * 8 + 2).varint(b.length);
    for (const x of b) this.#parts.push(x);
    return this;
  }
  finish(): Uint8Array<ArrayBuffer> {
    return new Uint8Array(this.#parts);
  }
}

const M_SET = 1, M_DELETE = 2, M_SUM = 3, M_MAX = 4, M_MIN = 5;
const VE_LE64 = 2;
const AW_SUCCESS = 1, AW_CHECK_FAILURE = 2;
const SR_SUCCESS = 1;

interface Entry {
  value: Uint8Array;
  encoding: number;
  versionstamp: Uint8Array;
  /** Epoch ms, 0 = never. */
  expireAt: number;
}

interface ReadRange {
  start: Uint8Array;
  end: Uint8Array;
  limit: number;
  reverse: boolean;
}

interface Mutation {
  key: Uint8Array;
  value: Uint8Array;
  encoding: number;
  type: number;
  expireAt: number;
}

function parseKvValue(b: Uint8Array): { data: Uint8Array; encoding: number } {
  const r = new Reader(b);
  let data: Uint8Array = new Uint8Array();
  let encoding = 0;
  while (!r.done) {
    const [f, w] = r.tag();
    if (f === 1 && w === 2) data = r.bytes();
    else if (f === 2 && w === 0) encoding = r.varint();
    else r.skip(w);
  }
  return { data, encoding };
}

function parseSnapshotRead(b: Uint8Array): ReadRange[] {
  const ranges: ReadRange[] = [];
  const r = new Reader(b);
  while (!r.done) {
    const [f, w] = r.tag();
    if (f !== 1 || w !== 2) {
      r.skip(w);
      continue;
    }
    const rr = new Reader(r.bytes());
    const range: ReadRange = {
      start: new Uint8Array(),
      end: new Uint8Array(),
      limit: 0,
      reverse: false,
    };
    while (!rr.done) {
      const [g, v] = rr.tag();
      if (g === 1 && v === 2) range.start = rr.bytes();
      else if (g === 2 && v === 2) range.end = rr.bytes();
      else if (g === 3 && v === 0) range.limit = rr.varint();
      else if (g === 4 && v === 0) range.reverse = rr.varint() !== 0;
      else rr.skip(v);
    }
    ranges.push(range);
  }
  return ranges;
}

function parseAtomicWrite(b: Uint8Array): {
  checks: { key: Uint8Array; versionstamp: Uint8Array }[];
  mutations: Mutation[];
  enqueues: number;
} {
  const checks: { key: Uint8Array; versionstamp: Uint8Array }[] = [];
  const mutations: Mutation[] = [];
  let enqueues = 0;
  const r = new Reader(b);
  while (!r.done) {
    const [f, w] = r.tag();
    if (w !== 2) {
      r.skip(w);
      continue;
    }
    const body = new Reader(r.bytes());
    if (f === 1) {
      const c: { key: Uint8Array; versionstamp: Uint8Array } = {
        key: new Uint8Array(),
        versionstamp: new Uint8Array(),
      };
      while (!body.done) {
        const [g, v] = body.tag();
        if (g === 1 && v === 2) c.key = body.bytes();
        else if (g === 2 && v === 2) c.versionstamp = body.bytes();
        else body.skip(v);
      }
      checks.push(c);
    } else if (f === 2) {
      const m: Mutation = {
        key: new Uint8Array(),
        value: new Uint8Array(),
        encoding: 0,
        type: 0,
        expireAt: 0,
      };
      while (!body.done) {
        const [g, v] = body.tag();
        if (g === 1 && v === 2) m.key = body.bytes();
        else if (g === 2 && v === 2) {
          ({ data: m.value, encoding: m.encoding } = parseKvValue(body.bytes()));
        } else if (g === 3 && v === 0) m.type = body.varint();
        else if (g === 4 && v === 0) m.expireAt = body.varint();
        else body.skip(v);
      }
      mutations.push(m);
    } else if (f === 3) enqueues++;
  }
  return { checks, mutations, enqueues };
}

function compare(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const sameBytes = (a: Uint8Array, b: Uint8Array) => compare(a, b) === 0;

function le64(b: Uint8Array): bigint {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getBigUint64(0, true);
}

function toLe64(v: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, v, true);
  return out;
}

/** The in-memory store behind the server: every operation runs to completion before the next. */
export class KvConnectStore {
  readonly #entries = new Map<string, { key: Uint8Array; entry: Entry }>();
  #version = 0;
  /** Data-path requests served, by kind (a test can see the remote path was used). */
  readonly served = { reads: 0, writes: 0 };

  constructor(private readonly now: () => number) {}

  #live(k: string): Entry | undefined {
    const e = this.#entries.get(k)?.entry;
    if (e && e.expireAt !== 0 && e.expireAt <= this.now()) {
      this.#entries.delete(k);
      return undefined;
    }
    return e;
  }

  read(ranges: ReadRange[]): Uint8Array<ArrayBuffer> {
    this.served.reads++;
    const out = new Writer();
    const sorted = [...this.#entries.values()].sort((a, b) => compare(a.key, b.key));
    for (const range of ranges) {
      let hits = sorted.filter((x) =>
        compare(x.key, range.start) >= 0 && compare(x.key, range.end) < 0 && this.#live(hex(x.key))
      );
      if (range.reverse) hits = hits.reverse();
      if (range.limit > 0) hits = hits.slice(0, range.limit);
      const rangeOut = new Writer();
      for (const { key, entry } of hits) {
        rangeOut.bytes(
          1,
          new Writer().bytes(1, key).bytes(2, entry.value).uint(3, entry.encoding)
            .bytes(4, entry.versionstamp).finish(),
        );
      }
      out.bytes(1, rangeOut.finish());
    }
    return out.uint(4, 1).uint(8, SR_SUCCESS).finish();
  }

  write(body: Uint8Array): Uint8Array<ArrayBuffer> {
    this.served.writes++;
    const { checks, mutations, enqueues } = parseAtomicWrite(body);
    if (enqueues > 0) throw new Error("queues are not served by this test server");
    const failed: number[] = [];
    checks.forEach((c, i) => {
      const cur = this.#live(hex(c.key))?.versionstamp ?? new Uint8Array();
      if (!sameBytes(cur, c.versionstamp)) failed.push(i);
    });
    if (failed.length > 0) {
      const w = new Writer().uint(1, AW_CHECK_FAILURE);
      const packed = new Writer();
      for (const i of failed) packed.varint(i);
      return w.bytes(4, packed.finish()).finish();
    }
    // Validate every mutation before applying any: the write is all or nothing.
    const next = new Map<string, { key: Uint8Array; entry: Entry } | null>();
    const versionstamp = new Uint8Array(10);
    new DataView(versionstamp.buffer).setBigUint64(0, BigInt(++this.#version));
    for (const m of mutations) {
      const k = hex(m.key);
      const prior = next.has(k) ? next.get(k)?.entry : this.#live(k);
      if (m.type === M_DELETE) {
        next.set(k, null);
        continue;
      }
      let value = m.value;
      if (m.type === M_SUM || m.type === M_MAX || m.type === M_MIN) {
        if (m.encoding !== VE_LE64 || value.length !== 8) throw new Error("sum/min/max need LE64");
        if (prior) {
          if (prior.encoding !== VE_LE64) throw new Error("sum/min/max over a non-u64 value");
          const a = le64(prior.value), b = le64(value);
          const r = m.type === M_SUM
            ? (a + b) % (1n << 64n)
            : m.type === M_MAX
            ? (a > b ? a : b)
            : (a < b ? a : b);
          value = toLe64(r);
        }
      } else if (m.type !== M_SET) throw new Error(`mutation type ${m.type} is not served`);
      next.set(k, {
        key: m.key.slice(),
        entry: { value: value.slice(), encoding: m.encoding, versionstamp, expireAt: m.expireAt },
      });
    }
    for (const [k, v] of next) {
      if (v === null) this.#entries.delete(k);
      else this.#entries.set(k, v);
    }
    return new Writer().uint(1, AW_SUCCESS).bytes(2, versionstamp).finish();
  }
}

export interface KvConnectServer {
  url: string;
  token: string;
  store: KvConnectStore;
  close(): Promise<void>;
}

/**
 * The default access token. One fixed value on purpose: Deno's client reads it
 * from the process environment, which test modules running in parallel share,
 * so every test server in a process must accept the same one.
 */
export const TEST_KV_TOKEN = "kv-connect-test-token";

/** Starts the server on a loopback port; clients use `url` and `DENO_KV_ACCESS_TOKEN=token`. */
export function startKvConnectServer(
  opts: { token?: string; now?: () => number } = {},
): KvConnectServer {
  const token = opts.token ?? TEST_KV_TOKEN;
  const dataToken = crypto.randomUUID();
  const databaseId = crypto.randomUUID();
  const now = opts.now ?? Date.now;
  const store = new KvConnectStore(now);
  const text = (status: number, body: string) =>
    new Response(body, { status, headers: { "content-type": "text/plain" } });
  const proto = (b: Uint8Array<ArrayBuffer>) =>
    new Response(b, { headers: { "content-type": "application/x-protobuf" } });

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const path = new URL(req.url).pathname;
    if (req.method !== "POST") return text(405, "POST only");
    const auth = req.headers.get("authorization");
    if (path === "/") {
      if (auth !== `Bearer ${token}`) return text(401, "invalid access token");
      const body = await req.text();
      const versions: unknown = body === "" ? [1] : JSON.parse(body).supportedVersions;
      if (!Array.isArray(versions) || !versions.includes(2)) {
        return text(400, "this server speaks KV Connect version 2 only");
      }
      return Response.json({
        version: 2,
        databaseId,
        endpoints: [{ url: "/v2", consistency: "strong" }],
        token: dataToken,
        expiresAt: new Date(now() + 3_600_000).toISOString(),
      });
    }
    if (auth !== `Bearer ${dataToken}`) return text(401, "invalid data path token");
    if (req.headers.get("x-denokv-database-id") !== databaseId) {
      return text(400, "unknown database");
    }
    const body = new Uint8Array(await req.arrayBuffer());
    try {
      if (path === "/v2/snapshot_read") return proto(store.read(parseSnapshotRead(body)));
      if (path === "/v2/atomic_write") return proto(store.write(body));
    } catch (e) {
      return text(400, e instanceof Error ? e.message : String(e));
    }
    return text(404, "not served");
  });
  const addr = server.addr as Deno.NetAddr;
  return {
    url: `http://127.0.0.1:${addr.port}`,
    token,
    store,
    close: () => server.shutdown(),
  };
}
