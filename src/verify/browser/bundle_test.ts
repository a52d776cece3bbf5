import assert from "node:assert/strict";
import {
  bundleVerifyPage,
  GENERATED,
  generatedModule,
} from "../../../enclave/build_verify_page.ts";

Deno.test("the committed /verify script is the bundle of the current verify library", async () => {
  const js = await bundleVerifyPage();
  assert.ok(!/\bnode:/.test(js), "no node: imports in the browser bundle");
  assert.ok(js.includes("receipt.signature"), "built from the verify library");
  assert.equal(
    await Deno.readTextFile(GENERATED),
    generatedModule(js),
    "stale: run `deno run -A enclave/build_verify_page.ts`",
  );
});
