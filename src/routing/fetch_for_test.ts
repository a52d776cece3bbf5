import assert from "node:assert/strict";
import type { ProviderConfig } from "../config/mod.ts";
import type { UpstreamFetch } from "../upstream/mod.ts";
import { createFetchFor } from "./fetch_for.ts";
import type { Candidate, VerificationState } from "./select.ts";

const plain: UpstreamFetch = () => Promise.resolve(new Response("plain"));

function world() {
  const events: string[] = [];
  const pinnedFetches = new Map<string, { fetch: UpstreamFetch; onMismatch: () => void }>();
  const transport = {
    pinned(o: { provider: string; spkiSha256: string; onMismatch: () => void }) {
      events.push(`pinned ${o.provider} ${o.spkiSha256}`);
      const f: UpstreamFetch = () => Promise.resolve(new Response(`pinned ${o.spkiSha256}`));
      pinnedFetches.set(o.provider, { fetch: f, onMismatch: o.onMismatch });
      return f;
    },
    dropPinned(p: string) {
      events.push(`drop ${p}`);
    },
    withCa(_pem: string) {
      events.push("withCa");
      return plain;
    },
  };
  const fetchFor = createFetchFor({
    transport,
    fetch: plain,
    invalidate: (p, reason) => events.push(`invalidate ${p}: ${reason}`),
  });
  return { fetchFor, events, pinnedFetches };
}

const candidate = (verification: VerificationState | null, ca?: string): Candidate => ({
  provider: {
    name: "tee",
    ...(ca ? { confidential: { tls_ca_pem: ca } } : {}),
  } as unknown as ProviderConfig,
  upstreamModel: "m",
  verification,
  routeId: "tee:m",
});
const verified = (sessionId: string, spki: string): VerificationState => ({
  verified: true,
  sessionId,
  spkiSha256: spki,
  verifierId: "v",
  teeAttested: "hardware_proven",
});

Deno.test("fetchFor: a verified upstream only over its bound key; the pool is retired when its session changes", () => {
  const { fetchFor, events } = world();
  assert.equal(fetchFor(candidate(null)), plain, "not confidential: the plain fetch");
  fetchFor(candidate(verified("s1", "aa")));
  fetchFor(candidate(verified("s1", "aa")));
  assert.deepEqual(events, ["pinned tee aa", "pinned tee aa"]);
  fetchFor(candidate(verified("s2", "bb")));
  assert.deepEqual(
    events.slice(2),
    ["drop tee", "pinned tee bb"],
    "a new session: old pool dropped",
  );
  fetchFor(candidate({ verified: false, reason: "expired" }));
  assert.equal(events.at(-1), "drop tee", "no longer verified: its pool is dropped too");
});

Deno.test("fetchFor: another key at the pinned origin ends the session; a private CA gets its CA", () => {
  const { fetchFor, events, pinnedFetches } = world();
  fetchFor(candidate(verified("s1", "aa")));
  pinnedFetches.get("tee")!.onMismatch();
  assert.deepEqual(events.slice(1), [
    "drop tee",
    "invalidate tee: upstream TLS key does not match its session",
  ]);
  fetchFor(candidate(null, "PEM"));
  assert.equal(events.at(-1), "withCa");
});

Deno.test("fetchFor: verified without a pinned transport fails closed", () => {
  const f = createFetchFor({ transport: undefined, fetch: plain, invalidate: () => {} });
  assert.throws(() => f(candidate(verified("s1", "aa"))), /no pinned upstream transport/);
});
