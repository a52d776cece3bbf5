import assert from "node:assert/strict";
import { createH1Client } from "./h1_client.ts";
import {
  dec,
  deferred,
  newClient,
  rawServer,
  rejectsTypeError,
  trackedSignal,
  within,
} from "../../tests/support/h1_servers.ts";

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
