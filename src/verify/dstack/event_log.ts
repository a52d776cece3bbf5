/**
 * dstack event log replay: folds each event's SHA-384 digest into its RTMR
 * (`RTMR[i] = sha384(RTMR[i] ‖ digest)`, starting from 48 zero bytes),
 * compares the result with the quote's RTMR0..3, and extracts the RTMR3
 * `compose-hash` payload. dstack runtime events (type 0x08000001) have their
 * digest recomputed from their payload, so a payload cannot be swapped under
 * an unchanged digest. Two formats: classic logs carry every digest; dstack
 * ≥ 0.6 serves runtime events with `"digest": ""`, the digest being derivable
 * from the payload (and only for those events: a firmware event's digest is
 * the only record of what was measured).
 */
import { createHash } from "node:crypto";
import { bytesEqual, bytesToHex, parseHex } from "../../aci/mod.ts";
import { type Checked, fail } from "../x509/verify_result.ts";

/** dstack's event type for runtime (RTMR3) events. */
export const DSTACK_RUNTIME_EVENT_TYPE = 0x08000001;

export interface DstackEvent {
  imr: number;
  eventType: number;
  /** As served, or derived from the payload for a 0.6-style runtime event. */
  digest: Uint8Array;
  /** True when the log served `"digest": ""` and the digest was derived. */
  digestDerived?: boolean;
  /** Event name (runtime events), empty for firmware events. */
  event: string;
  eventPayload: Uint8Array;
}

export type Rtmrs = [Uint8Array, Uint8Array, Uint8Array, Uint8Array];

/** A replayed log that matches the quote. */
export interface ReplayedLog {
  events: DstackEvent[];
  /** "0.6" when runtime digests were derived from payloads (`"digest": ""`), else "classic". */
  format: "classic" | "0.6";
  /** `compose-hash` payload as lowercase hex, or null when the log has none. */
  composeHash: string | null;
}

function toInt(v: unknown): number | null {
  if (typeof v === "number" && Number.isInteger(v) && v >= 0) return v;
  if (typeof v === "string" && /^\d+$/.test(v)) return Number(v);
  return null;
}

/** Parses the event log as dstack serves it (a JSON array, or its JSON text). */
export function parseEventLog(input: unknown): Checked<{ events: DstackEvent[] }> {
  let value = input;
  if (typeof input === "string") {
    try {
      value = JSON.parse(input);
    } catch {
      return fail("event log is not valid JSON");
    }
  }
  if (!Array.isArray(value)) return fail("event log is not an array");
  const events: DstackEvent[] = [];
  for (let i = 0; i < value.length; i++) {
    const e: unknown = value[i];
    if (typeof e !== "object" || e === null) return fail(`event ${i} is not an object`);
    const r = e as Record<string, unknown>;
    const imr = toInt(r.imr);
    const eventType = toInt(r.event_type);
    const payload = typeof r.event_payload === "string" ? parseHex(r.event_payload) : null;
    const event = r.event === undefined ? "" : r.event;
    if (imr === null || imr > 3) return fail(`event ${i}: imr must be 0..3`);
    if (eventType === null || eventType > 0xffffffff) return fail(`event ${i}: bad event_type`);
    if (!payload) return fail(`event ${i}: event_payload is not hex`);
    if (typeof event !== "string") return fail(`event ${i}: event is not a string`);
    if (r.digest === "" && eventType === DSTACK_RUNTIME_EVENT_TYPE) {
      const derived = runtimeEventDigest({ eventType, event, eventPayload: payload });
      events.push({
        imr,
        eventType,
        digest: derived,
        digestDerived: true,
        event,
        eventPayload: payload,
      });
      continue;
    }
    const digest = typeof r.digest === "string" ? parseHex(r.digest) : null;
    if (!digest || digest.length !== 48) return fail(`event ${i}: digest must be 48 bytes of hex`);
    events.push({ imr, eventType, digest, event, eventPayload: payload });
  }
  return { ok: true, events };
}

/** dstack's runtime event digest: sha384(u32le(type) ‖ ":" ‖ name ‖ ":" ‖ payload). */
export function runtimeEventDigest(
  e: Pick<DstackEvent, "eventType" | "event" | "eventPayload">,
): Uint8Array {
  const t = new Uint8Array(4);
  new DataView(t.buffer).setUint32(0, e.eventType, true);
  return new Uint8Array(
    createHash("sha384").update(t).update(":").update(e.event).update(":").update(e.eventPayload)
      .digest(),
  );
}

/** Folds the events into RTMR0..3. */
export function replayRtmrs(events: DstackEvent[]): Rtmrs {
  const acc: Rtmrs = [
    new Uint8Array(48),
    new Uint8Array(48),
    new Uint8Array(48),
    new Uint8Array(48),
  ];
  for (const e of events) {
    acc[e.imr] = new Uint8Array(createHash("sha384").update(acc[e.imr]).update(e.digest).digest());
  }
  return acc;
}

/**
 * Parses and replays the log, checks runtime-event digests, requires the
 * replay to equal `quoteRtmrs` exactly, and returns the compose hash.
 */
export function verifyEventLog(
  input: unknown,
  quoteRtmrs: readonly Uint8Array[],
): Checked<ReplayedLog> {
  const parsed = parseEventLog(input);
  if (!parsed.ok) return parsed;
  const events = parsed.events;
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    if (e.eventType === DSTACK_RUNTIME_EVENT_TYPE && !bytesEqual(runtimeEventDigest(e), e.digest)) {
      return fail(`event ${i} (${e.event}): digest does not match its payload`);
    }
  }
  if (quoteRtmrs.length !== 4) return fail("quote must supply 4 RTMRs");
  const replayed = replayRtmrs(events);
  for (let i = 0; i < 4; i++) {
    if (!bytesEqual(replayed[i], quoteRtmrs[i])) {
      return fail(
        `event log replays RTMR${i} to ${bytesToHex(replayed[i])}, quote has ${
          bytesToHex(quoteRtmrs[i])
        }`,
      );
    }
  }
  const compose = events.filter((e) =>
    e.imr === 3 && e.eventType === DSTACK_RUNTIME_EVENT_TYPE && e.event === "compose-hash"
  );
  if (compose.length > 1) return fail("event log has more than one compose-hash event");
  return {
    ok: true,
    events,
    format: events.some((e) => e.digestDerived) ? "0.6" : "classic",
    composeHash: compose.length ? bytesToHex(compose[0].eventPayload) : null,
  };
}
