import assert from "node:assert/strict";
import { createH1Client, type H1Connect } from "./h1_client.ts";
import {
  deferred,
  newClient,
  ok,
  rawServer,
  rejectsTypeError,
  trackedSignal,
  withServe,
} from "../../tests/support/h1_servers.ts";

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
