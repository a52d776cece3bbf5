import assert from "node:assert/strict";
import { fakeState } from "./stages_testing.ts";

Deno.test("InferenceState.timed adds each phase's monotonic time", () => {
  const { s, info } = fakeState();
  s.timed("admit", 0); // the fake clock reads 5
  s.timed("admit", 5); // 10 - 5
  assert.deepEqual(info.phases, { admit: 10 });
});

Deno.test("InferenceState.bodyHash reuses the received hash for the client's own bytes", () => {
  const { s } = fakeState();
  s.bytes = new Uint8Array([1, 2, 3]);
  s.receivedHash = "sha256:received";
  assert.equal(s.bodyHash(s.bytes), "sha256:received");
  assert.match(s.bodyHash(new Uint8Array([1, 2, 3])), /^sha256:[0-9a-f]{64}$/);
});

Deno.test("InferenceState.onAttempt records attempts; warns of an unverified confidential one", () => {
  const { s, info, logs } = fakeState({
    catalog: { providers: new Map([["conf", { confidential: true }], ["plain", {}]]) },
  });
  s.noteAttemptsStarted();
  s.onAttempt({ attempt: 1, provider: "plain", outcome: "status_500" });
  s.onAttempt({ attempt: 2, provider: "conf", outcome: "served" });
  assert.deepEqual(info.attempts, [
    { provider: "plain", outcome: "status_500" },
    { provider: "conf", outcome: "served" },
  ]);
  assert.equal(logs.length, 1);
  assert.equal(logs[0].upstream, "conf");
});

Deno.test("InferenceState: the forward plan's view of E2EE and the key", () => {
  const { s } = fakeState();
  assert.equal(s.withholdUpstreamText, false);
  assert.equal(s.partition, undefined);
});
