/**
 * Offline verification of a NEAR AI Cloud attestation report, component by
 * component (the gateway CVM and each model CVM): the signing key derives to
 * the signing address, the echoed nonce is ours, the TDX quote DCAP-verifies,
 * REPORTDATA binds `signing address (right-padded to 32) ‖ nonce` — or, where
 * the report carries a TLS fingerprint, `sha256(address ‖ fingerprint) ‖
 * nonce` with the fingerprint equal to the TLS key actually observed — the
 * event log replays to the quoted RTMRs, and `info`'s compose hash and
 * `app_compose` agree with the replayed log. The NVIDIA payload is left to
 * the caller (the GPU verifier needs the session layer's collateral).
 * Every step is a named check; nothing throws.
 */
import { createHash } from "node:crypto";
import { bytesToHex, ethereumAddress, hexToBytes } from "../../aci/mod.ts";
import { type Check, check } from "../checks.ts";
import { checkReportData } from "../dstack/report_data.ts";
import { verifyEventLog } from "../dstack/event_log.ts";
import { type CollateralSource, verifyTdxQuoteWithSource } from "../tdx/collateral_source.ts";
import type { TdxVerified } from "../tdx/dcap.ts";
import { parseTdxQuote, type TdReportHex, tdReportToHex } from "../tdx/quote.ts";
import type { NearComponent, NearReport } from "./report.ts";

export interface NearVerifyOptions {
  /** The 32-byte nonce sent, 64 lowercase hex. */
  nonce: string;
  tdx: { source: CollateralSource; rootCaDer?: Uint8Array };
  /** Epoch ms to judge collateral at. */
  now: number;
  /** The TLS key observed on the connection to the gateway (SPKI sha256 hex), when there was one. */
  observedSpkiSha256?: string;
  /** Require the gateway's REPORTDATA to bind the observed TLS key (the upstream attester does). */
  requireTlsBinding?: boolean;
}

/** What one component established. */
export interface ComponentVerdict {
  subject: string;
  checks: Check[];
  /** The DCAP result when it passed. */
  tdx: TdxVerified | null;
  /** Registers from the quote body (also when DCAP failed), or null if unparsable. */
  registers: TdReportHex | null;
  composeHash: string | null;
  appId: string | null;
  tlsBound: boolean;
}

const enc = new TextEncoder();

function appIdOf(events: readonly { imr: number; event: string; eventPayload: Uint8Array }[]) {
  const e = events.find((x) => x.imr === 3 && x.event === "app-id");
  return e ? bytesToHex(e.eventPayload) : null;
}

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
async function verifyComponent(
  c: NearComponent,
  opts: NearVerifyOptions,
  bindTls: boolean,
): Promise<ComponentVerdict> {
  const checks: Check[] = [];
  const name = (s: string) => `${c.subject}.${s}`;
  if (c.signingPublicKey !== null) {
    let derived: string | null = null;
    try {
      derived = ethereumAddress(hexToBytes(c.signingPublicKey.replace(/^0x/, "")));
    } catch {
      derived = null;
    }
    checks.push(check(
      name("signing_address"),
      derived !== null && derived.toLowerCase() === c.signingAddress.toLowerCase(),
      derived === null
        ? "signing_public_key is not a secp256k1 key"
        : `signing_public_key derives to ${derived}`,
    ));
  }
  checks.push(check(
    name("nonce"),
    c.requestNonce === null || c.requestNonce.toLowerCase() === opts.nonce,
    c.requestNonce === null ? "no request_nonce echoed" : `echoes ${c.requestNonce}`,
  ));

  const tdx = await verifyTdxQuoteWithSource(c.quote, {
    source: opts.tdx.source,
    now: () => opts.now,
    rootCaDer: opts.tdx.rootCaDer,
  });
  checks.push(check(
    name("tdx_quote"),
    tdx.ok,
    tdx.ok
      ? `TDX v${tdx.version} quote verified (FMSPC ${tdx.fmspc}, TCB ${tdx.tcbStatus})`
      : `rejected at ${tdx.stage}: ${tdx.reason}`,
  ));
  const parsed = parseTdxQuote(c.quote);
  const report = tdx.ok ? tdx.report : parsed.ok ? parsed.quote.report : null;
  const registers = tdx.ok ? tdx.reportHex : null;

  let tlsBound = false;
  if (report === null) {
    checks.push(check(name("report_data"), false, "quote body unparsable"));
  } else {
    const nonce = hexToBytes(opts.nonce);
    const fp = c.tlsFingerprint;
    if (fp !== null) {
      const r = checkReportData(report.reportData, {
        version: "v2",
        address: c.addressBytes,
        spkiSha256: hexToBytes(fp),
        nonce,
      });
      checks.push(check(
        name("report_data"),
        r.ok,
        r.ok ? "binds sha256(signing address ‖ TLS fingerprint) ‖ nonce" : r.reason,
      ));
      const observed = opts.observedSpkiSha256;
      if (observed !== undefined) {
        tlsBound = r.ok && observed.toLowerCase() === fp;
        checks.push(check(
          name("tls_fingerprint"),
          tlsBound,
          tlsBound ? `equals the observed TLS key ${fp}` : `is ${fp}, observed ${observed}`,
        ));
      }
    } else {
      const r = checkReportData(report.reportData, {
        version: "v1",
        address: c.addressBytes,
        nonce,
      });
      checks.push(check(
        name("report_data"),
        r.ok,
        r.ok ? "binds the signing address (padded to 32) ‖ nonce" : r.reason,
      ));
    }
    if (bindTls && !tlsBound) {
      checks.push(check(
        name("tls_binding"),
        false,
        fp === null
          ? "the report carries no tls_cert_fingerprint: the TLS channel is not bound to the quote"
          : "the quote does not bind the TLS key this connection uses",
      ));
    }
  }

  let composeHash: string | null = null;
  let appId: string | null = null;
  if (report !== null && c.eventLog !== null) {
    const replay = verifyEventLog(c.eventLog, report.rtmrs);
    checks.push(check(
      name("event_log"),
      replay.ok,
      replay.ok ? `${replay.events.length} events replay to RTMR0-3` : replay.reason,
    ));
    if (replay.ok) {
      composeHash = replay.composeHash;
      appId = appIdOf(replay.events);
    }
  } else {
    checks.push(check(name("event_log"), false, "no event log: compose hash not established"));
  }
  if (composeHash !== null) {
    const agree = c.infoComposeHash === null || c.infoComposeHash.toLowerCase() === composeHash;
    const composeOk = c.appCompose === null ||
      createHash("sha256").update(enc.encode(c.appCompose)).digest("hex") === composeHash;
    checks.push(check(
      name("compose_hash"),
      agree && composeOk,
      !agree
        ? `info.compose_hash ${c.infoComposeHash} differs from the log's ${composeHash}`
        : !composeOk
        ? "sha256(app_compose) differs from the measured compose hash"
        : `measured compose hash ${composeHash}`,
    ));
  }
  return {
    subject: c.subject,
    checks,
    tdx: tdx.ok ? tdx : null,
    registers: registers ?? (report ? tdReportToHex(report) : null),
    composeHash,
    appId,
    tlsBound,
  };
}

/** Verifies every component; the gateway's TLS binding is required when `requireTlsBinding`. */
export async function verifyNearAiReport(
  report: NearReport,
  opts: NearVerifyOptions,
): Promise<{ checks: Check[]; gateway: ComponentVerdict; models: ComponentVerdict[] }> {
  const gateway = await verifyComponent(report.gateway, opts, opts.requireTlsBinding === true);
  const models: ComponentVerdict[] = [];
  for (const m of report.models) models.push(await verifyComponent(m, opts, false));
  return { checks: [gateway, ...models].flatMap((v) => v.checks), gateway, models };
}
