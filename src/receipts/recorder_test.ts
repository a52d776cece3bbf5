import assert from "node:assert/strict";
import type { KvWrite } from "../store/group_commit.ts";
import type { Candidate } from "../routing/select.ts";
import { type ReceiptDraft, ReceiptRecorder, type ReceiptSigner } from "./recorder.ts";

const H = (c: string) => `sha256:${c.repeat(64)}`;

/** A signer that records what it signed and returns one write naming the receipt. */
function signer() {
  const signed: { how: string; events: string[] }[] = [];
  const s: ReceiptSigner = {
    finalize: (d: ReceiptDraft) => {
      signed.push({ how: "own", events: d.events.map((e) => e.type) });
      return [{ op: "set", key: ["receipts", d.receiptId], value: "r" }];
    },
    finalizeRefusal: (d: ReceiptDraft) => {
      signed.push({ how: "refusal", events: d.events.map((e) => e.type) });
      return { receiptId: "shared-1", writes: [] };
    },
  };
  return { s, signed };
}

function committer() {
  const commits: KvWrite[][] = [];
  return { commits, write: (ops: KvWrite[]) => (commits.push(ops), Promise.resolve()) };
}

const candidate = {
  routeId: "a:m",
  provider: { name: "a" },
  verification: null,
} as unknown as Candidate;
const settlement: KvWrite = { op: "sum", key: ["credits", "k"], value: 1n } as unknown as KvWrite;

Deno.test("receipt: an answer closes once, its settlement in the same commit", async () => {
  const { s, signed } = signer();
  const c = committer();
  const rec = new ReceiptRecorder("r1", "/v1/chat/completions", "POST", s, c);
  rec.received(H("a"));
  rec.admitted();
  rec.selected(candidate, 1, "demo/m", false);
  rec.forwarded(H("b")); // the upstream body differs from the client's
  rec.served(candidate, 1);
  assert.ok(rec.forwardedAny && !rec.closed);
  await rec.close(
    { kind: "answer", receivedHash: H("c"), returnedHash: H("c"), chatId: "chatcmpl-1" },
    [settlement],
  );
  assert.deepEqual(signed, [{
    how: "own",
    events: [
      "request.received",
      "middleware.forwarded",
      "route.selected",
      "request.forwarded",
      "transparency.request_modified",
      "route.served",
      "response.received",
      "response.returned",
    ],
  }]);
  assert.equal(rec.draft.chatId, "chatcmpl-1");
  assert.deepEqual(c.commits, [[{ op: "set", key: ["receipts", "r1"], value: "r" }, settlement]]);
  assert.ok(rec.closed);
  assert.throws(
    () => rec.close({ kind: "refusal", reason: "internal", returnedHash: H("d") }, []),
    /already closed/,
  );
  assert.equal(c.commits.length, 1, "a second close commits nothing");
  // Without a signer and a commit (tests, the bench floor) a receipt records but cannot close.
  const bare = new ReceiptRecorder("r9", "/v1/chat/completions", "POST");
  bare.received(H("a"));
  assert.throws(() => bare.close({ kind: "refusal", reason: "x", returnedHash: H("b") }, []));
});

Deno.test("receipt: a cut stream and a refusal close with their own events", async () => {
  const { s, signed } = signer();
  const c = committer();
  const cut = new ReceiptRecorder("r2", "/v1/messages", "POST", s, c);
  cut.received(H("a"));
  await cut.close({
    kind: "answer",
    receivedHash: H("b"),
    returnedHash: H("c"),
    cut: "client_disconnected",
    chatId: null,
  }, []);
  assert.deepEqual(signed[0].events.slice(1), [
    "response.received",
    "stream.client_disconnected",
    "transparency.response_modified",
    "response.returned",
  ]);
  // Nothing forwarded: a refusal, which may be counted in a shared receipt.
  const refused = new ReceiptRecorder("r3", "/v1/messages", "POST", s, c);
  refused.received(null);
  assert.equal((refused.draft.events[0] as Record<string, unknown>).body_read, false);
  await refused.close({ kind: "refusal", reason: "rate_limited", returnedHash: H("d") }, [
    settlement,
  ]);
  assert.deepEqual(signed[1], {
    how: "refusal",
    events: ["request.received", "request.refused", "response.returned"],
  });
  assert.equal(refused.servedId, "shared-1");
  assert.deepEqual(c.commits.at(-1), [settlement]);
});
