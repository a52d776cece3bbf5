/**
 * The `GatewayError` a call throws or a promise rejects with, for tests that
 * assert on its kind and message; anything else fails the test.
 */
import assert from "node:assert/strict";
import { GatewayError } from "../../src/http/errors.ts";

/** The GatewayError `fn` throws. */
export function thrownGatewayError(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
  throw new assert.AssertionError({ message: "expected a GatewayError" });
}

/** The GatewayError `p` rejects with. */
export async function rejectedGatewayError(p: Promise<unknown>): Promise<GatewayError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
  throw new assert.AssertionError({ message: "expected a GatewayError" });
}
