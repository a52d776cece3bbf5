/**
 * One inference request's state, shared by the pipeline's stages
 * (`pipeline.ts`): what each stage produced, and the only writer of the
 * request's log facts (`RequestInfo`) on the inference path. It is also the
 * `ForwardPlan` failover reads and its `AttemptLog` sink's companion, so
 * forwarding makes no per-request closures.
 */
import { sha256Prefixed } from "../aci/mod.ts";
import {
  type BodyTicket,
  type ErrorFormat,
  type GatewayError,
  type JsonDocument,
  spliceJson,
} from "../http/mod.ts";
import {
  type AttemptRecord,
  type Candidate,
  type ForwardPlan,
  saltDigest,
  withSalt,
} from "../routing/mod.ts";
import type { ReceiptRecorder } from "../receipts/mod.ts";
import type { Admission } from "../admission/mod.ts";
import type { KeyRecord } from "../keys/mod.ts";
import type { ScopedCounts } from "../tokens/mod.ts";
import type { OpenedRequest } from "../e2ee/mod.ts";
import type { GatewayContext } from "./context.ts";
import type { InferencePlan } from "./plan.ts";
import type { RequestInfo } from "./request_info.ts";

/** What the pipeline needs of an endpoint: its path, error envelope and plan. */
export interface InferenceEndpoint {
  endpoint: string;
  errorFormat: ErrorFormat;
  /** `reuse`: the requesting key's earlier counts of long texts (tokens/text_counts.ts). */
  plan(body: unknown, deps: PlanDeps, reuse?: ScopedCounts): InferencePlan;
}

/**
 * What a plan may read: the live catalog and configuration, and the clock and
 * random bytes a translated answer's ids and timestamps need. The context
 * itself is passed (it satisfies this), so a live swap is seen and nothing is
 * copied per request.
 */
export type PlanDeps = Pick<GatewayContext, "catalog" | "config" | "now" | "randomBytes">;

const encoder = new TextEncoder();

export class InferenceState implements ForwardPlan {
  // Set by intake.
  key: KeyRecord | null = null;
  rec: ReceiptRecorder | null = null;
  bodyTicket: BodyTicket | null = null;
  /** Refused by pre-admission itself: not charged again to the key's bucket. */
  refusedUnread = false;
  opened: OpenedRequest | null = null;
  /** The body as the upstream may get it (decrypted when E2EE), and its hash. */
  bytes: Uint8Array = EMPTY;
  receivedHash = "";
  /** Parsed once (`parsed` its value); null when E2EE restored the body as a value. */
  doc: JsonDocument | null = null;
  parsed: unknown = null;
  // Set by route.
  plan: InferencePlan | null = null;
  candidates: Candidate[] = [];
  verificationRequired = false;
  modelId = "";
  // Set by admit.
  admission: Admission | null = null;
  servedModel = "";
  /** The upstream body per route: built once, dropped once forwarded. */
  readonly bodies = new Map<string, Uint8Array<ArrayBuffer>>();
  readonly headers: Headers;
  readonly signal: AbortSignal;

  constructor(
    readonly req: Request,
    readonly ctx: GatewayContext,
    readonly ep: InferenceEndpoint,
    readonly info: RequestInfo,
  ) {
    this.headers = new Headers({
      "x-service-trace-id": info.traceId,
      "x-request-id": info.requestId,
    });
    // The client's own signal: a listener on it would live as long as the request.
    this.signal = req.signal;
  }

  get withholdUpstreamText(): boolean {
    // E2EE: an upstream's error text may echo the decrypted prompt; show none of it.
    return this.opened !== null;
  }

  /** Connection-pool partition: the key's digest. */
  get partition(): string | undefined {
    return this.key?.digest;
  }

  path(c: Candidate): string {
    return this.plan!.upstreamPath(c);
  }

  /** The exact bytes for a candidate: spliced from the client's when parsed, salted if it takes one. */
  body(c: Candidate): Uint8Array<ArrayBuffer> {
    let b = this.bodies.get(c.routeId);
    if (!b) {
      let upstreamBody = this.plan!.upstreamBody(c);
      if (c.provider.cache_salt && this.ep.endpoint !== "/v1/embeddings") {
        const salt = this.ctx.cacheSalt.saltFor(this.key!.digest);
        upstreamBody = withSalt(upstreamBody, salt);
        this.rec!.cacheSalted(c, saltDigest(salt));
      }
      b = this.doc
        ? spliceJson(this.doc, upstreamBody)
        : encoder.encode(JSON.stringify(upstreamBody));
      this.bodies.set(c.routeId, b);
    }
    return b;
  }

  /** The client's bytes sent as they are (nothing changed) were hashed on receipt. */
  bodyHash(b: Uint8Array): string {
    return b === this.bytes ? this.receivedHash : sha256Prefixed(b);
  }

  onAttempt(a: AttemptRecord): void {
    (this.info.attempts ??= []).push({ provider: a.provider, outcome: a.outcome });
    const { catalog, verification, log } = this.ctx;
    const p = catalog.providers.get(a.provider);
    if (p?.confidential && verification(a.provider)?.verified !== true) {
      log({
        level: "warn",
        msg: "prompt sent to an unverified confidential upstream " +
          "(confidential.allow_unverified is set)",
        upstream: a.provider,
        request_id: this.info.requestId,
      });
    }
  }

  // The log facts: every write the inference path makes to `RequestInfo` goes through these.

  /** Adds a phase's time since `t0` (monotonic) to the `Server-Timing` phases. */
  timed(name: string, t0: number): void {
    const phases = this.info.phases;
    phases[name] = (phases[name] ?? 0) + this.ctx.monotonic() - t0;
  }

  noteKey(keyId: string): void {
    this.info.keyId = keyId;
  }

  noteReceipt(id: string | null): void {
    this.info.receiptId = id;
  }

  noteModel(model: string): void {
    this.info.model = model;
  }

  noteAttemptsStarted(): void {
    this.info.attempts = [];
  }

  noteProvider(provider: string): void {
    this.info.provider = provider;
  }

  noteRefusal(err: GatewayError, code: string | null): void {
    this.info.refusal = err.kind;
    this.info.errorCode = code;
  }
}

const EMPTY = new Uint8Array(0);
