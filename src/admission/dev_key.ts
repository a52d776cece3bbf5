/**
 * The development key `task dev` prints: created once (pro tier, 100
 * credits) and reused across restarts while it still authenticates, instead
 * of a new key per start. Development only: the key itself is kept in a file
 * beside the development store (main.ts reads and writes it, mode 0600),
 * which production never does (keys are shown once and only digests stored).
 */
import { NANO_PER_CREDIT } from "./credits.ts";
import { authenticate, createKey } from "../keys/mod.ts";

export const DEV_KEY_CREDITS = 100n;

export interface DevKeyDeps {
  kv: Deno.Kv;
  now: () => number;
  /** The saved key, or null when there is none. */
  read: () => Promise<string | null>;
  save: (key: string) => Promise<void>;
}

/** The development key, and whether it was reused. */
export async function devKey(d: DevKeyDeps): Promise<{ key: string; reused: boolean }> {
  const saved = (await d.read())?.trim();
  if (saved) {
    try {
      await authenticate(d.kv, `Bearer ${saved}`);
      return { key: saved, reused: true };
    } catch {
      // Revoked, or the store was wiped: mint a new one.
    }
  }
  const { key } = await createKey(d.kv, {
    tier: "pro",
    name: "dev",
    now: d.now,
    creditsNano: DEV_KEY_CREDITS * NANO_PER_CREDIT,
  });
  await d.save(key);
  return { key, reused: false };
}
