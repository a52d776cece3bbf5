/**
 * Everything a request handler may use: defined here, beside the handlers
 * that consume it, and composed once by `app/assemble.ts` from what main.ts
 * (or a test) passes in, so no handler reaches for globals or imports upward.
 */
import type { AnsweredExchange, PolicyRegistry, SessionStore } from "../sessions/mod.ts";
import type { ConfigControl } from "./config_control.ts";
import type { CacheSalter, ForwardDeps, VerificationState } from "../routing/mod.ts";
import type { GatewayConfig } from "../config/mod.ts";
import type { Catalog } from "../catalog/mod.ts";
import type { Admitter, KeyAdmin, PreAdmission } from "../admission/mod.ts";
import type { Authenticator } from "../keys/mod.ts";
import type { GroupCommitter } from "../store/mod.ts";
import type { ReceiptService } from "../receipts/mod.ts";
import type { RequestInfo } from "./request_info.ts";
import type {
  CanonicalReport,
  Identity,
  ReportCollateral,
  ReportService,
} from "../attestation/mod.ts";
import type { StreamTicker } from "./stream_ticker.ts";
import type { GatewayMetrics, OperatorAuth } from "../operator/mod.ts";
import type { BodyBudget, DeadlineWheel } from "../http/mod.ts";
import type { E2eeDeps } from "../e2ee/mod.ts";
import type { TransparencyLog } from "../tlog/mod.ts";
import type { TextCounts } from "../tokens/mod.ts";

export type LogLine = Record<string, unknown>;

/** The live configuration and what is derived from it; the store. */
export interface ConfigDeps {
  config: GatewayConfig;
  kv: Deno.Kv;
  catalog: Catalog;
  /** The live configuration (admin API, SIGHUP): app/live_config.ts. */
  configControl?: ConfigControl;
}

/** Clocks, ids and randomness: main.ts's, passed in (only main.ts touches the environment). */
export interface ClockDeps {
  /** The wall clock, epoch ms. */
  now: () => number;
  /** A monotonic clock in ms (phase timings, stream deadlines); main.ts: `performance.now`. */
  monotonic: () => number;
  randomBytes: (n: number) => Uint8Array;
  /** Request and trace ids; main.ts: `crypto.randomUUID`. */
  randomUUID: () => string;
}

/** Logs: never bodies, prompts, completions or keys. */
export interface LogDeps {
  log: (line: LogLine) => void;
  /** The one JSON log line per request (and its count in the metrics). */
  logRequest: (info: RequestInfo, status: number, outcome?: string) => void;
  /** With OpenTelemetry on: the context of the request being handled (app/otel.ts). */
  traceContext?: () => unknown;
}

/** Keys and what they may spend. */
export interface AccountDeps {
  auth: Authenticator;
  admitter: Admitter;
  /** Repeats admission's requests-per-minute refusal before a body is read. */
  preAdmission: PreAdmission;
  /** Key administration (admin API, `/v1/key`, `/v1/usage`; the keys CLI runs the same). */
  keyAdmin: KeyAdmin;
  /**
   * Names the authenticated key in the request's log line (`key_id`). Set by
   * the app (app/app.ts) for the requests it dispatches; absent elsewhere.
   */
  noteKey?: (req: Request, keyId: string) => void;
}

/** The request path's bounds: bodies in flight, deadlines, open streams. */
export interface RequestPathDeps {
  /** Body bytes being read and parsed at once, globally and per key. */
  bodyBudget: BodyBudget;
  /** The request path's deadlines (body, upstream head and body): one runtime timer for all. */
  deadlines: DeadlineWheel;
  /** The idle and keep-alive deadlines of every open stream, on one timer. */
  streamTicker: StreamTicker;
  /** Each key's earlier token counts of long texts (tokens/text_counts.ts). */
  promptCounts: TextCounts;
}

/** What the gateway signs and keeps: receipts, their durable commits, the transparency log. */
export interface RecordDeps {
  committer: GroupCommitter;
  receipts: ReceiptService;
  /** The transparency log (C2SP tlog-tiles under /v1/aci/log/). */
  tlog: TransparencyLog;
}

/** The gateway's own attestation: keyset, reports and their collateral. */
export interface AttestationDeps {
  identity: Identity;
  reports: ReportService;
  /** The collateral of one of the gateway's own (archived) reports, for evidence bundles. */
  reportCollateral: (report: CanonicalReport) => Promise<ReportCollateral>;
  /** E2EE v2: the current keyset's keys and the shared replay guard. */
  e2ee: E2eeDeps;
}

/** Upstreams: forwarding, attested sessions and their verification state. */
export interface UpstreamDeps {
  forward: ForwardDeps;
  sessions: SessionStore;
  verification: (provider: string) => VerificationState | null;
  /** Operator view of every confidential upstream's verification (for `/healthz`). */
  verificationSnapshot: () => Record<string, unknown>;
  /** Reports a served answer (NEAR AI's per-answer signature is checked after it); optional. */
  answered?: (a: AnsweredExchange) => void;
  /** Measurement policies in force; null when upstreams are not verified. */
  measurementPolicies: PolicyRegistry | null;
  /** Per-key prefix-cache salts for upstreams that take one (routing/cache_salt.ts). */
  cacheSalt: CacheSalter;
}

/** The operator surface. */
export interface OperatorDeps {
  /** The operator token check; null when no token is configured (admin API off). */
  operator: OperatorAuth | null;
  metrics: GatewayMetrics;
}

/**
 * Everything a request handler may use, in groups by concern: a handler or
 * stage names the groups it needs (`ClockDeps & RecordDeps`, …); the app
 * builds the one object that has them all, once.
 */
export interface GatewayContext
  extends
    ConfigDeps,
    ClockDeps,
    LogDeps,
    AccountDeps,
    RequestPathDeps,
    RecordDeps,
    AttestationDeps,
    UpstreamDeps,
    OperatorDeps {}
