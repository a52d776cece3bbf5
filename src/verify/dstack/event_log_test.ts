import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { collateralFromDcapQvlJson } from "../tdx/collateral.ts";
import { verifyTdxQuote } from "../tdx/dcap.ts";
import { parseTdxQuote } from "../tdx/quote.ts";
import { bytesToHex, parseHex } from "../../aci/hex.ts";
import { parseEventLog, replayRtmrs, verifyEventLog } from "./event_log.ts";

const FIX = new URL("../../../tests/fixtures/", import.meta.url);

interface Sample {
  SAMPLE_DSTACK_QUOTE: { quote: string; event_log: string };
  SAMPLE_DSTACK_INFO: { compose_hash: string; tcb_info: { app_compose: string } };
}
function sample(): { data: Sample; quote: Uint8Array } {
  const data: Sample = JSON.parse(
    Deno.readTextFileSync(new URL("dstack/vllm-proxy-sample-dstack-data.json", FIX)),
  );
  const quote = parseHex(data.SAMPLE_DSTACK_QUOTE.quote);
  if (!quote) throw new Error("sample quote hex");
  return { data, quote };
}

Deno.test({
  name: "dstack sample event log replays exactly to its quote's RTMRs and yields the compose hash",
  fn: () => {
    const { data, quote } = sample();
    const q = parseTdxQuote(quote);
    assert.ok(q.ok);
    if (!q.ok) return;
    const r = verifyEventLog(data.SAMPLE_DSTACK_QUOTE.event_log, q.quote.report.rtmrs);
    assert.ok(r.ok, r.ok ? "" : r.reason);
    if (!r.ok) return;
    assert.equal(r.events.length, 29);
    assert.equal(r.composeHash, data.SAMPLE_DSTACK_INFO.compose_hash);
    const appCompose = data.SAMPLE_DSTACK_INFO.tcb_info.app_compose;
    assert.equal(r.composeHash, createHash("sha256").update(appCompose).digest("hex"));
  },
});

Deno.test({
  name: "dstack: a changed digest or a swapped compose-hash payload is caught",
  fn: () => {
    const { data, quote } = sample();
    const q = parseTdxQuote(quote);
    assert.ok(q.ok);
    if (!q.ok) return;
    const events = JSON.parse(data.SAMPLE_DSTACK_QUOTE.event_log);
    const tampered = structuredClone(events);
    tampered[14].digest = "00" + tampered[14].digest.slice(2); // an RTMR1 firmware event
    const r1 = verifyEventLog(tampered, q.quote.report.rtmrs);
    assert.equal(r1.ok, false);
    if (!r1.ok) {
      assert.match(r1.reason, /^event log replays RTMR1 to [0-9a-f]{96}, quote has [0-9a-f]{96}$/);
    }

    const swapped = structuredClone(events);
    const idx = swapped.findIndex((e: { event: string }) => e.event === "compose-hash");
    swapped[idx].event_payload = "11".repeat(32);
    assert.deepEqual(verifyEventLog(swapped, q.quote.report.rtmrs), {
      ok: false,
      reason: `event ${idx} (compose-hash): digest does not match its payload`,
    });
  },
});

Deno.test("replay folds sha384(acc ‖ digest) from zeros per IMR", () => {
  const d = new Uint8Array(48).fill(7);
  const parsed = parseEventLog([{
    imr: 2,
    event_type: 1,
    digest: "07".repeat(48),
    event_payload: "",
  }]);
  assert.ok(parsed.ok);
  if (!parsed.ok) return;
  const rtmrs = replayRtmrs(parsed.events);
  const expected = createHash("sha384").update(new Uint8Array(48)).update(d).digest();
  assert.deepEqual(rtmrs[2], new Uint8Array(expected));
  assert.deepEqual(rtmrs[0], new Uint8Array(48));
  assert.deepEqual(parseEventLog([{ imr: 4, event_type: 1, digest: "", event_payload: "" }]), {
    ok: false,
    reason: "event 0: imr must be 0..3",
  });
});

Deno.test({
  name: "dstack sample quote verifies UpToDate with the NEAR collateral at 2025-09-10",
  fn: async () => {
    const { quote } = sample();
    const c = collateralFromDcapQvlJson(
      Deno.readTextFileSync(new URL("tdx/near-quote_collateral.json", FIX)),
    );
    assert.ok(c.ok);
    if (!c.ok) return;
    const r = await verifyTdxQuote(quote, {
      collateral: c.collateral,
      now: () => Date.parse("2025-09-10T00:00:00Z"),
    });
    assert.ok(r.ok, r.ok ? "" : r.reason);
    if (r.ok) {
      assert.equal(r.tcbStatus, "UpToDate");
      assert.equal(r.reportHex.reportData, "01".repeat(64));
    }
  },
});

Deno.test("dstack 0.6 format: an empty digest is derived for runtime events only", () => {
  const runtime = {
    imr: 3,
    event_type: 0x08000001,
    digest: "",
    event: "compose-hash",
    event_payload: "ab".repeat(32),
  };
  const parsed = parseEventLog([runtime]);
  assert.ok(parsed.ok);
  if (!parsed.ok) return;
  assert.equal(parsed.events[0].digestDerived, true);
  const expected = createHash("sha384")
    .update(Uint8Array.from([1, 0, 0, 8]))
    .update(":compose-hash:")
    .update(Uint8Array.from({ length: 32 }, () => 0xab))
    .digest();
  assert.deepEqual(parsed.events[0].digest, new Uint8Array(expected));
  // A firmware event's digest is the only record of what was measured: never derived.
  const firmware = { imr: 0, event_type: 0x80000001, digest: "", event: "", event_payload: "" };
  assert.deepEqual(parseEventLog([firmware]), {
    ok: false,
    reason: "event 0: digest must be 48 bytes of hex",
  });
  // The derived log replays like the classic one and reports its format.
  const rtmrs = replayRtmrs(parsed.events);
  const replayed = verifyEventLog(JSON.stringify([runtime]), rtmrs);
  assert.ok(replayed.ok);
  if (replayed.ok) assert.equal(replayed.format, "0.6");
  const classic = verifyEventLog(
    [{ ...runtime, digest: bytesToHex(parsed.events[0].digest) }],
    rtmrs,
  );
  assert.ok(classic.ok);
  if (classic.ok) assert.equal(classic.format, "classic");
});
