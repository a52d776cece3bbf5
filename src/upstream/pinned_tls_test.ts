import assert from "node:assert/strict";
import tls from "node:tls";
import {
  isPinMismatch,
  PinMismatchError,
  pinnedTlsConnector,
  type PinnedTlsOptions,
} from "./pinned_tls.ts";
import { createH1Client } from "./h1_client.ts";
import { GatewayError } from "../http/errors.ts";
import {
  type CountingTlsServer,
  issueServerCert,
  makeTestCa,
  startCountingTlsServer,
  type TestRequest,
  type TestResponse,
} from "../../tests/support/tls_servers.ts";

const ca = await makeTestCa();
const good = await issueServerCert(ca);
const other = await issueServerCert(ca); // same CA, different key
const rogueCa = await makeTestCa({ commonName: "Rogue CA" });
const rogue = await issueServerCert(rogueCa);
const localhostOnly = await issueServerCert(ca, { hosts: ["localhost"] });

const dec = new TextDecoder();

type PinnedFetch = ((url: string | URL, init?: RequestInit) => Promise<Response>) & {
  close(): void;
};

/**
 * The gateway's pinned path as a fetch: the one HTTP/1.1 client over the pinned
 * connector (transport.ts wires the same two), pooled unless `keepAlive: false`.
 */
function createPinnedFetch(opts: PinnedTlsOptions & { keepAlive?: boolean }): PinnedFetch {
  const client = createH1Client({
    connect: pinnedTlsConnector(tls.connect, opts),
    now: () => performance.now(),
    maxIdlePerOrigin: opts.keepAlive === false ? 0 : undefined,
  });
  const f = (url: string | URL, init: RequestInit = {}) => {
    const body = init.body;
    if (body != null && !(body instanceof Uint8Array) && typeof body !== "string") {
      return Promise.reject(new TypeError("pinned fetch bodies must be bytes or text"));
    }
    if (!String(url).startsWith("https:")) {
      return Promise.reject(new TypeError("pinned fetch only accepts https: URLs"));
    }
    return client.fetch(String(url), {
      method: init.method,
      headers: init.headers,
      body,
      signal: init.signal ?? undefined,
    });
  };
  return Object.assign(f, { close: () => client.close() });
}

function echo(req: TestRequest): TestResponse {
  return {
    status: 201,
    headers: {
      "x-echo-method": req.method,
      "x-echo-path": req.path,
      "x-conn": `${req.connection}`,
    },
    body: `${req.headers.get("x-test") ?? ""}|${dec.decode(req.body)}`,
  };
}

/** Runs `fn` with a server and a pinned fetch, closing both whatever happens. */
async function withServer(
  cert: { certPem: string; keyPem: string },
  respond: ((req: TestRequest) => TestResponse | Promise<TestResponse>) | undefined,
  pinOpts: Parameters<typeof createPinnedFetch>[0],
  fn: (server: CountingTlsServer, pf: PinnedFetch, base: string) => Promise<void>,
): Promise<void> {
  const server = startCountingTlsServer({ ...cert, respond });
  const pf = createPinnedFetch(pinOpts);
  try {
    await fn(server, pf, `https://127.0.0.1:${server.port}`);
  } finally {
    pf.close();
    await server.close();
  }
}

/** Lets the server read anything that may be in flight before we look at its counter. */
const settle = () => new Promise((r) => setTimeout(r, 100));

function gate(): { wait: Promise<void>; open: () => void } {
  let open: () => void = () => {};
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

Deno.test("pinned request to the right key succeeds; body, headers and method are sent", async () => {
  await withServer(
    good,
    echo,
    { spkiSha256: good.spkiSha256, ca: ca.certPem },
    async (s, pf, base) => {
      const res = await pf(`${base}/v1/x?y=1`, {
        method: "post",
        headers: { "x-test": "h" },
        body: "hello",
      });
      assert.equal(res.status, 201);
      assert.equal(res.headers.get("x-echo-method"), "POST");
      assert.equal(res.headers.get("x-echo-path"), "/v1/x?y=1");
      assert.equal(await res.text(), "h|hello");

      const bytes = await pf(new URL(`${base}/b`), {
        method: "PUT",
        body: new Uint8Array([0x61, 0x62, 0x63]),
      });
      assert.equal(await bytes.text(), "|abc");
      assert.equal(s.requests(), 2);
      assert.ok(s.bytesReceived() > 0);
    },
  );
});

Deno.test("pin comparison accepts an uppercase pin", async () => {
  const pin = good.spkiSha256.toUpperCase();
  await withServer(good, echo, { spkiSha256: pin, ca: ca.certPem }, async (_s, pf, base) => {
    assert.equal(await (await pf(`${base}/`)).text(), "|");
  });
});

Deno.test("wrong key under the same CA: PinMismatchError and the server saw zero bytes", async () => {
  const seen: string[] = [];
  const opts = {
    spkiSha256: good.spkiSha256,
    ca: ca.certPem,
    onMismatch: (o: string) => seen.push(o),
  };
  await withServer(other, echo, opts, async (s, pf, base) => {
    const err = await pf(`${base}/secret`, { method: "POST", body: "prompt" }).then(
      () => assert.fail("must reject"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof PinMismatchError);
    assert.ok(isPinMismatch(new TypeError("wrapped", { cause: err })));
    assert.ok(err instanceof GatewayError);
    assert.equal(err.kind, "upstream_verification_failed");
    assert.equal(err.expected, good.spkiSha256);
    assert.equal(err.observed, other.spkiSha256);
    assert.match(err.message, new RegExp(`${good.spkiSha256}.*${other.spkiSha256}`));
    assert.doesNotMatch(err.message, /prompt|secret/);
    assert.deepEqual(seen, [other.spkiSha256]);
    await settle();
    assert.equal(s.connections(), 1, "the TLS handshake did happen");
    assert.equal(s.bytesReceived(), 0);
    assert.equal(s.requests(), 0);
  });
});

Deno.test("control: the same server pinned correctly does receive bytes (counter works)", async () => {
  await withServer(
    other,
    echo,
    { spkiSha256: other.spkiSha256, ca: ca.certPem },
    async (s, pf, base) => {
      assert.equal(await (await pf(`${base}/`, { method: "POST", body: "x" })).text(), "|x");
      assert.ok(s.bytesReceived() > 0);
    },
  );
});

Deno.test("a certificate outside the CA fails even with a matching pin", async () => {
  let mismatches = 0;
  const opts = { spkiSha256: rogue.spkiSha256, ca: ca.certPem, onMismatch: () => mismatches++ };
  await withServer(rogue, echo, opts, async (s, pf, base) => {
    const err = await pf(`${base}/`, { method: "POST", body: "x" }).then(
      () => assert.fail("must reject"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof GatewayError);
    assert.ok(!(err instanceof PinMismatchError));
    assert.equal(err.kind, "upstream_verification_failed");
    assert.match(err.message, /certificate verification failed/);
    assert.equal(mismatches, 0);
    await settle();
    assert.equal(s.bytesReceived(), 0);
  });
});

Deno.test("without `ca` the runtime roots apply, so a test-CA server is refused", async () => {
  await withServer(good, echo, { spkiSha256: good.spkiSha256 }, async (s, pf, base) => {
    await assert.rejects(
      pf(`${base}/`),
      (e: unknown) => e instanceof GatewayError && e.kind === "upstream_verification_failed",
    );
    await settle();
    assert.equal(s.bytesReceived(), 0);
  });
});

Deno.test("hostname verification stays on; servername selects the name to verify", async () => {
  const pin = localhostOnly.spkiSha256;
  await withServer(
    localhostOnly,
    echo,
    { spkiSha256: pin, ca: ca.certPem },
    async (s, pf, base) => {
      // The certificate names only "localhost", not 127.0.0.1.
      await assert.rejects(
        pf(`${base}/`),
        (e: unknown) => e instanceof GatewayError && e.kind === "upstream_verification_failed",
      );
      await settle();
      assert.equal(s.bytesReceived(), 0);
    },
  );
  const opts = { spkiSha256: pin, ca: ca.certPem, servername: "localhost" };
  await withServer(localhostOnly, echo, opts, async (_s, pf, base) => {
    assert.equal((await pf(`${base}/`)).status, 201);
  });
});

Deno.test("non-https URLs are refused without connecting", async () => {
  await withServer(good, echo, { spkiSha256: good.spkiSha256, ca: ca.certPem }, async (s, pf) => {
    await assert.rejects(pf(`http://127.0.0.1:${s.port}/`), TypeError);
    await assert.rejects(pf(`ftp://127.0.0.1:${s.port}/`), TypeError);
    await settle();
    assert.equal(s.connections(), 0);
  });
});

Deno.test("unsupported bodies and GET bodies are refused", async () => {
  await withServer(
    good,
    echo,
    { spkiSha256: good.spkiSha256, ca: ca.certPem },
    async (s, pf, base) => {
      await assert.rejects(pf(`${base}/`, { method: "GET", body: "x" }), TypeError);
      await assert.rejects(pf(`${base}/`, { method: "POST", body: new Blob(["x"]) }), TypeError);
      assert.equal(s.connections(), 0);
    },
  );
});

Deno.test("malformed pins and timeouts are rejected at construction", () => {
  assert.throws(() => createPinnedFetch({ spkiSha256: "abc" }), TypeError);
  assert.throws(() => createPinnedFetch({ spkiSha256: "g".repeat(64) }), TypeError);
  assert.throws(
    () => createPinnedFetch({ spkiSha256: good.spkiSha256, connectTimeoutMs: 0 }),
    TypeError,
  );
});

Deno.test("a chunked body streams incrementally", async () => {
  const last = gate();
  let lastSent = false;
  const respond = (): TestResponse => ({
    body: (async function* () {
      yield "first;";
      await last.wait;
      lastSent = true;
      yield "last";
    })(),
  });
  await withServer(
    good,
    respond,
    { spkiSha256: good.spkiSha256, ca: ca.certPem },
    async (_s, pf, base) => {
      const res = await pf(`${base}/stream`);
      assert.ok(res.body);
      const reader = res.body.getReader();
      const first = await reader.read();
      assert.equal(dec.decode(first.value), "first;");
      assert.equal(lastSent, false, "first chunk arrived before the server sent the last");
      last.open();
      let rest = "";
      for (let r = await reader.read(); !r.done; r = await reader.read()) {
        rest += dec.decode(
          r.value,
        );
      }
      assert.equal(rest, "last");
      assert.equal(lastSent, true);
    },
  );
});

Deno.test("abort before the response rejects with the signal's reason", async () => {
  const headers = gate();
  const respond = async (): Promise<TestResponse> => {
    await headers.wait;
    return { body: "late" };
  };
  await withServer(
    good,
    respond,
    { spkiSha256: good.spkiSha256, ca: ca.certPem },
    async (s, pf, base) => {
      const ac = new AbortController();
      const p = pf(`${base}/`, { signal: ac.signal });
      while (s.requests() === 0) await new Promise((r) => setTimeout(r, 5));
      ac.abort();
      await assert.rejects(p, (e: unknown) => e instanceof DOMException && e.name === "AbortError");
      headers.open();
    },
  );
});

Deno.test("abort mid-body errors the stream; an aborted signal never connects", async () => {
  const respond = (): TestResponse => ({
    body: (async function* () {
      yield "one;";
      await new Promise(() => {}); // never finishes; server close() unblocks it
    })(),
  });
  await withServer(
    good,
    respond,
    { spkiSha256: good.spkiSha256, ca: ca.certPem },
    async (s, pf, base) => {
      const ac = new AbortController();
      const res = await pf(`${base}/`, { signal: ac.signal });
      const reader = res.body!.getReader();
      assert.equal(dec.decode((await reader.read()).value), "one;");
      ac.abort(new Error("caller gave up"));
      await assert.rejects(reader.read(), /caller gave up/);

      const before = s.connections();
      await assert.rejects(pf(`${base}/`, { signal: AbortSignal.abort() }), DOMException);
      assert.equal(s.connections(), before);
    },
  );
});

Deno.test("cancelling the body stream tears the request down", async () => {
  const respond = (): TestResponse => ({
    body: (async function* () {
      yield "one;";
      await new Promise(() => {});
    })(),
  });
  await withServer(
    good,
    respond,
    { spkiSha256: good.spkiSha256, ca: ca.certPem },
    async (_s, pf, base) => {
      const res = await pf(`${base}/`);
      const reader = res.body!.getReader();
      assert.equal(dec.decode((await reader.read()).value), "one;");
      await reader.cancel();
    },
  );
});

Deno.test("an upstream that dies mid-body errors the stream", async () => {
  const respond = (): TestResponse => ({
    body: (async function* () {
      yield "one;";
      throw new Error("server crash");
    })(),
  });
  await withServer(
    good,
    respond,
    { spkiSha256: good.spkiSha256, ca: ca.certPem },
    async (_s, pf, base) => {
      const res = await pf(`${base}/`);
      await assert.rejects(res.text(), TypeError);
    },
  );
});

Deno.test("204 and HEAD responses have a null body", async () => {
  const respond = (req: TestRequest): TestResponse =>
    req.path === "/empty" ? { status: 204 } : { headers: { "x-k": "v" } };
  await withServer(
    good,
    respond,
    { spkiSha256: good.spkiSha256, ca: ca.certPem },
    async (_s, pf, base) => {
      const empty = await pf(`${base}/empty`, { method: "DELETE" });
      assert.equal(empty.status, 204);
      assert.equal(empty.body, null);
      const head = await pf(`${base}/h`, { method: "HEAD" });
      assert.equal(head.body, null);
      assert.equal(head.headers.get("x-k"), "v");
    },
  );
});

Deno.test("keep-alive reuses only pin-checked connections", async () => {
  const opts = { spkiSha256: good.spkiSha256, ca: ca.certPem };
  await withServer(good, echo, opts, async (s, pf, base) => {
    const a = await pf(`${base}/1`);
    assert.equal(await a.text(), "|");
    const b = await pf(`${base}/2`);
    await b.text();
    assert.equal(s.connections(), 1);
    assert.equal(b.headers.get("x-conn"), "1");

    // The same fetch, pointed at an impostor, still checks the new connection.
    const impostor = startCountingTlsServer({ ...other, respond: echo });
    try {
      await assert.rejects(pf(`https://127.0.0.1:${impostor.port}/`), PinMismatchError);
      await settle();
      assert.equal(impostor.bytesReceived(), 0);
    } finally {
      await impostor.close();
    }
    // And the pinned server's pooled connection is still the one in use.
    const c = await pf(`${base}/3`);
    await c.text();
    assert.equal(c.headers.get("x-conn"), "1");
    assert.equal(s.requests(), 3);
  });
});

Deno.test("a port taken over by another key after reuse is refused", async () => {
  const first = startCountingTlsServer({ ...good, respond: echo });
  const port = first.port;
  const pf = createPinnedFetch({ spkiSha256: good.spkiSha256, ca: ca.certPem });
  try {
    await (await pf(`https://127.0.0.1:${port}/`)).text();
    await first.close(); // the pooled connection dies with it
    await settle();
    const second = startCountingTlsServer({ ...other, hostname: "127.0.0.1", respond: echo, port });
    try {
      await assert.rejects(pf(`https://127.0.0.1:${port}/`), PinMismatchError);
      await settle();
      assert.equal(second.bytesReceived(), 0);
    } finally {
      await second.close();
    }
  } finally {
    pf.close();
  }
});

Deno.test("keepAlive:false opens a checked connection per request", async () => {
  const opts = { spkiSha256: good.spkiSha256, ca: ca.certPem, keepAlive: false };
  await withServer(good, echo, opts, async (s, pf, base) => {
    await (await pf(`${base}/1`)).text();
    await (await pf(`${base}/2`)).text();
    assert.equal(s.connections(), 2);
  });
});

Deno.test("a stalled TLS handshake times out as upstream_timeout", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  const accepted = listener.accept();
  const pf = createPinnedFetch({
    spkiSha256: good.spkiSha256,
    ca: ca.certPem,
    connectTimeoutMs: 100,
  });
  try {
    await assert.rejects(
      pf(`https://127.0.0.1:${port}/`),
      (e: unknown) => e instanceof GatewayError && e.kind === "upstream_timeout",
    );
  } finally {
    pf.close();
    (await accepted).close();
    listener.close();
  }
});

Deno.test("connection refused is an upstream_error", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const pf = createPinnedFetch({ spkiSha256: good.spkiSha256, ca: ca.certPem });
  try {
    await assert.rejects(
      pf(`https://127.0.0.1:${port}/`),
      (e: unknown) => e instanceof GatewayError && e.kind === "upstream_error",
    );
  } finally {
    pf.close();
  }
});

Deno.test("abort during the TLS handshake rejects at once; close() cleans up", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  const accepted = listener.accept();
  const pf = createPinnedFetch({
    spkiSha256: good.spkiSha256,
    ca: ca.certPem,
    connectTimeoutMs: 5_000,
  });
  try {
    const ac = new AbortController();
    const p = pf(`https://127.0.0.1:${port}/`, { signal: ac.signal });
    const conn = await accepted;
    ac.abort();
    await assert.rejects(p, (e: unknown) => e instanceof DOMException && e.name === "AbortError");
    // The handshake is still pending (the peer never answers): close() must end it and its timer.
    pf.close();
    const eof = (async () => {
      const buf = new Uint8Array(4096);
      try {
        while ((await conn.read(buf)) !== null);
      } catch {
        // reset by the client: also an end
      }
      return "eof";
    })();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise((r) => (timer = setTimeout(() => r("still open"), 1_000)));
    assert.equal(await Promise.race([eof, late]), "eof");
    clearTimeout(timer);
    conn.close();
  } finally {
    pf.close();
    listener.close();
  }
});
