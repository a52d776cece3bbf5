/**
 * Keeps every confidential upstream's verification current, in the
 * background: verify at start-up, re-verify before the session expires and
 * whenever a channel check fails, retry failures with backoff. The request
 * path only reads `state()`; it never waits on verification. A failed or
 * expired upstream is not verified until a verification passes again.
 */
import type { TeeAttested, VerificationState } from "../routing/mod.ts";
import type { ProviderConfig } from "../config/mod.ts";
import type { AttesterDeps, SessionDocument, UpstreamAttester } from "./types.ts";
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

export interface VerificationManager {
  state(provider: string): VerificationState | null;
  /** Verify every confidential upstream once (start-up). */
  start(): Promise<void>;
  /** Verify one upstream now (also used by tests and operators). */
  verify(provider: string): Promise<VerificationState>;
  /** A binding check failed: drop the session and re-verify at once. */
  invalidate(provider: string, reason: string): void;
  /** Operator view: every confidential upstream's state, with its fail-closed warnings. */
  snapshot(): Record<
    string,
    VerificationState & { expires_at?: number; warnings?: FailClosedWarning[] }
  >;
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

// Long as one closure over shared state; each inner function is short.
export function createVerificationManager(o: ManagerOptions): VerificationManager {
  const confidential = o.providers.filter((p) => p.confidential);
  const current = new Map<string, Current>();
  const timers = new Map<string, ReturnType<typeof setTimeout>>();
  const inflight = new Map<string, Promise<VerificationState>>();
  const failures = new Map<string, number>();
  let stopped = false;

  const warnSecondsOf = (p: ProviderConfig) =>
    p.confidential?.measurement_policy?.warn_before_seconds ?? DEFAULT_POLICY_WARN_SECONDS;
  const warningsOf = (p: ProviderConfig, c: Current): FailClosedWarning[] =>
    c.state.verified && c.doc
      ? failClosedWarnings(c.doc, c.leavesAt ?? null, Math.floor(o.now() / 1000), warnSecondsOf(p))
      : [];

  for (const p of confidential) {
    current.set(p.name, {
      state: { verified: false, reason: "verification pending" },
      expiresAtMs: 0,
    });
  }

  const schedule = (name: string, delayMs: number) => {
    if (stopped) return;
    clearTimeout(timers.get(name));
    const t = setTimeout(() => {
      timers.delete(name);
      run(name).catch(() => {});
    }, Math.max(0, delayMs));
    // Background re-verification must not keep a finished process alive.
    Deno.unrefTimer(t);
    timers.set(name, t);
  };

  const fail = (p: ProviderConfig, reason: string): VerificationState => {
    const state: VerificationState = { verified: false, reason };
    current.set(p.name, { state, expiresAtMs: 0 });
    o.store.clearCurrent(p.name, o.replicaId).catch(() => {});
    const n = (failures.get(p.name) ?? 0) + 1;
    failures.set(p.name, n);
    o.log({
      level: "warn",
      msg: "upstream verification failed",
      upstream: p.name,
      reason,
      attempt: n,
    });
    schedule(p.name, Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.min(n - 1, 6)));
    return state;
  };

  const attempt = async (p: ProviderConfig): Promise<VerificationState> => {
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
    if (stopped) return { verified: false, reason: "stopped" };
    if (!outcome.ok) return fail(p, outcome.reason);
    // Whatever the verifier, the upstream's measurements must be in its policy (when it has one).
    const applied = applyMeasurementPolicy(
      outcome.document,
      o.policies?.get(p.name),
      p.confidential?.measurement_policy?.required === true,
      Math.floor(o.now() / 1000),
    );
    if (!applied.ok) return fail(p, applied.reason);
    const { doc, collateral } = withCollateral(applied.document, recording.collector.archive());
    // Whatever the verifier, a provider that requires GPU evidence needs it proven.
    const gpu = doc.claims.gpu_attested;
    if (
      p.confidential?.require_gpu &&
      !(gpu.status === "asserted" && gpu.source === "hardware_proven")
    ) {
      return fail(p, `GPU evidence required but the session's gpu_attested is ${gpu.status}`);
    }
    const expiresAtMs = doc.expires_at * 1000;
    if (expiresAtMs <= o.now()) return fail(p, "verified evidence is already expired");
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
    current.set(p.name, cur);
    failures.delete(p.name);
    o.log({
      level: "info",
      msg: "upstream verified",
      upstream: p.name,
      session_id: id,
      verifier: doc.verifier_id,
    });
    for (const w of warningsOf(p, cur)) {
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
    schedule(p.name, Math.max(lifetime / 2, lifetime - margin));
    return state;
  };

  const run = (name: string): Promise<VerificationState> => {
    const p = confidential.find((x) => x.name === name);
    if (!p) return Promise.resolve({ verified: false, reason: "not a confidential upstream" });
    let pending = inflight.get(name);
    if (!pending) {
      pending = attempt(p).finally(() => inflight.delete(name));
      inflight.set(name, pending);
    }
    return pending;
  };

  // A new policy applies at once: a session it does not accept ends now; one it accepts is
  // re-verified so the session's claims name the new version.
  o.policies?.onChange((name) => {
    const p = confidential.find((x) => x.name === name);
    const c = current.get(name);
    if (!p || !c) return;
    const installed = o.policies?.get(name);
    if (c.state.verified && c.doc && installed) {
      const m = matchPolicy(installed.policy, subjectsOf(c.doc), Math.floor(o.now() / 1000));
      if (!m.ok) {
        fail(p, m.reason);
        return;
      }
    }
    run(name).catch(() => {});
  });

  return {
    state(name) {
      const c = current.get(name);
      if (!c) return null;
      if (c.state.verified && c.expiresAtMs <= o.now()) {
        run(name).catch(() => {});
        return { verified: false, reason: "session expired; re-verifying" };
      }
      return c.state;
    },
    async start() {
      await Promise.all(confidential.map((p) => run(p.name)));
    },
    verify: run,
    invalidate(name, reason) {
      const p = confidential.find((x) => x.name === name);
      if (!p) return;
      current.set(name, { state: { verified: false, reason }, expiresAtMs: 0 });
      o.store.clearCurrent(name, o.replicaId).catch(() => {});
      o.log({ level: "warn", msg: "upstream session invalidated", upstream: name, reason });
      run(name).catch(() => {});
    },
    snapshot() {
      const out: ReturnType<VerificationManager["snapshot"]> = {};
      for (const [name, c] of current) {
        const p = confidential.find((x) => x.name === name);
        const warnings = p ? warningsOf(p, c) : [];
        const policy = c.doc?.claims.extra?.["measurement_policy"];
        out[name] = c.state.verified
          ? {
            ...c.state,
            expires_at: Math.floor(c.expiresAtMs / 1000),
            ...(policy ? { measurement_policy: policy } : {}),
            ...(warnings.length ? { warnings } : {}),
          }
          : c.state;
      }
      return out;
    },
    current(name) {
      const c = current.get(name);
      if (!c || !c.state.verified || !c.doc || c.expiresAtMs <= o.now()) return null;
      return c.state.spkiSha256 ? { doc: c.doc, spkiSha256: c.state.spkiSha256 } : null;
    },
    failClosedIn(name) {
      const c = current.get(name);
      const p = confidential.find((x) => x.name === name);
      if (!c || !p || !c.state.verified || !c.doc) return null;
      const times = failClosedWarnings(c.doc, c.leavesAt ?? null, 0, Infinity).map((w) => w.at);
      return times.length ? Math.min(...times) - o.now() / 1000 : null;
    },
    stop() {
      stopped = true;
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
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
