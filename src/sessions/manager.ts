/**
 * Keeps every confidential upstream's verification current, in the
 * background: verify at start-up, re-verify before the session expires and
 * whenever a channel check fails, retry failures with backoff. The request
 * path only reads `state()`; it never waits on verification. A failed or
 * expired upstream is not verified until a verification passes again.
 */
import type { TeeAttested, VerificationState } from "../routing/mod.ts";
import type { ProviderConfig } from "../config/mod.ts";
import type {
  AttestationOutcome,
  AttesterDeps,
  SessionDocument,
  UpstreamAttester,
} from "./types.ts";
import type { SessionStore } from "./store.ts";
import type { PolicyRegistry } from "./policy/registry.ts";
import { matchPolicy, subjectsOf } from "./policy/match.ts";
import { recordingDeps } from "./collateral_recorder.ts";
import { withCollateral } from "./collateral_claim.ts";
import {
  applyMeasurementPolicy,
  type FailClosedWarning,
  failClosedWarnings,
} from "./policy/apply.ts";

/** Default lead time of fail-closed warnings (policy entry closing, evidence expiring). */
export const DEFAULT_POLICY_WARN_SECONDS = 86_400;

/** One confidential upstream as the operator's `/healthz` shows it. */
export type OperatorUpstreamView =
  | {
    verified: true;
    session_id: string;
    spki_sha256: string | null;
    verifier_id: string;
    tee_attested: string;
    expires_at: number;
    measurement_policy?: unknown;
    warnings?: FailClosedWarning[];
  }
  | { verified: false; reason: string };

export interface VerificationManager {
  state(provider: string): VerificationState | null;
  /** Verify every confidential upstream once (start-up). */
  start(): Promise<void>;
  /** Verify one upstream now (also used by tests and operators). */
  verify(provider: string): Promise<VerificationState>;
  /** A binding check failed: drop the session and re-verify at once. */
  invalidate(provider: string, reason: string): void;
  /** Operator view: every confidential upstream's state, with its fail-closed warnings. */
  snapshot(): Record<string, OperatorUpstreamView>;
  /** The current verified session's document and pinned key, or null. */
  current(provider: string): { doc: SessionDocument; spkiSha256: string } | null;
  /** Seconds until a verified upstream fails closed unless re-verified under newer policy/evidence. */
  failClosedIn(provider: string): number | null;
  stop(): void;
}

interface Current {
  state: VerificationState;
  expiresAtMs: number;
  /** The verified session (for re-checking it against a new policy) and when its policy entry closes. */
  doc?: SessionDocument;
  leavesAt?: number | null;
}

export interface ManagerOptions {
  providers: ProviderConfig[];
  attesterFor: (p: ProviderConfig) => UpstreamAttester;
  deps: AttesterDeps;
  store: SessionStore;
  replicaId: string;
  now: () => number;
  log: (line: Record<string, unknown>) => void;
  /** Upper bound on one verification. */
  timeoutMs?: number;
  /** Measurement policies in force (signed by an operator key); absent: none. */
  policies?: PolicyRegistry;
}

const MAX_BACKOFF_MS = 60_000;

/** Creates the manager; verification begins with `start()`. */
export function createVerificationManager(o: ManagerOptions): VerificationManager {
  return new Verifications(o);
}

/** Every confidential upstream's verification state, its re-verify timers and retries. */
class Verifications implements VerificationManager {
  #o: ManagerOptions;
  #confidential: ProviderConfig[];
  #current = new Map<string, Current>();
  #timers = new Map<string, ReturnType<typeof setTimeout>>();
  #inflight = new Map<string, Promise<VerificationState>>();
  #failures = new Map<string, number>();
  #stopped = false;

  constructor(o: ManagerOptions) {
    this.#o = o;
    this.#confidential = o.providers.filter((p) => p.confidential);
    for (const p of this.#confidential) {
      this.#current.set(p.name, {
        state: { verified: false, reason: "verification pending" },
        expiresAtMs: 0,
      });
    }
    o.policies?.onChange((name) => this.#policyChanged(name));
  }

  state(name: string): VerificationState | null {
    const c = this.#current.get(name);
    if (!c) return null;
    if (c.state.verified && c.expiresAtMs <= this.#o.now()) {
      this.#run(name).catch(() => {});
      return { verified: false, reason: "session expired; re-verifying" };
    }
    return c.state;
  }

  async start(): Promise<void> {
    await Promise.all(this.#confidential.map((p) => this.#run(p.name)));
  }

  verify(name: string): Promise<VerificationState> {
    return this.#run(name);
  }

  invalidate(name: string, reason: string): void {
    if (!this.#provider(name)) return;
    this.#current.set(name, { state: { verified: false, reason }, expiresAtMs: 0 });
    this.#o.store.clearCurrent(name, this.#o.replicaId).catch(() => {});
    this.#o.log({ level: "warn", msg: "upstream session invalidated", upstream: name, reason });
    this.#run(name).catch(() => {});
  }

  snapshot(): ReturnType<VerificationManager["snapshot"]> {
    const out: ReturnType<VerificationManager["snapshot"]> = {};
    for (const [name, c] of this.#current) {
      const p = this.#provider(name);
      const warnings = p ? this.#warningsOf(p, c) : [];
      const policy = c.doc?.claims.extra?.["measurement_policy"];
      const st = c.state;
      // Named as the rest of the gateway's JSON (snake_case), not as the state's fields.
      out[name] = st.verified
        ? {
          verified: true,
          session_id: st.sessionId,
          spki_sha256: st.spkiSha256,
          verifier_id: st.verifierId,
          tee_attested: st.teeAttested,
          expires_at: Math.floor(c.expiresAtMs / 1000),
          ...(policy ? { measurement_policy: policy } : {}),
          ...(warnings.length ? { warnings } : {}),
        }
        : { verified: false, reason: st.reason };
    }
    return out;
  }

  current(name: string): { doc: SessionDocument; spkiSha256: string } | null {
    const c = this.#current.get(name);
    if (!c || !c.state.verified || !c.doc || c.expiresAtMs <= this.#o.now()) return null;
    return c.state.spkiSha256 ? { doc: c.doc, spkiSha256: c.state.spkiSha256 } : null;
  }

  failClosedIn(name: string): number | null {
    const c = this.#current.get(name);
    const p = this.#provider(name);
    if (!c || !p || !c.state.verified || !c.doc) return null;
    const times = failClosedWarnings(c.doc, c.leavesAt ?? null, 0, Infinity).map((w) => w.at);
    return times.length ? Math.min(...times) - this.#o.now() / 1000 : null;
  }

  stop(): void {
    this.#stopped = true;
    for (const t of this.#timers.values()) clearTimeout(t);
    this.#timers.clear();
  }

  #provider(name: string): ProviderConfig | undefined {
    return this.#confidential.find((x) => x.name === name);
  }

  #warningsOf(p: ProviderConfig, c: Current): FailClosedWarning[] {
    const warnSeconds = p.confidential?.measurement_policy?.warn_before_seconds ??
      DEFAULT_POLICY_WARN_SECONDS;
    return c.state.verified && c.doc
      ? failClosedWarnings(c.doc, c.leavesAt ?? null, Math.floor(this.#o.now() / 1000), warnSeconds)
      : [];
  }

  // A new policy applies at once: a session it does not accept ends now; one it accepts is
  // re-verified so the session's claims name the new version.
  #policyChanged(name: string): void {
    const p = this.#provider(name);
    const c = this.#current.get(name);
    if (!p || !c) return;
    const installed = this.#o.policies?.get(name);
    if (c.state.verified && c.doc && installed) {
      const m = matchPolicy(installed.policy, subjectsOf(c.doc), Math.floor(this.#o.now() / 1000));
      if (!m.ok) {
        this.#fail(p, m.reason);
        return;
      }
    }
    this.#run(name).catch(() => {});
  }

  /** One verification per upstream at a time: callers share the one in flight. */
  #run(name: string): Promise<VerificationState> {
    const p = this.#provider(name);
    if (!p) return Promise.resolve({ verified: false, reason: "not a confidential upstream" });
    let pending = this.#inflight.get(name);
    if (!pending) {
      pending = this.#attempt(p).finally(() => this.#inflight.delete(name));
      this.#inflight.set(name, pending);
    }
    return pending;
  }

  #schedule(name: string, delayMs: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#timers.get(name));
    const t = setTimeout(() => {
      this.#timers.delete(name);
      this.#run(name).catch(() => {});
    }, Math.max(0, delayMs));
    // Background re-verification must not keep a finished process alive.
    Deno.unrefTimer(t);
    this.#timers.set(name, t);
  }

  #fail(p: ProviderConfig, reason: string): VerificationState {
    const state: VerificationState = { verified: false, reason };
    this.#current.set(p.name, { state, expiresAtMs: 0 });
    this.#o.store.clearCurrent(p.name, this.#o.replicaId).catch(() => {});
    const n = (this.#failures.get(p.name) ?? 0) + 1;
    this.#failures.set(p.name, n);
    this.#o.log({
      level: "warn",
      msg: "upstream verification failed",
      upstream: p.name,
      reason,
      attempt: n,
    });
    this.#schedule(p.name, Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.min(n - 1, 6)));
    return state;
  }

  /** Runs the upstream's attester under the timeout, then accepts or fails its outcome. */
  async #attempt(p: ProviderConfig): Promise<VerificationState> {
    const o = this.#o;
    const verifier = o.attesterFor(p);
    const timeout = o.timeoutMs ?? 30_000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    // This verification's own copy of the deps: what it consumed is archived with the session.
    const recording = recordingDeps(o.deps, o.now());
    const outcome = await Promise.race([
      verifier.verify({ name: p.name, baseUrl: p.base_url, provider: p }, recording.deps),
      new Promise<{ ok: false; reason: string }>((r) => {
        timer = setTimeout(
          () => r({ ok: false, reason: `verification timed out after ${timeout} ms` }),
          timeout,
        );
      }),
    ]).catch((e) => ({ ok: false as const, reason: `verifier error: ${String(e).slice(0, 200)}` }));
    clearTimeout(timer);
    if (this.#stopped) return { verified: false, reason: "stopped" };
    if (!outcome.ok) return this.#fail(p, outcome.reason);
    return await this.#accept(p, outcome, recording.collector.archive());
  }

  /** A verifier's success, checked against policy and the provider's demands, stored and scheduled. */
  async #accept(
    p: ProviderConfig,
    outcome: Extract<AttestationOutcome, { ok: true }>,
    archive: Parameters<typeof withCollateral>[1],
  ): Promise<VerificationState> {
    const o = this.#o;
    // Whatever the verifier, the upstream's measurements must be in its policy (when it has one).
    const applied = applyMeasurementPolicy(
      outcome.document,
      o.policies?.get(p.name),
      p.confidential?.measurement_policy?.required === true,
      Math.floor(o.now() / 1000),
    );
    if (!applied.ok) return this.#fail(p, applied.reason);
    const { doc, collateral } = withCollateral(applied.document, archive);
    // Whatever the verifier, a provider that requires GPU evidence needs it proven.
    const gpu = doc.claims.gpu_attested;
    if (
      p.confidential?.require_gpu &&
      !(gpu.status === "asserted" && gpu.source === "hardware_proven")
    ) {
      return this.#fail(p, `GPU evidence required but the session's gpu_attested is ${gpu.status}`);
    }
    const expiresAtMs = doc.expires_at * 1000;
    if (expiresAtMs <= o.now()) return this.#fail(p, "verified evidence is already expired");
    const id = await o.store.put(doc, collateral);
    await o.store.setCurrent(p.name, o.replicaId, id, expiresAtMs);
    const spki = doc.channel_binding.find((b) => b.type === "tls_spki_sha256");
    const state: VerificationState = {
      verified: true,
      sessionId: id,
      spkiSha256: spki && spki.type === "tls_spki_sha256" ? spki.spki_sha256 : outcome.spkiSha256,
      verifierId: doc.verifier_id,
      teeAttested: teeAttestedOf(doc, p),
    };
    const cur: Current = { state, expiresAtMs, doc, leavesAt: applied.leavesAt };
    this.#current.set(p.name, cur);
    this.#failures.delete(p.name);
    o.log({
      level: "info",
      msg: "upstream verified",
      upstream: p.name,
      session_id: id,
      verifier: doc.verifier_id,
    });
    for (const w of this.#warningsOf(p, cur)) {
      o.log({
        level: "warn",
        msg: "upstream will fail closed",
        upstream: p.name,
        kind: w.kind,
        at: w.at,
        detail: w.detail,
      });
    }
    const margin = (p.confidential?.reverify_margin_seconds ?? 300) * 1000;
    const lifetime = expiresAtMs - o.now();
    // Re-verify before expiry: `margin` early, but never sooner than half the lifetime.
    this.#schedule(p.name, Math.max(lifetime / 2, lifetime - margin));
    return state;
  }
}

/**
 * What a session proves about the TEE, as routing needs it: only a
 * `tee_attested` claim asserted from hardware evidence satisfies
 * `aci_verified`; a dev session does only under the documented development
 * switch (whose claim the session itself carries).
 */
export function teeAttestedOf(doc: SessionDocument, p: ProviderConfig): TeeAttested {
  const t = doc.claims.tee_attested;
  if (t.status === "asserted" && t.source === "hardware_proven") return "hardware_proven";
  if (
    p.confidential?.verifier === "dev" && p.confidential.dev_counts_for_aci_verified &&
    doc.claims.extra?.aci_verified_by_development_switch !== undefined
  ) return "development_switch";
  return "not_hardware_proven";
}
