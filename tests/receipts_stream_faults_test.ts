/**
 * Streams that do not end normally still get a finalized, signed receipt: a
 * client that disconnects mid-stream (the receipt hashes what was written and
 * says the client cut the stream), and an upstream reset mid-stream (the
 * client gets an in-band error event, and the receipt says the upstream failed).
 */
import { concatBytes } from "../src/aci/bytes.ts";
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { plainRoutesOnly } from "./support/route_config.ts";
import {
  events,
  eventTypes,
  fetchReport,
  independentFailures,
  keysetOf,
  onlyEvent,
  postRaw,
  sha256Prefixed,
  sseJson,
  text,
  waitForReceipt,
} from "./support/receipt_check.ts";
import { verifyReceipt } from "../src/verify/receipt.ts";

const LONG_PROMPT = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");

Deno.test("client disconnect mid-stream: receipt finalized over the bytes written, with a client-disconnect event", async () => {
  const gw = await startTestGateway({ configure: plainRoutesOnly });
  try {
    const { report } = await fetchReport(gw.url);
    // Each upstream chunk waits 600 ms: after the first one the gateway has nothing more to write.
    gw.plain.setFault({ kind: "token_delay", ms: 600 });
    const request = new TextEncoder().encode(JSON.stringify({
      model: "demo/echo",
      stream: true,
      messages: [{ role: "user", content: LONG_PROMPT }],
    }));
    const ctl = new AbortController();
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
      body: request,
      signal: ctl.signal,
    });
    assert.equal(res.status, 200);
    // The receipt id is sent with the headers, before any token.
    const id = res.headers.get("x-receipt-id");
    assert.match(id ?? "", /^rcpt-[0-9a-f]{32}$/);
    const reader = res.body!.getReader();
    const parts: Uint8Array[] = [];
    const first = await reader.read();
    assert.ok(!first.done && first.value);
    parts.push(first.value);
    // Drain whatever else is already in flight (well inside the 600 ms gap), then hang up.
    while (true) {
      const next = await Promise.race([
        reader.read(),
        new Promise<null>((r) => setTimeout(() => r(null), 150)),
      ]);
      if (next === null || next.done) break;
      parts.push(next.value);
    }
    ctl.abort();
    await reader.cancel().catch(() => {});
    const got = concatBytes(parts);
    assert.ok(!text(got).includes("[DONE]"), "the client left before the end");

    const receipt = await waitForReceipt(gw.url, id!, gw.apiKey);
    assert.ok(
      eventTypes(receipt).includes("stream.client_disconnected"),
      eventTypes(receipt).join(),
    );
    assert.ok(!eventTypes(receipt).includes("stream.upstream_failed"));
    // Provable: the receipt hashes exactly what the gateway wrote; with the
    // upstream paused for 600 ms after its first chunk, that is what the client read.
    assert.equal(onlyEvent(receipt, "response.returned").body_hash, sha256Prefixed(got));
    const bodies = { request, response: got };
    assert.deepEqual(
      verifyReceipt(receipt, { report, requestBody: request, responseBody: got }).filter((c) =>
        !c.ok
      ),
      [],
    );
    assert.deepEqual(independentFailures(receipt, keysetOf(report), bodies), []);
    const types = eventTypes(receipt);
    assert.ok(
      types.indexOf("response.received") < types.indexOf("stream.client_disconnected") &&
        types.indexOf("stream.client_disconnected") < types.indexOf("response.returned"),
    );
    assert.equal(types.at(-1), "response.returned");
  } finally {
    await gw.close();
  }
});

Deno.test("upstream reset mid-stream: in-band error event to the client, receipt records the failure", async () => {
  const gw = await startTestGateway({ configure: plainRoutesOnly });
  try {
    const { report } = await fetchReport(gw.url);
    const cases = [
      {
        path: "/v1/chat/completions",
        body: { model: "demo/echo", messages: [{ role: "user", content: LONG_PROMPT }] },
      },
      {
        path: "/v1/messages",
        body: {
          model: "demo/echo",
          max_tokens: 200,
          messages: [{ role: "user", content: LONG_PROMPT }],
        },
      },
    ];
    for (const c of cases) {
      gw.plain.setFault({ kind: "reset_mid_stream", afterChunks: 3, times: 1 });
      const ex = await postRaw(gw.url, c.path, { ...c.body, stream: true }, gw.apiKey);
      assert.equal(ex.status, 200, c.path);
      const raw = text(ex.response);
      // Some content arrived, then an in-band error, and never a normal end.
      const docs = sseJson(ex.response);
      assert.ok(docs.length >= 2, c.path);
      const last = docs.at(-1) as Record<string, unknown>;
      assert.ok("error" in last || last.type === "error", `${c.path}: ${JSON.stringify(last)}`);
      if (c.path === "/v1/messages") assert.match(raw, /event: error\n/);
      assert.ok(!raw.includes("[DONE]"));

      const receipt = await waitForReceipt(gw.url, ex.receiptId!, gw.apiKey);
      assert.ok(eventTypes(receipt).includes("stream.upstream_failed"), c.path);
      assert.ok(!eventTypes(receipt).includes("stream.client_disconnected"));
      assert.equal(onlyEvent(receipt, "response.returned").body_hash, sha256Prefixed(ex.response));
      assert.deepEqual(
        verifyReceipt(receipt, {
          report,
          requestBody: ex.request,
          responseBody: ex.response,
        }).filter((x) => !x.ok),
        [],
      );
      assert.deepEqual(
        independentFailures(receipt, keysetOf(report), {
          request: ex.request,
          response: ex.response,
        }),
        [],
      );
      assert.equal(events(receipt).at(-1)?.type, "response.returned");
    }
  } finally {
    await gw.close();
  }
});
