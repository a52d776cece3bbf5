/**
 * A loopback HTTPS upstream shaped like a dstack vllm-proxy node, for
 * end-to-end tests of verified upstreams: the demo chat API plus
 * `GET /v1/attestation/report` answering with a TDX quote minted by the test
 * forge that binds its signing address, ITS OWN TLS key (report data v2) and
 * the request nonce, and a dstack event log (with a compose-hash event)
 * that replays to the quote's RTMRs. Knobs produce the negative cases: a
 * quote binding another TLS key, the v1 layout, a tampered event log.
 * Test-only: nothing here is evidence of hardware.
 */
import { createHash } from "node:crypto";
import { generateWorkloadKeys } from "../../src/aci/signer.ts";
import { bytesToHex, hexToBytes } from "../../src/aci/hex.ts";
import { type DemoUpstream, startDemoUpstream } from "../../src/demo/upstream.ts";
import {
  DSTACK_RUNTIME_EVENT_TYPE,
  type DstackEvent,
  replayRtmrs,
  runtimeEventDigest,
} from "../../src/verify/dstack/event_log.ts";
import { expectedReportData } from "../../src/verify/dstack/report_data.ts";
import type { MintOptions, TdxForge } from "./tdx_forge.ts";
import { issueServerCert, type TestCa } from "./tls_servers.ts";

/** Default compose hash the event log carries (sha256 of a fixed compose file name). */
export const DEFAULT_COMPOSE_HASH = createHash("sha256").update("test-app-compose.json").digest(
  "hex",
);

export interface DstackUpstreamOptions {
  forge: TdxForge;
  /** CA that issues the upstream's TLS certificate. */
  ca: TestCa;
  /** Bind the upstream's own SPKI in report data (default true); false binds another key. */
  bindSpki?: boolean;
  /** Certificate hosts; default `localhost` and `127.0.0.1`. */
  hosts?: string[];
  /** Report-data layout; default "v2". "v1" is the legacy layout that binds no TLS key. */
  layout?: "v1" | "v2";
  /** Compose hash in the event log (64 hex); default {@link DEFAULT_COMPOSE_HASH}. */
  composeHash?: string;
  /** "match" (default), "tampered" (a payload changed after quoting) or "none" (no event_log member). */
  eventLog?: "match" | "tampered" | "none";
  /**
   * "classic" (default: every digest served) or "0.6" (dstack ≥ 0.6: runtime events
   * served with `"digest": ""`, the log as JSON text, as the guest agent returns it).
   */
  eventLogFormat?: "classic" | "0.6";
  /** Extra quote fields (e.g. `mrTd`); RTMRs come from the event log unless given here. */
  mint?: MintOptions;
  /** The report's `nvidia_payload` (NRAS request JSON text); default null (no GPU evidence). */
  nvidiaPayload?: string | null;
  /** Demo upstream name; default "dstack". */
  name?: string;
  models?: string[];
}

export interface DstackUpstream {
  /** `https://127.0.0.1:PORT` (no `/v1`). */
  url: string;
  /** SPKI SHA-256 of the key the upstream serves TLS with. */
  spkiSha256: string;
  /** Trust anchor for its certificate. */
  caPem: string;
  /** EIP-55 signing address the quote binds. */
  signingAddress: string;
  composeHash: string;
  /** The demo upstream behind it (stats, faults). */
  demo: DemoUpstream;
  /** Attestation requests served so far (not counted in `demo.stats`). */
  attestationRequests(): number;
  close(): Promise<void>;
}

const enc = new TextEncoder();

function runtimeEvent(name: string, payload: Uint8Array): DstackEvent {
  const e = { imr: 3, eventType: DSTACK_RUNTIME_EVENT_TYPE, event: name, eventPayload: payload };
  return { ...e, digest: runtimeEventDigest(e) };
}

function toJson(events: DstackEvent[], format: "classic" | "0.6"): Record<string, unknown>[] {
  return events.map((e) => ({
    imr: e.imr,
    event_type: e.eventType,
    digest: format === "0.6" && e.eventType === DSTACK_RUNTIME_EVENT_TYPE
      ? ""
      : bytesToHex(e.digest),
    event: e.event,
    event_payload: bytesToHex(e.eventPayload),
  }));
}

/** Starts the upstream on loopback. */
export async function startDstackUpstream(opts: DstackUpstreamOptions): Promise<DstackUpstream> {
  const cert = await issueServerCert(opts.ca, { hosts: opts.hosts });
  const keys = generateWorkloadKeys();
  const composeHash = opts.composeHash ?? DEFAULT_COMPOSE_HASH;
  const events: DstackEvent[] = [
    {
      imr: 0,
      eventType: 0x80000001,
      digest: new Uint8Array(createHash("sha384").update("firmware").digest()),
      event: "",
      eventPayload: new Uint8Array(0),
    },
    runtimeEvent("system-preparing", new Uint8Array(0)),
    runtimeEvent("app-id", enc.encode("test-app")),
    runtimeEvent("compose-hash", hexToBytes(composeHash)),
  ];
  const rtmrs = replayRtmrs(events);
  let served = events;
  if (opts.eventLog === "tampered") {
    // A consistent-looking event (digest recomputed) that the quote never measured.
    const other = createHash("sha256").update("another compose").digest();
    served = [...events.slice(0, 3), runtimeEvent("compose-hash", new Uint8Array(other))];
  }
  const bindSpki = opts.bindSpki ?? true;
  const boundSpki = bindSpki
    ? hexToBytes(cert.spkiSha256)
    : new Uint8Array(createHash("sha256").update("some other TLS key").digest());
  let attestations = 0;

  const report = (nonceHex: string): Record<string, unknown> => {
    const nonce = hexToBytes(nonceHex);
    const rd = opts.layout === "v1"
      ? expectedReportData({ version: "v1", address: keys.ethereumAddressBytes, nonce })
      : expectedReportData({
        version: "v2",
        address: keys.ethereumAddressBytes,
        spkiSha256: boundSpki,
        nonce,
      });
    if (!rd.ok) throw new Error(rd.reason);
    const quote = opts.forge.mintQuote(rd.reportData, { rtmrs, ...opts.mint });
    return {
      signing_address: keys.ethereumAddress,
      signing_algo: "ecdsa",
      request_nonce: nonceHex,
      intel_quote: bytesToHex(quote),
      nvidia_payload: opts.nvidiaPayload ?? null,
      ...(opts.eventLog === "none" ? {} : {
        event_log: opts.eventLogFormat === "0.6"
          ? JSON.stringify(toJson(served, "0.6"))
          : toJson(served, "classic"),
      }),
      info: { app_name: "test-app", compose_hash: composeHash },
    };
  };

  const demo = await startDemoUpstream({
    name: opts.name ?? "dstack",
    models: opts.models,
    tls: { cert: cert.certPem, key: cert.keyPem },
    extraRoutes: (req) => {
      const url = new URL(req.url);
      if (url.pathname !== "/v1/attestation/report") return null;
      attestations++;
      const nonce = url.searchParams.get("nonce") ?? "";
      if (!/^[0-9a-f]{64}$/.test(nonce)) {
        return new Response(JSON.stringify({ error: { message: "bad nonce" } }), { status: 400 });
      }
      return new Response(JSON.stringify(report(nonce)), {
        headers: { "content-type": "application/json" },
      });
    },
  });
  return {
    url: demo.url,
    spkiSha256: cert.spkiSha256,
    caPem: opts.ca.certPem,
    signingAddress: keys.ethereumAddress,
    composeHash,
    demo,
    attestationRequests: () => attestations,
    close: () => demo.close(),
  };
}
