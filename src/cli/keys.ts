/**
 * `keys` command line: stands in for the dashboard. A thin client of
 * admission/key_admin.ts, the code the admin HTTP API runs, so both show the
 * same figures (key_figures.ts: balance, reserved, available). Flags are parsed with
 * `node:util` `parseArgs`; every command has `--help`. The created key is
 * printed once, alone on the last line, and never stored; no other command
 * can print it.
 */
import { parseArgs } from "node:util";
import {
  dayRange,
  formatCredits,
  keyAdmin,
  KeyArgumentError,
  parseCredits,
  type Tiers,
} from "../admission/mod.ts";
import { isKeyId } from "../keys/mod.ts";
import { GatewayError } from "../http/mod.ts";

export interface KeysCliDeps {
  kv: Deno.Kv;
  print: (line: string) => void;
  now: () => number;
  tiers: Tiers;
}

interface Command {
  usage: string;
  help: string[];
  options: Record<string, { type: "string" | "boolean" }>;
}

const COMMANDS: Record<string, Command> = {
  create: {
    usage:
      "usage: keys create --tier free|pro|enterprise [--credits N] [--name TEXT] [--rpm N --tpm N]",
    help: [
      "Creates a key and prints it once, alone on the last line (only its digest is stored).",
      "  --tier      free, pro or enterprise",
      "  --credits   initial balance, a decimal with at most 9 decimals (default 0)",
      "  --name      a label shown by list and show",
      "  --rpm/--tpm requests and tokens per minute (enterprise keys only; both or neither)",
    ],
    options: {
      tier: { type: "string" },
      credits: { type: "string" },
      name: { type: "string" },
      rpm: { type: "string" },
      tpm: { type: "string" },
    },
  },
  list: {
    usage: "usage: keys list",
    help: [
      "Lists every key: id, name, tier, status, balance, reserved and available",
      "(never the key itself).",
    ],
    options: {},
  },
  show: {
    usage: "usage: keys show <key-id>",
    help: [
      "Shows a key's credits, usage totals, limits and rate bucket levels (used/limit).",
      "  balance     credits given minus credits spent by settled requests",
      "  reserved    held by the gateway replicas for requests in flight and quota leases",
      "  available   balance minus reserved: what new requests can spend",
    ],
    options: {},
  },
  credit: {
    usage: "usage: keys credit <key-id> <amount>",
    help: [
      "Adds credits and prints the new balance, reserved and available (as show prints them).",
      "Warns when the key is revoked: its credits cannot be spent.",
    ],
    options: {},
  },
  revoke: {
    usage: "usage: keys revoke <key-id>",
    help: ["Revokes a key; every replica refuses it within 2 s."],
    options: {},
  },
  limits: {
    usage: "usage: keys limits <key-id> [--tier free|pro|enterprise] [--rpm N --tpm N | --clear]",
    help: [
      "Sets a key's tier and/or its own limits (enterprise keys only).",
      "  --clear   drop the key's own limits (back to its tier's)",
    ],
    options: {
      tier: { type: "string" },
      rpm: { type: "string" },
      tpm: { type: "string" },
      clear: { type: "boolean" },
    },
  },
  usage: {
    usage: "usage: keys usage <key-id> [--from YYYY-MM-DD] [--to YYYY-MM-DD]",
    help: ["Usage per UTC day and model (default: the 30 days ending today)."],
    options: { from: { type: "string" }, to: { type: "string" } },
  },
};

export const KEYS_USAGE = "usage: keys <" + Object.keys(COMMANDS).join("|") +
  "> … (keys <command> --help for details)";

class UsageError extends Error {
  constructor(message: string, readonly usage: string) {
    super(message);
  }
}

function positiveInt(name: string, text: string | undefined, usage: string): number | undefined {
  if (text === undefined) return undefined;
  if (!/^[1-9]\d*$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`--${name} must be a positive integer`, usage);
  }
  return Number(text);
}

function keyIdArg(id: string | undefined, usage: string): string {
  if (id === undefined) throw new UsageError("expected a <key-id>", usage);
  if (!isKeyId(id)) throw new UsageError("key ids look like key_<12 hex>", usage);
  return id;
}

/** What a subcommand runs with: the parsed flags and positionals, and the key admin. */
interface CommandCall {
  admin: ReturnType<typeof keyAdmin>;
  print: (line: string) => void;
  now: () => number;
  pos: string[];
  f: Record<string, string | boolean | undefined>;
  str: (name: string) => string | undefined;
  arity: (n: number) => void;
  usage: string;
}

/** Each subcommand; returns the exit code (a UsageError or KeyArgumentError prints the usage). */
const RUN: Record<string, (c: CommandCall) => Promise<number>> = {
  create: async ({ admin, print, str, arity, usage }) => {
    arity(0);
    const tier = str("tier");
    if (tier === undefined) throw new UsageError("--tier is required", usage);
    const { key, summary } = await admin.create({
      tier,
      name: str("name"),
      credits: str("credits"),
      rpm: positiveInt("rpm", str("rpm"), usage),
      tpm: positiveInt("tpm", str("tpm"), usage),
    });
    print(`key_id: ${summary.key_id}`);
    print(`tier: ${summary.tier}`);
    print(`credits: ${summary.balance}`);
    print("api key (shown once, not stored):");
    print(key);
    return 0;
  },
  list: async ({ admin, print, arity }) => {
    arity(0);
    print(["KEY_ID", "NAME", "TIER", "STATUS", "BALANCE", "RESERVED", "AVAILABLE"].join("\t"));
    for (const s of await admin.list()) {
      print(
        [s.key_id, JSON.stringify(s.name), s.tier, s.status, s.balance, s.reserved, s.available]
          .join("\t"),
      );
    }
    return 0;
  },
  revoke: async ({ admin, print, pos, arity, usage }) => {
    arity(1);
    const id = keyIdArg(pos[0], usage);
    await admin.revoke(id);
    print(`revoked ${id}`);
    return 0;
  },
  credit: async ({ admin, print, pos, arity, usage }) => {
    arity(2);
    const id = keyIdArg(pos[0], usage);
    const { summary, revoked } = await admin.credit(id, pos[1]);
    print(
      `credited ${formatCredits(parseCredits(pos[1]))} to ${id}; balance ${summary.balance}` +
        ` (reserved ${summary.reserved}, available ${summary.available})`,
    );
    if (revoked) print(`warning: ${id} is revoked: its credits cannot be spent`);
    return 0;
  },
  show: async ({ admin, print, pos, arity, usage }) => {
    arity(1);
    const d = await admin.show(keyIdArg(pos[0], usage));
    print(`key_id: ${d.key_id}`);
    print(`name: ${d.name}`);
    print(`tier: ${d.tier}`);
    print(`status: ${d.status}`);
    print(`created_at: ${d.created_at}`);
    if (d.revoked_at) print(`revoked_at: ${d.revoked_at}`);
    print(`balance: ${d.balance}`);
    print(`reserved: ${d.reserved}`);
    print(`available: ${d.available}`);
    print(
      `usage: requests=${d.usage.requests} prompt_tokens=${d.usage.prompt_tokens} ` +
        `completion_tokens=${d.usage.completion_tokens} spent=${d.usage.spent}`,
    );
    print(`limits: rpm=${d.limits.rpm} tpm=${d.limits.tpm}`);
    const r = d.rate_limit;
    print(
      `rate buckets: requests=${r.requests}/${d.limits.rpm} tokens=${r.tokens}/${d.limits.tpm} ` +
        `resets_in=${r.resets_in_seconds}s`,
    );
    print(
      `rate reserved by quota leases: requests=${r.requests_reserved} tokens=${r.tokens_reserved}`,
    );
    return 0;
  },
  limits: async ({ admin, print, pos, f, str, arity, usage }) => {
    arity(1);
    const id = keyIdArg(pos[0], usage);
    const rpm = positiveInt("rpm", str("rpm"), usage);
    const tpm = positiveInt("tpm", str("tpm"), usage);
    if (f.clear && (rpm !== undefined || tpm !== undefined)) {
      throw new UsageError("--clear goes without --rpm/--tpm", usage);
    }
    if (str("tier") === undefined && rpm === undefined && tpm === undefined && !f.clear) {
      throw new UsageError("nothing to change", usage);
    }
    const s = await admin.update(id, {
      tier: str("tier"),
      ...(f.clear ? { rpm: null, tpm: null } : { rpm, tpm }),
    });
    print(`${id}: tier ${s.tier}, rpm=${s.limits.rpm} tpm=${s.limits.tpm}`);
    return 0;
  },
  usage: async ({ admin, print, pos, str, arity, usage, now }) => {
    arity(1);
    const id = keyIdArg(pos[0], usage);
    let range;
    try {
      range = dayRange(str("from") ?? null, str("to") ?? null, now());
    } catch (e) {
      throw new UsageError((e as Error).message, usage);
    }
    const u = await admin.usage(id, range);
    print(
      ["DATE", "MODEL", "REQUESTS", "PROMPT_TOKENS", "COMPLETION_TOKENS", "SPENT"].join("\t"),
    );
    for (const r of u.data) {
      print(
        [r.date, r.model, r.requests, r.prompt_tokens, r.completion_tokens, r.spent].join("\t"),
      );
    }
    return 0;
  },
};

/** Runs the `keys` command; returns the process exit code. */
export async function runKeys(args: string[], deps: KeysCliDeps): Promise<number> {
  const { print } = deps;
  const admin = keyAdmin(deps);
  const [cmd, ...rest] = args;
  if (cmd === undefined || cmd === "--help" || cmd === "-h" || cmd === "help") {
    print(KEYS_USAGE);
    for (const c of Object.values(COMMANDS)) print("  " + c.usage.slice("usage: ".length));
    return cmd === undefined ? 2 : 0;
  }
  const spec = COMMANDS[cmd];
  if (!spec) {
    print(`error: unknown command: ${cmd}`);
    print(KEYS_USAGE);
    return 2;
  }
  try {
    let parsed;
    try {
      parsed = parseArgs({
        args: rest,
        options: { ...spec.options, help: { type: "boolean", short: "h" } },
        allowPositionals: true,
        strict: true,
      });
    } catch (e) {
      throw new UsageError((e as Error).message, spec.usage);
    }
    const f = parsed.values as Record<string, string | boolean | undefined>;
    const pos = parsed.positionals;
    if (f.help) {
      print(spec.usage);
      for (const l of spec.help) print(l);
      return 0;
    }
    const str = (name: string) => f[name] as string | undefined;
    const arity = (n: number) => {
      if (pos.length !== n) {
        throw new UsageError(`expected ${n} argument${n === 1 ? "" : "s"}`, spec.usage);
      }
    };
    return await RUN[cmd]({ admin, print, now: deps.now, pos, f, str, arity, usage: spec.usage });
  } catch (e) {
    if (e instanceof UsageError) {
      print(`error: ${e.message}`);
      print(e.usage);
      return 2;
    }
    if (e instanceof KeyArgumentError) {
      print(`error: ${e.message}`);
      print(spec.usage);
      return 2;
    }
    if (e instanceof GatewayError && e.kind === "not_found") {
      print(`error: ${e.message}`);
      return 1;
    }
    if (e instanceof RangeError) {
      print(`error: ${e.message}`);
      return 1;
    }
    throw e;
  }
}
