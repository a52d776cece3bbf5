import assert from "node:assert/strict";
import { sha256Prefixed } from "../aci/digest.ts";
import type { ProviderConfig } from "../config/schema.ts";
import { ReceiptRecorder } from "../receipts/recorder.ts";
import type { Candidate, VerificationState } from "./select.ts";
import type { UpstreamFetch } from "../upstream/forward.ts";
import { type AttemptRecord, forward, type ForwardPlan, isConfigRefusal } from "./failover.ts";
import { rejectedGatewayError } from "../../tests/support/gateway_error.ts";

/** A receipt whose request body was `BODY` (forwarded bytes are compared with it). */
function receipt(id: string): ReceiptRecorder {
  const rec = new ReceiptRecorder(id, "/v1/chat/completions", "POST");
  rec.received(sha256Prefixed(BODY));
  return rec;
}

/** The events failover added (after `request.received`). */
function attemptEvents(rec: ReceiptRecorder) {
  return rec.draft.events.slice(1);
}

interface Seen {
  path: string;
  auth: string | null;
  body: string;
}

/** A real loopback HTTP upstream answering with `respond`, recording what it received. */
function upstream(respond: (req: Request) => Response | Promise<Response>) {
  const seen: Seen[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    seen.push({
      path: new URL(req.url).pathname,
      auth: req.headers.get("authorization"),
      body: await req.text(),
    });
    return respond(req);
  });
  return { url: `http://127.0.0.1:${server.addr.port}/v1`, seen, close: () => server.shutdown() };
}

function candidate(
  name: string,
  baseUrl: string,
  opts: { timeoutMs?: number; verification?: VerificationState | null } = {},
): Candidate {
  const provider: ProviderConfig = {
    name,
    base_url: baseUrl,
    zdr: true,
    priority: 0,
    timeout_ms: opts.timeoutMs ?? 5_000,
    native_formats: [],
  };
  return {
    provider,
    upstreamModel: "m",
    verification: opts.verification ?? null,
    routeId: `${name}:m`,
  };
}

const BODY = new TextEncoder().encode('{"model":"m","messages":[]}');

function plan(candidates: Candidate[], extra: Partial<ForwardPlan> = {}) {
  const attempts: AttemptRecord[] = [];
  const p: ForwardPlan = {
    candidates,
    path: () => "/v1/chat/completions",
    body: () => BODY.slice(),
    verificationRequired: false,
    modelId: "demo/m",
    signal: new AbortController().signal,
    onAttempt: (a) => attempts.push(a),
    ...extra,
  };
  return { p, attempts };
}

const fetchFor = (): UpstreamFetch => (url, init) => fetch(url, init);
const deps = {
  fetchFor,
  credential: (p: string) => (p === "a" ? "sk-a" : undefined),
  now: Date.now,
  bodyLimits: { maxBytes: 1 << 20, idleMs: 5_000, totalMs: 10_000 },
};

Deno.test("failover: a 503 fails over to the next candidate; events and attempts say so", async () => {
  const a = upstream(() => new Response('{"error":{"message":"overloaded"}}', { status: 503 }));
  const b = upstream(() => Response.json({ ok: true }));
  try {
    const rec = receipt("r1");
    const { p, attempts } = plan([candidate("a", a.url), candidate("b", b.url)]);
    const out = await forward(p, deps, rec);
    assert.deepEqual(await out.response.json(), { ok: true });
    assert.equal(out.candidate.provider.name, "b");
    assert.equal(out.attempts, 2);
    // The base URL ends in /v1 and the path starts with /v1: sent once.
    assert.deepEqual(a.seen.map((s) => s.path), ["/v1/chat/completions"]);
    assert.equal(a.seen[0].auth, "Bearer sk-a");
    assert.equal(b.seen[0].auth, null, "no credential configured: none sent");
    assert.equal(b.seen[0].body, new TextDecoder().decode(BODY));
    const hash = sha256Prefixed(BODY);
    assert.deepEqual(attemptEvents(rec), [
      { type: "route.selected", target_route_id: "a:m", attempt: 1 },
      { type: "request.forwarded", body_hash: hash },
      { type: "upstream.attempt_failed", target_route_id: "a:m", attempt: 1, status: 503 },
      { type: "route.selected", target_route_id: "b:m", attempt: 2 },
      { type: "request.forwarded", body_hash: hash },
      { type: "route.served", target_route_id: "b:m", attempt: 2, provider: "b" },
    ]);
    assert.deepEqual(attempts, [
      { attempt: 1, provider: "a", outcome: "status_503" },
      { attempt: 2, provider: "b", outcome: "served" },
    ]);
  } finally {
    await a.close();
    await b.close();
  }
});

Deno.test("failover: a 400 is final, and its message shows no upstream text (only a known shape's phrase)", async () => {
  const a = upstream(() =>
    new Response('{"error":{"message":"bad value \\"my secret prompt\\" in messages"}}', {
      status: 400,
    })
  );
  const b = upstream(() => Response.json({ ok: true }));
  try {
    const rec = receipt("r2");
    const e = await rejectedGatewayError(
      forward(plan([candidate("a", a.url), candidate("b", b.url)]).p, deps, rec),
    );
    assert.equal(e.status, 400);
    assert.equal(
      e.message,
      "upstream rejected the request: upstream answered 400",
    );
    assert.ok(!e.message.includes("secret"));
    assert.equal(b.seen.length, 0, "no failover after a 4xx");
  } finally {
    await a.close();
    await b.close();
  }
});

Deno.test("failover: timeouts, refused connections and 429s map to their errors", async () => {
  let release!: () => void;
  const hung = new Promise<void>((r) => (release = r));
  const slow = upstream(async () => {
    await hung;
    return new Response("late");
  });
  const limited = upstream(() => new Response("{}", { status: 429 }));
  // A port that was just free: nothing listens there.
  const closed = upstream(() => new Response());
  const closedUrl = closed.url;
  await closed.close();
  try {
    const rec = receipt("r3");
    const timeout = await rejectedGatewayError(
      forward(plan([candidate("slow", slow.url, { timeoutMs: 100 })]).p, deps, rec),
    );
    assert.equal(timeout.kind, "upstream_timeout");
    assert.equal(
      timeout.message,
      "upstream timed out (1 upstream attempt): no response within 100 ms",
    );
    assert.deepEqual(rec.draft.events.at(-1), {
      type: "upstream.attempt_failed",
      target_route_id: "slow:m",
      attempt: 1,
      reason: "timeout",
    });
    const refused = await rejectedGatewayError(
      forward(plan([candidate("gone", closedUrl)]).p, deps, rec),
    );
    assert.equal(refused.kind, "upstream_error");
    assert.equal(refused.message, "upstream unreachable (1 upstream attempt)");
    const busy = await rejectedGatewayError(
      forward(plan([candidate("l1", limited.url), candidate("l2", limited.url)]).p, deps, rec),
    );
    assert.equal(busy.kind, "unavailable");
    assert.equal(busy.message, "upstream answered 429 (2 upstream attempts)");
    assert.equal(limited.seen.length, 2, "429 fails over");
    const none = await rejectedGatewayError(forward(plan([]).p, deps, rec));
    assert.equal(none.message, "no upstream could be tried");
  } finally {
    release();
    await slow.close();
    await limited.close();
  }
});

Deno.test("failover: a client abort stops failover; a changed body is marked as modified", async () => {
  const a = upstream(() => new Response("{}", { status: 500 }));
  const b = upstream(() => Response.json({ ok: true }));
  try {
    const ctl = new AbortController();
    const rec = receipt("r4");
    const { p } = plan([candidate("a", a.url), candidate("b", b.url)], {
      signal: ctl.signal,
      // The first attempt ends with the client gone.
      onAttempt: () => ctl.abort(),
      body: () => new TextEncoder().encode('{"model":"m","messages":[],"x":1}'),
    });
    const e = await rejectedGatewayError(forward(p, deps, rec));
    assert.equal(e.message, "client closed the request");
    assert.equal(b.seen.length, 0);
    assert.ok(rec.draft.events.some((ev) => ev.type === "transparency.request_modified"));
  } finally {
    await a.close();
    await b.close();
  }
});

Deno.test("failover: a TLS pin mismatch reports the channel and asks for re-verification", async () => {
  const mismatched: string[] = [];
  const pinFetch: UpstreamFetch = () => {
    const e = new Error("pin mismatch");
    e.name = "PinMismatchError";
    return Promise.reject(e);
  };
  const verified: VerificationState = {
    verified: true,
    sessionId: "ab".repeat(32),
    spkiSha256: "cd".repeat(32),
    verifierId: "dstack-tdx/1",
    teeAttested: "hardware_proven",
  };
  const rec = receipt("r5");
  const { p } = plan([candidate("tee", "https://127.0.0.1:1/v1", { verification: verified })], {
    verificationRequired: true,
  });
  const e = await rejectedGatewayError(
    forward(p, {
      ...deps,
      fetchFor: () => pinFetch,
      onChannelMismatch: (c) => mismatched.push(c.routeId),
    }, rec),
  );
  assert.equal(e.kind, "upstream_verification_failed");
  assert.deepEqual(mismatched, ["tee:m"]);
  // The pin was checked before any byte was written: the prompt was never forwarded.
  assert.ok(!rec.draft.events.some((ev) => ev.type === "request.forwarded"));
  assert.deepEqual(rec.draft.events.find((ev) => ev.type === "upstream.verified"), {
    type: "upstream.verified",
    model_id: "demo/m",
    result: "verified",
    required: true,
    session_id: "ab".repeat(32),
    tee_attested: "hardware_proven",
    attempt: 1,
  });
  // An unverified confidential candidate records why.
  const rec2 = receipt("r6");
  const { p: p2 } = plan([
    candidate("tee", "https://127.0.0.1:1/v1", {
      verification: { verified: false, reason: "no quote" },
    }),
  ]);
  await rejectedGatewayError(forward(p2, { ...deps, fetchFor: () => pinFetch }, rec2));
  assert.deepEqual(rec2.draft.events.find((ev) => ev.type === "upstream.verified"), {
    type: "upstream.verified",
    model_id: "demo/m",
    result: "failed",
    required: false,
    reason: "no quote",
    upstream_name: "tee",
    attempt: 1,
  });
});

Deno.test("isConfigRefusal: 404s and 'model does not exist' 400s are the gateway's; parameter 400s are the client's", () => {
  assert.equal(isConfigRefusal(404, ""), true);
  assert.equal(isConfigRefusal(400, "The model … does not exist"), true);
  assert.equal(isConfigRefusal(422, "model not found"), true);
  assert.equal(isConfigRefusal(400, "Unknown model: …"), true);
  assert.equal(isConfigRefusal(400, "the upstream does not serve this model"), true);
  assert.equal(isConfigRefusal(400, "n must be 1 for this model"), false);
  assert.equal(isConfigRefusal(400, "temperature out of range"), false);
  assert.equal(isConfigRefusal(500, "model does not exist"), false);
});

Deno.test("failover: an upstream refusing the configuration fails over, ends as 502, tells the operator", async () => {
  const notFound = '{"error":{"message":"The model `m` does not exist","code":"model_not_found"}}';
  const a = upstream(() => new Response(notFound, { status: 404 }));
  const b = upstream(() => new Response(notFound, { status: 400 }));
  const c = upstream(() => Response.json({ ok: true }));
  try {
    const told: unknown[] = [];
    const d = { ...deps, onConfigRefusal: (r: unknown) => told.push(r) };
    const e = await rejectedGatewayError(
      forward(plan([candidate("a", a.url), candidate("b", b.url)]).p, d, receipt("r9")),
    );
    assert.equal(e.status, 502);
    assert.match(e.message, /refused this gateway's configuration/);
    assert.deepEqual(told, [
      {
        provider: "a",
        upstreamModel: "m",
        status: 404,
        detail: "the upstream does not serve this model",
      },
      {
        provider: "b",
        upstreamModel: "m",
        status: 400,
        detail: "the upstream does not serve this model",
      },
    ]);
    const out = await forward(
      plan([candidate("a", a.url), candidate("c", c.url)]).p,
      d,
      receipt("r10"),
    );
    assert.equal(out.candidate.provider.name, "c", "the next route serves");
  } finally {
    await a.close();
    await b.close();
    await c.close();
  }
});
