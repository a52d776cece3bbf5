/**
 * `keys` command line: stands in for the dashboard (create, list, revoke,
 * credit, show). The created key is printed once, alone on the last line, and
 * never stored; no other command can print it.
 */

import {
  addCredits,
  formatCredits,
  getBalance,
  getUsage,
  parseCredits,
} from "../accounts/credits.ts";
import { createKey, getKey, isKeyId, isTier, listKeys, revokeKey } from "../accounts/keys.ts";
import { limitsFor, readRateWindow, type Tiers } from "../accounts/rate_limit.ts";
import { GatewayError } from "../http/errors.ts";

export interface KeysCliDeps {
  kv: Deno.Kv;
  print: (line: string) => void;
  now: () => number;
  tiers: Tiers;
}

export const KEYS_USAGE =
  "usage: keys create --tier free|pro|enterprise [--credits N] [--name TEXT] [--rpm N --tpm N]" +
  " | list | revoke <key-id> | credit <key-id> <amount> | show <key-id>";

class UsageError extends Error {}

/** Parses `--flag value` pairs; every flag must be known and take a value. */
function parseFlags(args: string[], known: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < args.length; i += 2) {
    const flag = args[i];
    const value = args[i + 1];
    if (!flag.startsWith("--") || !known.includes(flag.slice(2))) {
      throw new UsageError(`unknown argument: ${flag}`);
    }
    if (value === undefined) throw new UsageError(`${flag} needs a value`);
    if (out.has(flag.slice(2))) throw new UsageError(`${flag} given twice`);
    out.set(flag.slice(2), value);
  }
  return out;
}

function positiveInt(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^[1-9]\d*$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`--${name} must be a positive integer`);
  }
  return Number(text);
}

function credits(text: string): bigint {
  try {
    return parseCredits(text);
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : "bad credits amount");
  }
}

function keyIdArg(args: string[]): string {
  if (args.length !== 1) throw new UsageError("expected exactly one <key-id>");
  if (!isKeyId(args[0])) throw new UsageError("key ids look like key_<12 hex>");
  return args[0];
}

/** Runs the `keys` command; returns the process exit code. */
export async function runKeys(args: string[], deps: KeysCliDeps): Promise<number> {
  const { kv, print } = deps;
  const [cmd, ...rest] = args;
  try {
    switch (cmd) {
      case "create": {
        const f = parseFlags(rest, ["tier", "credits", "name", "rpm", "tpm"]);
        const tier = f.get("tier");
        if (!isTier(tier)) throw new UsageError("--tier must be free, pro or enterprise");
        const rpm = positiveInt("rpm", f.get("rpm"));
        const tpm = positiveInt("tpm", f.get("tpm"));
        if ((rpm === undefined) !== (tpm === undefined)) {
          throw new UsageError("--rpm and --tpm go together");
        }
        if (rpm !== undefined && tier !== "enterprise") {
          throw new UsageError("--rpm/--tpm are only for enterprise keys");
        }
        const creditsNano = credits(f.get("credits") ?? "0");
        const { key, record } = await createKey(kv, {
          tier,
          name: f.get("name"),
          rpm,
          tpm,
          creditsNano,
          now: deps.now,
        });
        print(`key_id: ${record.key_id}`);
        print(`tier: ${record.tier}`);
        print(`credits: ${formatCredits(creditsNano)}`);
        print("api key (shown once, not stored):");
        print(key);
        return 0;
      }
      case "list": {
        if (rest.length !== 0) throw new UsageError("list takes no arguments");
        for (const r of await listKeys(kv)) {
          const status = r.revoked_at === null ? "active" : "revoked";
          const bal = formatCredits(await getBalance(kv, r.key_id));
          print([r.key_id, JSON.stringify(r.name), r.tier, status, bal].join("\t"));
        }
        return 0;
      }
      case "revoke": {
        const id = keyIdArg(rest);
        const rec = await revokeKey(kv, id, deps.now);
        if (rec === null) return notFound(print, id);
        print(`revoked ${id}`);
        return 0;
      }
      case "credit": {
        if (rest.length !== 2) throw new UsageError("expected <key-id> <amount>");
        const id = keyIdArg(rest.slice(0, 1));
        const amount = credits(rest[1]);
        if (amount === 0n) throw new UsageError("amount must be positive");
        const balance = await addCredits(kv, id, amount);
        print(`credited ${formatCredits(amount)} to ${id}; balance ${formatCredits(balance)}`);
        return 0;
      }
      case "show": {
        const id = keyIdArg(rest);
        const rec = await getKey(kv, id);
        if (rec === null) return notFound(print, id);
        const t = deps.now();
        const [balance, usage, win] = await Promise.all([
          getBalance(kv, id),
          getUsage(kv, id),
          readRateWindow(kv, rec, deps.tiers, t),
        ]);
        const lim = limitsFor(rec, deps.tiers);
        print(`key_id: ${rec.key_id}`);
        print(`name: ${rec.name}`);
        print(`tier: ${rec.tier}`);
        print(`status: ${rec.revoked_at === null ? "active" : "revoked"}`);
        print(`created_at: ${new Date(rec.created_at).toISOString()}`);
        print(`balance: ${formatCredits(balance)}`);
        print(
          `usage: requests=${usage.requests} prompt_tokens=${usage.prompt_tokens} ` +
            `completion_tokens=${usage.completion_tokens} spent=${formatCredits(usage.spent_nano)}`,
        );
        print(`limits: rpm=${lim.rpm} tpm=${lim.tpm}`);
        print(
          `current window: requests=${win.requests}/${lim.rpm} tokens=${win.tokens}/${lim.tpm} ` +
            `resets_in=${win.resetSeconds}s`,
        );
        return 0;
      }
      default:
        throw new UsageError(cmd === undefined ? "missing command" : `unknown command: ${cmd}`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      print(`error: ${e.message}`);
      print(KEYS_USAGE);
      return 2;
    }
    if (e instanceof GatewayError && e.kind === "not_found") return notFound(print, rest[0] ?? "");
    if (e instanceof RangeError) {
      print(`error: ${e.message}`);
      return 1;
    }
    throw e;
  }
}

function notFound(print: (line: string) => void, id: string): number {
  print(`error: no such key: ${id}`);
  return 1;
}
