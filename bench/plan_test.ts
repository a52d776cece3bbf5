import assert from "node:assert/strict";
import { benchPlan, loadSeconds, startupSeconds } from "./plan.ts";

const argv = (...args: string[]) => {
  const has = (f: string) => args.includes(f);
  const flag = (name: string, def: number) => {
    const i = args.indexOf(`--${name}`);
    return i < 0 ? def : Number(args[i + 1]);
  };
  return benchPlan(has, flag);
};

Deno.test("bench --quick: every row from a reduced plan within a minute of load", () => {
  const quick = argv("--quick");
  const full = argv();
  assert.equal(quick.quick, true);
  assert.ok(loadSeconds(quick) <= 60, `quick plan: ${loadSeconds(quick)} s`);
  // The full plan is the long one the quick mode exists to avoid (#27: 213 s at its smallest).
  assert.ok(loadSeconds(full) > 4 * loadSeconds(quick), `full plan: ${loadSeconds(full)} s`);
  // Same measurements, fewer and shorter: every row is still measured at least once.
  assert.ok(quick.rounds >= 1 && quick.heldSamples >= 1 && quick.metrics.rounds >= 1);
  assert.ok(quick.peer.rounds >= 1 && quick.heldStreams > 0);
  assert.equal(quick.profile, false);
  // Flags still apply in quick mode; --no-profile only matters for the full plan.
  assert.equal(argv("--quick", "--rounds", "2").rounds, 2);
  assert.equal(argv("--no-profile").profile, false);
  assert.equal(full.profile, true);
});

Deno.test("bench --quick: load, start-ups and the bench's own boot within a minute of wall-clock", () => {
  const quick = argv("--quick");
  const full = argv();
  // The bench process's boot (npx, Deno loading bench/main.ts and the SDKs), measured ~4 s.
  const boot = 4;
  const wall = boot + loadSeconds(quick) + startupSeconds(quick);
  assert.ok(
    wall <= 60,
    `quick: ${loadSeconds(quick)} s load + ${startupSeconds(quick)} s start-ups`,
  );
  // Shared, concurrent start-ups are what make it fit: the full plan's one by one would not.
  assert.equal(quick.shareServers, true);
  assert.equal(full.shareServers, false);
  assert.ok(startupSeconds({ ...quick, shareServers: false }) > startupSeconds(quick) + 10);
  // The tail verdict's rule: the gateway's window stays 8 s (bench/tail_window.ts).
  assert.ok(quick.tail.rounds >= 1);
  // Every section still measures something.
  for (const n of [quick.verifying.batch, quick.tlog.rounds, quick.workers.rounds]) {
    assert.ok(n >= 1);
  }
  assert.ok(quick.promptSizes.rounds >= 1 && quick.heldWaits.settleMs > 0);
});
