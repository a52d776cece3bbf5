/**
 * `--kind dstack`: a dstack guest agent's quote response or a vllm-proxy
 * report (`{quote | intel_quote, event_log, report_data?}`): the TDX quote,
 * then the event log replayed to its RTMRs (classic or dstack ≥ 0.6 format),
 * the compose hash it records, and the recorded report data against the quote.
 */
import { bytesToHex, parseHex } from "../../aci/mod.ts";
import { type Check, check } from "../checks.ts";
import { verifyEventLog } from "../dstack/event_log.ts";
import { isRecord } from "../json_shape.ts";
import { asJson } from "./decode.ts";
import { quoteFromEvidence, tdxChecks } from "./tdx.ts";
import type { EvidenceKind } from "./types.ts";

export const dstackKind: EvidenceKind = {
  reads: "dstack evidence JSON: {quote | intel_quote, event_log[, report_data]}",
  verify: async (input, ctx) => {
    const doc = asJson(input);
    if (!isRecord(doc)) return [check("dstack.input", false, "not a JSON object")];
    const quote = quoteFromEvidence(input);
    if (typeof quote === "string") return [check("dstack.input", false, quote)];
    const { checks, verified } = await tdxChecks(quote, ctx);
    if (!verified) return checks;
    const out: Check[] = [...checks];
    const log = doc["event_log"];
    if (log === undefined || log === null) {
      out.push(check("dstack.event_log", false, "no event_log: RTMR3 cannot be explained"));
      return out;
    }
    const replay = verifyEventLog(log, verified.report.rtmrs);
    if (!replay.ok) {
      out.push(check("dstack.event_log", false, replay.reason));
      return out;
    }
    out.push(
      check(
        "dstack.event_log",
        true,
        `${replay.events.length} events (${replay.format} format) replay exactly to RTMR0–3`,
      ),
      check("dstack.compose_hash", true, replay.composeHash ?? "none recorded"),
    );
    const rd = doc["report_data"];
    if (typeof rd === "string") {
      const want = parseHex(rd.startsWith("0x") ? rd.slice(2) : rd);
      const have = bytesToHex(verified.report.reportData);
      const ok = want !== null && bytesToHex(want).padEnd(128, "0") === have;
      out.push(
        check(
          "dstack.report_data",
          ok,
          ok ? "the quote's REPORTDATA is the recorded report_data" : `the quote has ${have}`,
        ),
      );
    }
    return out;
  },
};
