/**
 * The measurement policies in force, per upstream, changeable at runtime
 * (admin API, no restart): a policy is installed only when its signature
 * verifies under a configured operator key, it names this upstream, and its
 * version is higher than the installed one (re-installing the same signed
 * policy is a no-op). Listeners (the verification manager) re-check the
 * upstream's current session at once.
 */
import { type InstalledPolicy, type PolicyKey, verifySignedPolicy } from "./document.ts";

export type InstallResult =
  | { ok: true; installed: InstalledPolicy; changed: boolean }
  | { ok: false; reason: string };

export class PolicyRegistry {
  #keys: readonly PolicyKey[];
  #byUpstream = new Map<string, InstalledPolicy>();
  #listeners: ((upstream: string) => void)[] = [];

  constructor(keys: readonly PolicyKey[]) {
    this.#keys = keys;
  }

  get(upstream: string): InstalledPolicy | undefined {
    return this.#byUpstream.get(upstream);
  }

  /** Every installed policy's upstream, version and digest. */
  list(): { upstream: string; version: number; digest: string; key_id: string }[] {
    return [...this.#byUpstream.values()].map((p) => ({
      upstream: p.policy.upstream,
      version: p.policy.version,
      digest: p.digest,
      key_id: p.key_id,
    }));
  }

  onChange(fn: (upstream: string) => void): void {
    this.#listeners.push(fn);
  }

  /** Verifies and installs a signed policy for `upstream`. */
  install(upstream: string, signed: unknown): InstallResult {
    const v = verifySignedPolicy(signed, this.#keys);
    if (!v.ok) return v;
    const p = v.installed;
    if (p.policy.upstream !== upstream) {
      return { ok: false, reason: `policy is for upstream ${p.policy.upstream}, not ${upstream}` };
    }
    const cur = this.#byUpstream.get(upstream);
    if (cur && cur.digest === p.digest) return { ok: true, installed: cur, changed: false };
    if (cur && p.policy.version <= cur.policy.version) {
      return {
        ok: false,
        reason:
          `policy version ${p.policy.version} is not newer than the installed ${cur.policy.version}`,
      };
    }
    this.#byUpstream.set(upstream, p);
    for (const fn of this.#listeners) fn(upstream);
    return { ok: true, installed: p, changed: true };
  }
}
