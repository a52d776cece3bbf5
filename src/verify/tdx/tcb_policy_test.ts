import assert from "node:assert/strict";
import { ACCEPTABLE_TCB_STATUSES, tcbPolicyViolation } from "./tcb_policy.ts";

Deno.test("TCB policy: NotSupported and Revoked fail under every policy", () => {
  const everything = { accepted: ACCEPTABLE_TCB_STATUSES };
  assert.equal(
    tcbPolicyViolation({
      tcbStatus: "NotSupported",
      detail: "TDX module identity TDX_07 is not in the TCB Info",
    }, everything),
    "TCB status NotSupported: TDX module identity TDX_07 is not in the TCB Info",
  );
  assert.equal(tcbPolicyViolation({ tcbStatus: "Revoked" }, everything), "TCB status is Revoked");
  assert.match(tcbPolicyViolation({ tcbStatus: "NotSupported" }) ?? "", /matches no TCB level/);
});

Deno.test("TCB policy: the default accepts every Intel status but Revoked; a policy narrows it", () => {
  for (const s of ACCEPTABLE_TCB_STATUSES) {
    assert.equal(tcbPolicyViolation({ tcbStatus: s }), null, s);
  }
  const strict = { accepted: ["UpToDate", "SWHardeningNeeded"] as const };
  assert.equal(tcbPolicyViolation({ tcbStatus: "SWHardeningNeeded" }, strict), null);
  assert.equal(
    tcbPolicyViolation({ tcbStatus: "OutOfDateConfigurationNeeded" }, strict),
    "TCB status OutOfDateConfigurationNeeded is not accepted by the TCB policy " +
      "(accepted: UpToDate, SWHardeningNeeded)",
  );
});
