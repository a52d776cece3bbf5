/**
 * Everything a request handler may use, assembled once by main.ts (or a
 * test) and passed down: no module below reaches for globals.
 */
import type { GatewayConfig } from "../config/schema.ts";
import type { Catalog } from "../catalog/catalog.ts";
import type { Authenticator } from "../accounts/keys.ts";
import type { Admitter } from "../accounts/admission.ts";
import type { GroupCommitter } from "../store/group_commit.ts";
import type { ForwardDeps } from "../upstream/forward.ts";
import type { VerificationState } from "../routing/select.ts";
import type { ReceiptService } from "../receipts/service.ts";
import type { RequestInfo } from "../handlers/pipeline.ts";
import type { Identity } from "../attestation/identity.ts";
import type { ReportService } from "../attestation/reports.ts";
import type { SessionStore } from "../sessions/store.ts";
import type { StreamTicker } from "../handlers/stream_ticker.ts";
import type { E2eeDeps } from "../e2ee/service.ts";

export type LogLine = Record<string, unknown>;

export interface GatewayContext {
  config: GatewayConfig;
  kv: Deno.Kv;
  catalog: Catalog;
  auth: Authenticator;
  admitter: Admitter;
  committer: GroupCommitter;
  receipts: ReceiptService;
  identity: Identity;
  reports: ReportService;
  sessions: SessionStore;
  forward: ForwardDeps;
  /** E2EE v2: the current keyset's keys and the shared replay guard. */
  e2ee: E2eeDeps;
  /** The idle and keep-alive deadlines of every open stream, on one timer. */
  streamTicker: StreamTicker;
  verification: (provider: string) => VerificationState | null;
  /** Operator view of every confidential upstream's verification (for `/healthz`). */
  verificationSnapshot: () => Record<string, unknown>;
  now: () => number;
  randomBytes: (n: number) => Uint8Array;
  log: (line: LogLine) => void;
  /** The one JSON log line per request (never bodies, prompts, completions or keys). */
  logRequest: (info: RequestInfo, status: number, outcome?: string) => void;
}
