import assert from "node:assert/strict";
import { benchPlan, loadSeconds } from "./plan.ts";

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
