/**
 * The last stage, for any failure: the refusal counted against the key, the
 * log facts, and — once a body was received — a signed, durable refusal
 * receipt committed with the admission's release. It renders nothing: it
 * rethrows the error answered (its envelope and headers fixed, the receipt
 * id among them) for the app's one renderer (`app/render_error.ts`), whose
 * body is `errorBytes` of the same error, the bytes the receipt binds.
 */
import { asGatewayError, errorBytes, errorCodeOf } from "../http/mod.ts";
import { sha256Prefixed } from "../aci/mod.ts";
import type { KvWrite } from "../store/mod.ts";
import type { InferenceState } from "./inference_state.ts";

const NONE: readonly KvWrite[] = [];
/** An error body is plaintext: never marked as E2EE-applied. */
const E2EE_HEADERS = ["x-e2ee-applied", "x-e2ee-version", "x-e2ee-algo"];

export async function refuse(s: InferenceState, e: unknown): Promise<never> {
  const { ctx, headers, rec, admission } = s;
  const err = asGatewayError(e);
  s.noteRefusal(err, errorCodeOf(err));
  s.bodyTicket?.release();
  // Every refusal (not an upstream's or the gateway's own failure) costs the key a request.
  if (s.key) ctx.preAdmission.note(s.key, err, err.status < 500 && !s.refusedUnread);
  const format = s.ep.errorFormat;
  const out = errorBytes(err, format);
  for (const [k, v] of Object.entries(err.headers)) headers.set(k, v);
  headers.set("content-type", "application/json");
  for (const k of E2EE_HEADERS) headers.delete(k);
  // A refusal after authentication still gets a signed, durable receipt, once the
  // body was received (a body refused unread, e.g. 413, has nothing to bind) and
  // unless the failure was the final commit itself (then no receipt can be promised).
  if (rec && rec.started && !rec.closed) {
    try {
      // The admission is released in the same commit (no usage: nothing was served).
      await rec.close(
        { kind: "refusal", reason: err.kind, returnedHash: sha256Prefixed(out) },
        admission
          ? admission.settlement({ promptTokens: 0, completionTokens: 0, costNano: 0n })
          : NONE,
      );
      headers.set("x-receipt-id", rec.servedId);
      // Past the key's refusal budget its refusals share one receipt: the log names that one.
      s.noteReceipt(rec.servedId);
    } catch {
      headers.delete("x-receipt-id");
      s.noteReceipt(null);
    }
  } else {
    headers.delete("x-receipt-id");
    s.noteReceipt(null);
  }
  throw err.answered(format, Object.fromEntries(headers), e);
}
