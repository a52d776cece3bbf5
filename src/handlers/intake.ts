/**
 * The first stage: who is asking (the key, and the receipt it owns), whether
 * its body may be read (#15, #25), the body read, decrypted (E2EE v2), hashed
 * into the receipt and parsed once.
 */
import { newReceiptId, sha256Prefixed } from "../aci/mod.ts";
import {
  freezeJson,
  largeBodyTurn,
  parseJsonDocument,
  readBody,
  requireJsonContentType,
} from "../http/mod.ts";
import { ReceiptRecorder } from "../receipts/mod.ts";
import { refuseClientSalt } from "../routing/mod.ts";
import { openE2ee } from "../e2ee/mod.ts";
import { credentialHeader } from "./auth.ts";
import type { InferenceState } from "./inference_state.ts";

export async function intake(s: InferenceState): Promise<void> {
  const { ctx, req, ep } = s;
  const key = await ctx.auth.authenticate(credentialHeader(req.headers));
  s.noteKey(key.key_id);
  s.key = key;
  // Signed by the receipt service, committed by the group committer (shared commits:
  // receipts/recorder.ts, ReceiptCommit).
  const rec = new ReceiptRecorder(
    newReceiptId(ctx.randomBytes, ctx.now()),
    ep.endpoint,
    "POST",
    ctx.receipts,
    ctx.committer,
  );
  s.rec = rec;
  rec.setOwner(key.digest);
  s.headers.set("x-receipt-id", rec.id);
  s.noteReceipt(rec.id);
  let wire: Uint8Array;
  try {
    // #15: a key out of requests is refused before its body is read, and bodies being
    // read are bounded in bytes (globally and per key) and in time.
    // #25: nor does a key that cannot pay, or whose refusals filled its bucket.
    try {
      await ctx.preAdmission.admissible(key);
    } catch (e) {
      s.refusedUnread = true;
      throw e;
    }
    const ticket = ctx.bodyBudget.ticket(key.key_id);
    s.bodyTicket = ticket;
    wire = await readBody(req, ctx.config.limits.max_body_bytes, {
      timeoutMs: ctx.config.limits.body_timeout_ms,
      reserve: ticket.reserve,
      after: ctx.deadlines.after,
    });
  } catch (e) {
    // Refused unread (413, unreadable): the receipt says so instead of binding a hash.
    rec.received(null);
    throw e;
  }
  try {
    if (s.info.headerError) throw s.info.headerError;
    requireJsonContentType(req);
    // E2EE v2: decrypt and restore before anything reads the body.
    const t0 = ctx.monotonic();
    try {
      s.opened = await openE2ee(ctx.e2ee, req.headers, ep.endpoint, wire);
    } finally {
      s.timed("e2ee", t0);
    }
  } catch (e) {
    // A refusal before or of the decryption binds the bytes as received.
    rec.received(sha256Prefixed(wire));
    throw e;
  }
  const opened = s.opened;
  const bytes = opened?.restored ?? wire;
  s.bytes = bytes;
  await largeBodyTurn(bytes);
  s.receivedHash = sha256Prefixed(bytes);
  rec.received(s.receivedHash);
  await largeBodyTurn(bytes);
  // Parsed once; the upstream body is spliced from these bytes (http/json_splice.ts), so the
  // value they are compared by is frozen. E2EE restores its body as a value: serialized.
  let body: unknown;
  if (opened) body = opened.body;
  else {
    const doc = parseJsonDocument(bytes);
    freezeJson(doc.value);
    s.doc = doc;
    body = doc.value;
  }
  s.parsed = body;
  if (body && typeof body === "object" && typeof (body as { model?: unknown }).model === "string") {
    rec.setModel((body as { model: string }).model);
  }
  refuseClientSalt(body);
}
