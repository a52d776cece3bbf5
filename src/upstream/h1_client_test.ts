import assert from "node:assert/strict";
import net from "node:net";
import {
  bodySourceOf,
  createH1Client,
  H1_READ_BUFFER_BYTES,
  H1_SSE_READ_BUFFER_BYTES,
  type H1Client,
  type H1ClientOptions,
  type H1Connect,
  type H1Target,
} from "./h1_client.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

// ---------------------------------------------------------------------------
// Helpers

/** A real loopback connector that counts connects and records targets. */
function tcpConnector(redirectPort?: number): { connect: H1Connect; targets: H1Target[] } {
  const targets: H1Target[] = [];
  return {
    targets,
    connect: (t) => {
      targets.push(t);
      return Deno.connect({ hostname: "127.0.0.1", port: redirectPort ?? t.port });
    },
  };
}

function newClient(
  extra: Partial<H1ClientOptions> = {},
  redirectPort?: number,
): { client: H1Client; targets: H1Target[] } {
  const { connect, targets } = tcpConnector(redirectPort);
  return { client: createH1Client({ connect, now: () => performance.now(), ...extra }), targets };
}

/** Runs `fn` with a Deno.serve server and a client, closing both whatever happens. */
async function withServe(
  handler: Deno.ServeHandler,
  fn: (base: string, client: H1Client, targets: H1Target[]) => Promise<void>,
  opts: Partial<H1ClientOptions> = {},
): Promise<void> {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, handler);
  const { client, targets } = newClient(opts);
  try {
    await fn(`http://127.0.0.1:${server.addr.port}`, client, targets);
  } finally {
    client.close();
    await server.shutdown();
  }
}

interface RawRequest {
  head: string;
  path: string;
  body: Uint8Array;
}

/** The server side of one raw TCP connection. */
class Peer {
  #buf = new Uint8Array(0);
  constructor(readonly conn: Deno.Conn) {}

  async #more(): Promise<boolean> {
    const chunk = new Uint8Array(64 * 1024);
    let n: number | null;
    try {
      n = await this.conn.read(chunk);
    } catch {
      return false;
    }
    if (n === null) return false;
    const next = new Uint8Array(this.#buf.length + n);
    next.set(this.#buf);
    next.set(chunk.subarray(0, n), this.#buf.length);
    this.#buf = next;
    return true;
  }

  /** The next request (head + content-length body), or null once the client closed. */
  async request(): Promise<RawRequest | null> {
    let end: number;
    while ((end = indexOfHeadEnd(this.#buf)) < 0) if (!(await this.#more())) return null;
    const head = dec.decode(this.#buf.subarray(0, end));
    const m = /\r\ncontent-length: *(\d+)/i.exec(head);
    const len = m ? Number(m[1]) : 0;
    while (this.#buf.length < end + len) if (!(await this.#more())) return null;
    const body = this.#buf.slice(end, end + len);
    this.#buf = this.#buf.slice(end + len);
    return { head, path: head.split(" ")[1], body };
  }

  async send(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === "string" ? enc.encode(data) : data;
    let off = 0;
    while (off < bytes.length) off += await this.conn.write(bytes.subarray(off));
  }

  /** Resolves when the client closes the connection (EOF or reset). */
  async closedByClient(): Promise<void> {
    while (await this.#more()) { /* drop */ }
  }
}

function indexOfHeadEnd(b: Uint8Array): number {
  for (let i = 3; i < b.length; i++) {
    if (b[i - 3] === 13 && b[i - 2] === 10 && b[i - 1] === 13 && b[i] === 10) return i + 1;
  }
  return -1;
}

interface RawServer {
  port: number;
  base: string;
  /** Connections accepted so far. */
  accepted(): number;
  close(): Promise<void>;
}

/** A raw TCP server; `handle` runs per connection, which is closed when it returns. */
function rawServer(handle: (p: Peer, index: number) => Promise<void>): RawServer {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  const tasks: Promise<void>[] = [];
  let accepted = 0;
  const loop = (async () => {
    while (true) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch {
        return;
      }
      const index = accepted++;
      conns.add(conn);
      tasks.push((async () => {
        try {
          await handle(new Peer(conn), index);
        } catch {
          /* the client went away */
        } finally {
          conns.delete(conn);
          try {
            conn.close();
          } catch { /* closed */ }
        }
      })());
    }
  })();
  const port = listener.addr.port;
  return {
    port,
    base: `http://127.0.0.1:${port}`,
    accepted: () => accepted,
    async close() {
      listener.close();
      await loop;
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await Promise.all(tasks);
    },
  };
}

/** Answers requests by path; the connection closes after a path listed in `closeAfter`. */
function scriptedServer(
  script: Record<string, string | Uint8Array>,
  closeAfter: string[] = [],
  seen: RawRequest[] = [],
): RawServer {
  return rawServer(async (p) => {
    for (let r = await p.request(); r !== null; r = await p.request()) {
      seen.push(r);
      await p.send(script[r.path] ?? "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
      if (closeAfter.includes(r.path)) return;
    }
  });
}

function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Fails instead of hanging: a pull-driven stream that waited for EOF would deadlock. */
async function within<T>(p: Promise<T>, what: string, ms = 2000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function until(cond: () => boolean, what: string, ms = 2000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`${what}: not reached within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function rejectsTypeError(p: Promise<unknown>, secret?: string): Promise<TypeError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof TypeError, `expected a TypeError, got ${e}`);
    if (secret) assert.ok(!String(e.message).includes(secret), `error leaks: ${e.message}`);
    return e;
  }
  assert.fail("expected a rejection");
}

/** An AbortSignal that tracks its registered listeners. */
function trackedSignal(): { ctl: AbortController; listeners: Set<unknown> } {
  const ctl = new AbortController();
  const listeners = new Set<unknown>();
  const s = ctl.signal;
  const add = s.addEventListener.bind(s);
  const remove = s.removeEventListener.bind(s);
  s.addEventListener = (
    type: string,
    l: EventListenerOrEventListenerObject,
    o?: boolean | AddEventListenerOptions,
  ) => {
    listeners.add(l);
    add(type, l, o);
  };
  s.removeEventListener = (
    type: string,
    l: EventListenerOrEventListenerObject,
    o?: boolean | EventListenerOptions,
  ) => {
    listeners.delete(l);
    remove(type, l, o);
  };
  return { ctl, listeners };
}

const ok = (body: string, extra = "") =>
  `HTTP/1.1 200 OK\r\ncontent-length: ${enc.encode(body).length}\r\n${extra}\r\n${body}`;

// ---------------------------------------------------------------------------
// Tests

Deno.test("GET and POST round trip over one kept-alive connection (Deno.serve)", async () => {
  await withServe(async (req) => {
    const body = new Uint8Array(await req.arrayBuffer());
    const u = new URL(req.url);
    return new Response(body, {
      status: req.method === "POST" ? 201 : 200,
      headers: {
        "x-method": req.method,
        "x-path": u.pathname + u.search,
        "x-auth": req.headers.get("authorization") ?? "",
        "x-accept-encoding": req.headers.get("accept-encoding") ?? "",
      },
    });
  }, async (base, client, targets) => {
    const { ctl, listeners } = trackedSignal();
    const get = await client.fetch(`${base}/v1/models?x=1`, { signal: ctl.signal });
    assert.equal(get.status, 200);
    assert.equal(get.statusText, "OK");
    assert.equal(get.headers.get("x-method"), "GET");
    assert.equal(get.headers.get("x-path"), "/v1/models?x=1");
    assert.equal(get.headers.get("x-accept-encoding"), "identity");
    assert.equal(await get.text(), "");

    const bytes = new Uint8Array(1000).map((_, i) => i & 0xff);
    const post = await client.fetch(`${base}/v1/chat`, {
      method: "post",
      headers: { authorization: "Bearer k", "content-type": "application/octet-stream" },
      body: bytes,
      signal: ctl.signal,
    });
    assert.equal(post.status, 201);
    assert.equal(post.statusText, "Created");
    assert.equal(post.headers.get("x-method"), "POST");
    assert.equal(post.headers.get("x-auth"), "Bearer k");
    assert.deepEqual(new Uint8Array(await post.arrayBuffer()), bytes);

    // A body above the single-write size goes out in two writes.
    const big = new Uint8Array(200_000).map((_, i) => (i * 7) & 0xff);
    const bigRes = await client.fetch(`${base}/big`, { method: "PUT", body: big });
    assert.deepEqual(new Uint8Array(await bigRes.arrayBuffer()), big);

    const text = await client.fetch(`${base}/t`, { method: "POST", body: "héllo" });
    assert.equal(await text.text(), "héllo");

    assert.equal(targets.length, 1, "all four requests share one connection");
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });
    assert.equal(listeners.size, 0, "abort listeners are removed when each exchange ends");
    client.close();
    assert.deepEqual(client.stats(), { open: 0, idle: 0 });
  });
});

Deno.test("request heads are exact on the wire", async () => {
  const seen: RawRequest[] = [];
  const server = scriptedServer({}, [], seen);
  const { client, targets } = newClient({}, server.port);
  try {
    const r1 = await client.fetch(`${server.base}/a/b?c=d#frag`, {
      headers: { "X-A": "1", authorization: "Bearer k" },
    });
    await r1.body?.cancel();
    await client.fetch(`${server.base}/p`, { method: "POST" });
    await client.fetch(`${server.base}/s`, {
      method: "POST",
      headers: [["accept-encoding", "IDENTITY"], ["content-length", "6"]],
      body: "héllo",
    });
    await client.fetch(`${server.base}/h`, { headers: new Headers({ host: "api.example" }) });
    await client.fetch("http://upstream.test/d", {});
    await client.fetch("https://upstream.test:8443/e", { method: "DELETE" });
    await client.fetch("http://[::1]:8080/f", {});
    const p = server.port;
    assert.deepEqual(seen.map((r) => r.head), [
      `GET /a/b?c=d HTTP/1.1\r\nhost: 127.0.0.1:${p}\r\nX-A: 1\r\nauthorization: Bearer k\r\n` +
      "accept-encoding: identity\r\n\r\n",
      `POST /p HTTP/1.1\r\nhost: 127.0.0.1:${p}\r\ncontent-length: 0\r\n` +
      "accept-encoding: identity\r\n\r\n",
      `POST /s HTTP/1.1\r\nhost: 127.0.0.1:${p}\r\naccept-encoding: IDENTITY\r\ncontent-length: 6\r\n\r\n`,
      "GET /h HTTP/1.1\r\nhost: api.example\r\naccept-encoding: identity\r\n\r\n",
      "GET /d HTTP/1.1\r\nhost: upstream.test\r\naccept-encoding: identity\r\n\r\n",
      "DELETE /e HTTP/1.1\r\nhost: upstream.test:8443\r\naccept-encoding: identity\r\n\r\n",
      "GET /f HTTP/1.1\r\nhost: [::1]:8080\r\naccept-encoding: identity\r\n\r\n",
    ]);
    assert.equal(dec.decode(seen[2].body), "héllo");
    assert.ok(seen.every((r) => !/transfer-encoding/i.test(r.head)));
    assert.deepEqual(targets.slice(1), [
      { hostname: "upstream.test", port: 80, tls: false },
      { hostname: "upstream.test", port: 8443, tls: true },
      { hostname: "::1", port: 8080, tls: false },
    ]);
    assert.equal(targets.length, 4, "one connect per origin");
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("bad URLs, methods and header injection are rejected before connecting", async () => {
  const { client, targets } = newClient({}, 9);
  try {
    const base = "http://127.0.0.1:9";
    const secret = "sk-secret-123";
    const bad: [string, Parameters<H1Client["fetch"]>[1]][] = [
      ["ftp://127.0.0.1/x", {}],
      ["file:///etc/passwd", {}],
      ["not a url", {}],
      ["http://user:pw@127.0.0.1:9/", {}],
      [base, { headers: { authorization: `Bearer ${secret}\r\nx-evil: 1` } }],
      [base, { headers: { "x-a": `${secret}\nx-evil: 1` } }],
      [base, { headers: [["x-a", `${secret}\0`]] }],
      [base, { headers: { "x-a\r\nx-evil": "1" } }],
      [base, { headers: { "bad name": "1" } }],
      [base, { headers: { "x-a": `${secret}\u0100` } }],
      [base, { headers: { "transfer-encoding": "chunked" } }],
      [base, { headers: { connection: "close" } }],
      [base, { method: "POST", headers: { "content-length": "5" }, body: "abc" }],
      [base, { method: "GET", body: "abc" }],
      [base, { method: "CONNECT" }],
      [base, { method: "GE T" }],
    ];
    for (const [url, init] of bad) await rejectsTypeError(client.fetch(url, init), secret);
    assert.equal(targets.length, 0);
    assert.deepEqual(client.stats(), { open: 0, idle: 0 });
  } finally {
    client.close();
  }
});

Deno.test("status text, repeated headers, interim 1xx, HEAD and 204 (raw server)", async () => {
  const server = scriptedServer({
    "/a": "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n" +
      "HTTP/1.1 202 Quite Accepted\r\nX-R: 1\r\nx-r:2\r\nset-cookie: a=1\r\n" +
      "set-cookie: b=2\r\ncontent-length: 2\r\n\r\nok",
    "/head": "HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n",
    "/204": "HTTP/1.1 204 No Content\r\n\r\n",
    "/304": "HTTP/1.1 304 Not Modified\r\ncontent-length: 10\r\n\r\n",
    "/205": "HTTP/1.1 205 Reset Content\r\ncontent-length: 0\r\n\r\n",
    // obs-text (a Latin-1 byte) is kept as that byte, as fetch does.
    "/latin": Uint8Array.from(
      "HTTP/1.1 200 OK\r\nx-latin: caf\xe9\r\ncontent-length: 0\r\n\r\n",
      (ch) => ch.charCodeAt(0),
    ),
  });
  const { client, targets } = newClient({}, server.port);
  try {
    const a = await client.fetch(`${server.base}/a`, {});
    assert.equal(a.status, 202);
    assert.equal(a.statusText, "Quite Accepted");
    assert.equal(a.headers.get("x-r"), "1, 2");
    assert.deepEqual(a.headers.getSetCookie(), ["a=1", "b=2"]);
    assert.equal(a.headers.get("link"), null, "interim headers are not merged");
    assert.equal(await a.text(), "ok");

    const head = await client.fetch(`${server.base}/head`, { method: "HEAD" });
    assert.equal(head.body, null);
    assert.equal(head.headers.get("content-length"), "1234");
    for (const s of [204, 304, 205]) {
      const r = await client.fetch(`${server.base}/${s}`, {});
      assert.equal(r.status, s);
      assert.equal(r.body, null);
    }
    const latin = await client.fetch(`${server.base}/latin`, {});
    assert.equal(latin.headers.get("x-latin"), "caf\u00e9");
    assert.equal(targets.length, 1);
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("chunked bodies: extensions, trailers, split writes; the connection is reused", async () => {
  const parts = [
    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5",
    ";ext=1\r\nhel",
    "lo\r",
    '\n6 ; a="b"\r\n world\r\nA\r\n',
    "0123456789\r\n0\r\nx-trailer: 1\r\n",
    "x-other: 2\r\n\r",
    "\n",
  ];
  const server = rawServer(async (p) => {
    for (let r = await p.request(); r !== null; r = await p.request()) {
      if (r.path === "/split") {
        for (const part of parts) {
          await p.send(part);
          await new Promise((res) => setTimeout(res, 2)); // separate reads on the client
        }
      } else {
        await p.send(
          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0000\r\n\r\n",
        );
      }
    }
  });
  const { client, targets } = newClient({}, server.port);
  try {
    const r = await client.fetch(`${server.base}/split`, {});
    assert.equal(await r.text(), "hello world0123456789");
    assert.equal(r.headers.get("x-trailer"), null);
    const r2 = await client.fetch(`${server.base}/one`, {});
    assert.equal(await r2.text(), "abc");
    assert.equal(targets.length, 1);
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("no reuse after connection: close, HTTP/1.0, EOF framing, TE+CL or a cancelled body", async () => {
  const server = scriptedServer({
    "/ka": ok("ka"),
    "/close": ok("c", "connection: close\r\n"),
    "/h10": "HTTP/1.0 200 OK\r\ncontent-length: 3\r\n\r\nh10",
    "/h10ka": "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 3\r\n\r\nh10",
    "/h10te": "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n" +
      "2\r\nte\r\n0\r\n\r\n",
    "/eof": "HTTP/1.1 200 OK\r\n\r\nuntil eof",
    "/tecl": "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n" +
      "2\r\nte\r\n0\r\n\r\n",
    // A body that stalls after its first bytes: a cancelled reader leaves it half-read.
    "/stall": "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nabc",
  }, ["/eof"]);
  const { client, targets } = newClient({}, server.port);
  const get = async (path: string) =>
    await (await client.fetch(`${server.base}${path}`, {})).text();
  try {
    const steps: [string, string, number][] = [
      // path, body, connects after the *next* request to /ka
      ["/close", "c", 2],
      ["/h10", "h10", 3],
      ["/h10ka", "h10", 3],
      ["/eof", "until eof", 4],
      ["/tecl", "te", 5],
      ["/h10te", "te", 6],
    ];
    assert.equal(await get("/ka"), "ka");
    for (const [path, body, connects] of steps) {
      assert.equal(await get(path), body, path);
      assert.equal(await get("/ka"), "ka");
      assert.equal(targets.length, connects, `after ${path}`);
    }
    const tecl = await client.fetch(`${server.base}/tecl`, {});
    assert.equal(tecl.headers.get("content-length"), null, "transfer-encoding wins");
    await tecl.text();

    const cancelled = await client.fetch(`${server.base}/stall`, {});
    const reader = cancelled.body!.getReader();
    await reader.read();
    await reader.cancel();
    assert.deepEqual(client.stats(), { open: 0, idle: 0 }, "a cancelled body closes at once");
    assert.equal(await get("/ka"), "ka");
    assert.equal(targets.length, 8);
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("a pooled connection the server closed is dropped; the next request reconnects", async () => {
  const server = rawServer(async (p) => {
    for (let r = await p.request(); r !== null; r = await p.request()) {
      await p.send(ok("x"));
      if (r.path === "/x") return;
      // Bytes nobody asked for, sent while the connection sits in the pool.
      await new Promise((res) => setTimeout(res, 10));
      await p.send(ok("unsolicited"));
    }
  });
  const { client, targets } = newClient({}, server.port);
  try {
    // The server closes after answering, without saying `connection: close`.
    assert.equal(await (await client.fetch(`${server.base}/x`, {})).text(), "x");
    await until(() => client.stats().idle === 0, "idle connection dropped");
    assert.deepEqual(client.stats(), { open: 0, idle: 0 });
    assert.equal(await (await client.fetch(`${server.base}/x`, {})).text(), "x");
    assert.equal(targets.length, 2);

    assert.equal(await (await client.fetch(`${server.base}/junk`, {})).text(), "x");
    await until(() => client.stats().open === 0, "connection with stray bytes dropped");
    assert.equal(await (await client.fetch(`${server.base}/x`, {})).text(), "x");
    assert.equal(targets.length, 4);
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("idle timeout and maxIdlePerOrigin bound the pool", async () => {
  let clock = 0;
  const server = scriptedServer({ "/x": ok("x") });
  const { client, targets } = newClient(
    { now: () => clock, idleTimeoutMs: 1000, maxIdlePerOrigin: 1 },
    server.port,
  );
  try {
    const get = async () => await (await client.fetch(`${server.base}/x`, {})).text();
    await get();
    clock += 1000;
    await get(); // exactly the timeout: still reused
    assert.equal(targets.length, 1);
    clock += 1001;
    await get();
    assert.equal(targets.length, 2, "a connection idle past the timeout is not reused");
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });

    const [a, b] = await Promise.all([
      client.fetch(`${server.base}/x`, {}),
      client.fetch(`${server.base}/x`, {}),
    ]);
    await a.text();
    await b.text();
    assert.equal(targets.length, 3);
    assert.deepEqual(client.stats(), { open: 1, idle: 1 }, "one idle connection per origin");
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("streaming is pull-driven: the first SSE event arrives before the server finishes", async () => {
  const firstSeen = deferred();
  const server = rawServer(async (p) => {
    await p.request();
    await p.send(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" +
        "transfer-encoding: chunked\r\n\r\n",
    );
    await p.send("d\r\ndata: first\n\n\r\n");
    await firstSeen.promise; // nothing more until the client has the first event
    await p.send("e\r\ndata: second\n\n\r\n0\r\n\r\n");
    await p.request();
  });
  const { client } = newClient({}, server.port);
  try {
    const res = await client.fetch(`${server.base}/sse`, { method: "POST", body: "{}" });
    const reader = res.body!.getReader();
    const first = await within(reader.read(), "first event");
    assert.equal(dec.decode(first.value), "data: first\n\n");
    firstSeen.resolve();
    const second = await within(reader.read(), "second event");
    assert.equal(dec.decode(second.value), "data: second\n\n");
    assert.equal((await reader.read()).done, true);
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });

    // Large bodies come in copies of at most one 4 KiB buffer.
    const body = "y".repeat(50_000);
    const big = scriptedServer({ "/big": ok(body) });
    const c2 = newClient({}, big.port).client;
    try {
      const r = await c2.fetch(`${big.base}/big`, {});
      let total = 0;
      for await (const chunk of r.body!) {
        assert.ok(chunk.length <= 4096, `chunk of ${chunk.length}`);
        total += chunk.length;
      }
      assert.equal(total, body.length);
    } finally {
      c2.close();
      await big.close();
    }
  } finally {
    firstSeen.resolve();
    client.close();
    await server.close();
  }
});

Deno.test("a body read through its source: bytes sent with the head, the end, reuse, abort", async () => {
  const aborted = deferred();
  const server = rawServer(async (p) => {
    await p.request();
    // The first event arrives in the same write as the head.
    await p.send(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" +
        "transfer-encoding: chunked\r\n\r\nd\r\ndata: first\n\n\r\n",
    );
    await p.send("e\r\ndata: second\n\n\r\n0\r\n\r\n");
    await p.request(); // the same connection serves the next request
    await p.send(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" +
        "transfer-encoding: chunked\r\n\r\n",
    );
    await aborted.promise; // then silence: the client aborts mid-body
  });
  const { client } = newClient({}, server.port);
  try {
    const res = await client.fetch(`${server.base}/sse`, { method: "POST", body: "{}" });
    assert.equal(bodySourceOf(new Response("x")), undefined, "only this client's bodies");
    const src = bodySourceOf(res)!;
    let text = "";
    for (let b = await src.read(); b !== null; b = await src.read()) text += dec.decode(b);
    assert.equal(text, "data: first\n\ndata: second\n\n");
    assert.equal(await src.read(), null, "stays ended");
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });

    const ctl = new AbortController();
    const res2 = await client.fetch(`${server.base}/sse`, {
      method: "POST",
      body: "{}",
      signal: ctl.signal,
    });
    const pending = bodySourceOf(res2)!.read();
    const reason = new Error("client left");
    ctl.abort(reason);
    await assert.rejects(within(pending, "aborted read"), (e) => e === reason);
    assert.deepEqual(client.stats(), { open: 0, idle: 0 }, "an aborted connection is closed");
  } finally {
    aborted.resolve();
    client.close();
    await server.close();
  }
});

Deno.test("an event stream is read through a 1 KiB buffer; the connection gets 4 KiB back after", async () => {
  const event = "data: " + "e".repeat(3000) + "\n\n";
  const body = "z".repeat(20_000);
  const firstSeen = deferred();
  const server = rawServer(async (p) => {
    await p.request();
    await p.send(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" +
        "d\r\ndata: first\n\n\r\n",
    );
    await firstSeen.promise; // the rest only once the stream (and its buffer) is set up
    await p.send(`${event.length.toString(16)}\r\n${event}\r\n0\r\n\r\n`);
    await p.request();
    await p.send(
      "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n" +
        `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    );
    await p.request();
  });
  const { client } = newClient({}, server.port);
  try {
    const read = async (path: string, onFirst?: () => void) => {
      const r = await client.fetch(`${server.base}${path}`, {});
      const sizes: number[] = [];
      let text = "";
      for await (const chunk of r.body!) {
        if (sizes.length === 0) onFirst?.();
        sizes.push(chunk.length);
        text += dec.decode(chunk);
      }
      return { sizes, text };
    };
    const sse = await read("/sse", () => firstSeen.resolve());
    assert.equal(sse.text, "data: first\n\n" + event);
    assert.ok(sse.sizes.every((n) => n <= H1_SSE_READ_BUFFER_BYTES), `sse chunks ${sse.sizes}`);
    const big = await read("/big");
    assert.equal(big.text, body);
    assert.ok(big.sizes.some((n) => n > H1_SSE_READ_BUFFER_BYTES), `later chunks ${big.sizes}`);
    assert.ok(big.sizes.every((n) => n <= H1_READ_BUFFER_BYTES));
    assert.deepEqual(client.stats(), { open: 1, idle: 1 }, "one connection served both");
  } finally {
    firstSeen.resolve();
    client.close();
    await server.close();
  }
});

Deno.test("coded answers are refused, never decoded; no coding may be asked for", async () => {
  // A gzip bomb: 1 MiB of zeros compresses to ~1 KiB; a decoder would inflate it.
  const bomb = new Uint8Array(
    await new Response(
      new Blob([new Uint8Array(1024 * 1024)]).stream().pipeThrough(new CompressionStream("gzip")),
    ).arrayBuffer(),
  );
  let served = 0;
  await withServe((req) => {
    served++;
    const coding = new URL(req.url).pathname.slice(1);
    return new Response(bomb, { headers: { "content-encoding": coding } });
  }, async (base, client) => {
    for (const coding of ["gzip", "x-gzip", "deflate", "br", "identity, gzip"]) {
      await assert.rejects(
        client.fetch(`${base}/${encodeURIComponent(coding)}`, {}),
        (e: Error) =>
          e instanceof TypeError && /content-encoding was not asked for/.test(e.message),
        coding,
      );
    }
    assert.equal(served, 5);
    assert.equal(client.stats().open, 0, "a refused answer's connection is closed");
    await assert.rejects(
      client.fetch(`${base}/gzip`, { headers: { "accept-encoding": "gzip" } }),
      /accept-encoding/,
    );
    assert.equal(served, 5, "refused before connecting");
  });
});

Deno.test("malformed responses reject with TypeErrors that quote no header values", async () => {
  const secret = "sk-leak-42";
  const headLevel: string[] = [
    "HTTP/1.1 20 OK\r\n\r\n",
    "HTTP/2.0 200 OK\r\n\r\n",
    "HTTP/1.1 200 OK\r\nbad header: x\r\n\r\n",
    `HTTP/1.1 200 OK\r\nx-a: ${secret}\x01\r\n\r\n`,
    `HTTP/1.1 200 OK\r\nx-a: 1\r\n ${secret}\r\n\r\n`,
    `HTTP/1.1 200 OK\nx-a: ${secret}\n\n`,
    "HTTP/1.1 200 OK\r\ncontent-length: 5, 6\r\n\r\nhello",
    "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
    "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n",
    "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n",
    "HTTP/1.1 600 Nope\r\ncontent-length: 0\r\n\r\n",
    "HTTP/1.1 200 OK\r\ncontent-encoding: br\r\ncontent-length: 0\r\n\r\n",
    "",
  ];
  const chunked = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
  const bodyLevel: string[] = [
    `${chunked}zz\r\n${secret}\r\n0\r\n\r\n`,
    `${chunked}+5\r\nhello\r\n0\r\n\r\n`,
    `${chunked}5\r\nhelloXX0\r\n\r\n`,
    `${chunked}5\nhello\r\n0\r\n\r\n`,
    `${chunked}5 x\r\nhello\r\n0\r\n\r\n`,
    `${chunked}fffffffffffffffff\r\n`,
    `${chunked}1;${"a".repeat(5000)}\r\nx\r\n0\r\n\r\n`,
    `${chunked}5\r\nhel`,
    "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello",
  ];
  const all = [...headLevel, ...bodyLevel];
  const server = rawServer(async (p) => {
    const r = await p.request();
    if (r) await p.send(all[Number(r.path.slice(1))]);
  });
  const { client } = newClient({}, server.port);
  try {
    for (let i = 0; i < all.length; i++) {
      const url = `${server.base}/${i}`;
      if (i < headLevel.length) {
        await rejectsTypeError(client.fetch(url, {}), secret);
      } else {
        const res = await client.fetch(url, {});
        await rejectsTypeError(res.text(), secret);
      }
      assert.deepEqual(client.stats(), { open: 0, idle: 0 }, `case ${i}`);
    }
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("response heads: large ones span reads, oversized ones are refused", async () => {
  const long = "v".repeat(10_000);
  const server = scriptedServer({
    "/long": ok("l", `x-long: ${long}\r\n`),
    "/over": ok("o", `x-over: ${"w".repeat(2000)}\r\n`),
    "/fits": ok("f", `x-fits: ${"w".repeat(900)}\r\n`),
  });
  const { client } = newClient({}, server.port);
  const small = newClient({ maxHeaderBytes: 1024 }, server.port).client;
  try {
    const r = await client.fetch(`${server.base}/long`, {});
    assert.equal(r.headers.get("x-long"), long);
    assert.equal(await r.text(), "l");
    assert.equal(await (await small.fetch(`${server.base}/fits`, {})).text(), "f");
    const e = await rejectsTypeError(small.fetch(`${server.base}/over`, {}));
    assert.match(e.message, /response head too large/);
  } finally {
    client.close();
    small.close();
    await server.close();
  }
});

Deno.test("abort before sending, while waiting for the head, and mid-body", async () => {
  const requested = deferred();
  const closed = [deferred(), deferred()];
  const server = rawServer(async (p, index) => {
    const r = await p.request();
    if (r?.path === "/body") {
      await p.send("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n");
    } else {
      requested.resolve();
    }
    await p.closedByClient();
    closed[index]?.resolve();
  });
  const { client, targets } = newClient({}, server.port);
  try {
    const before = new AbortController();
    const reason0 = new Error("before");
    before.abort(reason0);
    await assert.rejects(
      client.fetch(`${server.base}/x`, { signal: before.signal }),
      (e) => e === reason0,
    );
    assert.equal(targets.length, 0);

    const { ctl: head, listeners } = trackedSignal();
    const pending = client.fetch(`${server.base}/head`, { signal: head.signal });
    await within(requested.promise, "request received");
    const reason1 = new Error("during head");
    head.abort(reason1);
    await assert.rejects(within(pending, "abort during head"), (e) => e === reason1);
    await within(closed[0].promise, "server sees the close");
    assert.equal(listeners.size, 0);

    const mid = new AbortController();
    const res = await client.fetch(`${server.base}/body`, { signal: mid.signal });
    const reader = res.body!.getReader();
    assert.equal(dec.decode((await reader.read()).value), "first");
    const next = reader.read();
    const reason2 = new Error("mid body");
    mid.abort(reason2);
    await assert.rejects(within(next, "abort mid-body"), (e) => e === reason2);
    await within(closed[1].promise, "server sees the close");
    assert.deepEqual(client.stats(), { open: 0, idle: 0 });
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("abort during connect: rejects at once, and a socket that opens late is closed", async () => {
  const closedBy = deferred();
  const server = rawServer(async (p) => {
    await p.closedByClient();
    closedBy.resolve();
  });
  const gate = deferred();
  let connects = 0;
  const client = createH1Client({
    connect: async (t) => {
      connects++;
      await gate.promise;
      return await Deno.connect({ hostname: t.hostname, port: t.port });
    },
    now: () => 0,
  });
  try {
    const ctl = new AbortController();
    const pending = client.fetch(`${server.base}/x`, { signal: ctl.signal });
    const reason = new Error("during connect");
    ctl.abort(reason);
    await assert.rejects(within(pending, "abort during connect"), (e) => e === reason);
    assert.equal(connects, 1);
    gate.resolve();
    await within(closedBy.promise, "late socket closed");
    assert.deepEqual(client.stats(), { open: 0, idle: 0 });
  } finally {
    gate.resolve();
    client.close();
    await server.close();
  }
});

Deno.test("a reset mid-body errors the body stream", async () => {
  // Deno's own sockets close gracefully (FIN); node:net can send a real RST.
  const gotHead = deferred();
  const server = net.createServer((s) => {
    s.on("error", () => {});
    s.write("HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\npartial");
    gotHead.promise.then(() => s.resetAndDestroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  const { client } = newClient({}, port);
  try {
    const res = await client.fetch(`http://127.0.0.1:${port}/r`, {});
    const reader = res.body!.getReader();
    assert.equal(dec.decode((await reader.read()).value), "partial");
    gotHead.resolve();
    const e = await rejectsTypeError(reader.read());
    assert.match(e.message, /read failed/);
    assert.ok(e.cause instanceof Deno.errors.ConnectionReset);
    assert.deepEqual(client.stats(), { open: 0, idle: 0 });
  } finally {
    gotHead.resolve();
    client.close();
    await new Promise((r) => server.close(r));
  }
});

Deno.test("close(): idle sockets close, later fetches reject, in-flight ones finish then close", async () => {
  const release = deferred();
  const server = rawServer(async (p) => {
    for (let r = await p.request(); r !== null; r = await p.request()) {
      if (r.path === "/slow") {
        await p.send("HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nsl");
        await release.promise;
        await p.send("ow");
      } else {
        await p.send(ok("q"));
      }
    }
  });
  const { client } = newClient({}, server.port);
  try {
    const slow = await client.fetch(`${server.base}/slow`, {});
    assert.equal(await (await client.fetch(`${server.base}/q`, {})).text(), "q");
    assert.deepEqual(client.stats(), { open: 2, idle: 1 });
    client.close();
    assert.deepEqual(client.stats(), { open: 1, idle: 0 });
    await rejectsTypeError(client.fetch(`${server.base}/q`, {}));
    release.resolve();
    assert.equal(await slow.text(), "slow");
    assert.deepEqual(client.stats(), { open: 0, idle: 0 });
  } finally {
    release.resolve();
    client.close();
    await server.close();
  }
});

Deno.test("options are validated", () => {
  const connect: H1Connect = () => Promise.reject(new Error("unused"));
  const now = () => 0;
  for (
    const bad of [
      { maxIdlePerOrigin: -1 },
      { maxIdlePerOrigin: 1.5 },
      { idleTimeoutMs: NaN },
      { idleTimeoutMs: -1 },
      { maxHeaderBytes: 0 },
    ]
  ) {
    assert.throws(() => createH1Client({ connect, now, ...bad }), RangeError);
  }
});

Deno.test("connect failures are TypeErrors", async () => {
  const client = createH1Client({
    connect: () => Promise.reject(new Deno.errors.ConnectionRefused("refused")),
    now: () => 0,
  });
  try {
    const e = await rejectsTypeError(client.fetch("http://127.0.0.1:1/", {}));
    assert.match(e.message, /connect failed/);
  } finally {
    client.close();
  }
});

async function selfSignedCert(): Promise<{ cert: string; key: string } | null> {
  let dir: string | null = null;
  try {
    dir = await Deno.makeTempDir();
    await Deno.writeTextFile(
      `${dir}/openssl.cnf`,
      "[req]\ndistinguished_name=dn\nx509_extensions=ext\nprompt=no\n[dn]\nCN=localhost\n" +
        "[ext]\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n" +
        "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n",
    );
    const out = await new Deno.Command("openssl", {
      args: [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-config",
        `${dir}/openssl.cnf`,
        "-keyout",
        `${dir}/key.pem`,
        "-out",
        `${dir}/cert.pem`,
      ],
      stdout: "null",
      stderr: "null",
    }).output();
    if (!out.success) return null;
    return {
      cert: await Deno.readTextFile(`${dir}/cert.pem`),
      key: await Deno.readTextFile(`${dir}/key.pem`),
    };
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null; // no openssl
    throw e;
  } finally {
    if (dir) await Deno.remove(dir, { recursive: true });
  }
}

const tlsCert = await selfSignedCert();

Deno.test({
  name: "HTTPS through Deno.connectTls with a test CA",
  async fn() {
    const { cert, key } = tlsCert!;
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, cert, key, onListen() {} },
      async (req) => new Response(`tls:${req.method}:${await req.text()}`),
    );
    let connects = 0;
    const client = createH1Client({
      connect: (t) => {
        connects++;
        return Deno.connectTls({ hostname: t.hostname, port: t.port, caCerts: [cert] });
      },
      now: () => performance.now(),
    });
    try {
      const base = `https://127.0.0.1:${server.addr.port}`;
      assert.equal(await (await client.fetch(`${base}/a`, {})).text(), "tls:GET:");
      const post = await client.fetch(`${base}/b`, { method: "POST", body: "secret" });
      assert.equal(await post.text(), "tls:POST:secret");
      assert.equal(connects, 1);
      assert.deepEqual(client.stats(), { open: 1, idle: 1 });
    } finally {
      client.close();
      await server.shutdown();
    }
  },
});

Deno.test("connections are reused only within a partition (one API key's requests)", async () => {
  const ports: number[] = [];
  await withServe((_req, info) => {
    ports.push((info.remoteAddr as Deno.NetAddr).port);
    return new Response("ok");
  }, async (base, client) => {
    for (const partition of ["a", "b", "a", "b", undefined, undefined]) {
      const res = await client.fetch(`${base}/x`, { method: "POST", body: "x", partition });
      assert.equal(await res.text(), "ok");
    }
    assert.equal(new Set(ports).size, 3);
    assert.equal(ports[0], ports[2], "partition a reuses its own connection");
    assert.equal(ports[1], ports[3], "partition b reuses its own connection");
    assert.notEqual(ports[0], ports[1]);
    assert.equal(ports[4], ports[5]);
    assert.ok(ports[4] !== ports[0] && ports[4] !== ports[1]);
    assert.deepEqual(client.stats(), { open: 3, idle: 3 });
  });
});
