/**
 * Command-line options of the CLIs (`main.ts`, `verify`, the build), read with
 * `node:util`'s `parseArgs`, with short messages and two rules it lacks: a
 * value may not be empty, nor given twice unless the option is `multiple`.
 */
import { parseArgs } from "node:util";

/** Bad arguments: the CLI prints the message and its usage, and exits 2. */
export class UsageError extends Error {}

export interface OptionSpec<S extends string, B extends string, M extends string> {
  /** `--name VALUE` or `--name=VALUE`, at most once. */
  strings: readonly S[];
  /** `--name`, no value. */
  booleans?: readonly B[];
  /** `--name VALUE`, any number of times. */
  multiple?: readonly M[];
}

export interface ParsedOptions<S extends string, B extends string, M extends string> {
  values: Partial<Record<S, string>>;
  flags: Set<B>;
  lists: Record<M, string[]>;
}

/** Parses `args` (options only, no positionals); throws `UsageError` on anything else. */
export function parseOptions<S extends string, B extends string = never, M extends string = never>(
  args: readonly string[],
  spec: OptionSpec<S, B, M>,
): ParsedOptions<S, B, M> {
  const booleans = new Set<string>(spec.booleans ?? []);
  const multiple = new Set<string>(spec.multiple ?? []);
  const options: Record<string, { type: "string" | "boolean" }> = {};
  for (const n of [...spec.strings, ...multiple]) options[n] = { type: "string" };
  for (const n of booleans) options[n] = { type: "boolean" };
  let tokens;
  try {
    ({ tokens } = parseArgs({ args: [...args], options, strict: true, tokens: true }));
  } catch (e) {
    throw new UsageError(shortMessage(e));
  }
  const out: ParsedOptions<S, B, M> = {
    values: {},
    flags: new Set(),
    lists: Object.fromEntries([...multiple].map((n) => [n, []])) as unknown as Record<M, string[]>,
  };
  for (const t of tokens) {
    if (t.kind !== "option") continue;
    if (booleans.has(t.name)) {
      out.flags.add(t.name as B);
      continue;
    }
    if (!t.value) throw new UsageError(`--${t.name} needs a value`);
    if (multiple.has(t.name)) {
      out.lists[t.name as M].push(t.value);
    } else if (out.values[t.name as S] !== undefined) {
      throw new UsageError(`--${t.name} given twice`);
    } else {
      out.values[t.name as S] = t.value;
    }
  }
  return out;
}

/**
 * Takes `--name VALUE` options out of `args` for a command that hands the rest
 * on to another parser (main.ts's own options before a subcommand's).
 */
export function takeOptions<N extends string>(
  args: readonly string[],
  names: readonly N[],
): { values: Partial<Record<N, string>>; rest: string[] } {
  const options = Object.fromEntries(names.map((n) => [n, { type: "string" as const }]));
  const { tokens } = parseArgs({
    args: [...args],
    options,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const values: Partial<Record<N, string>> = {};
  const taken = new Set<number>();
  for (const t of tokens) {
    if (t.kind !== "option" || !(names as readonly string[]).includes(t.name)) continue;
    const v = t.value;
    if (!v || (!t.inlineValue && v.startsWith("--"))) {
      throw new UsageError(`--${t.name} needs a value`);
    }
    values[t.name as N] = v;
    taken.add(t.index);
    if (!t.inlineValue) taken.add(t.index + 1);
  }
  return { values, rest: args.filter((_, i) => !taken.has(i)) };
}

/** node's parse errors in a few words (`unknown option --x`), without its advice. */
function shortMessage(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const code = (e as { code?: string }).code;
  const name = message.match(/'(-[^' ]+)/)?.[1] ?? "";
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") return `unknown option ${name}`;
  if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") {
    return `unexpected argument ${JSON.stringify(message.match(/'([^']*)'/)?.[1] ?? "")}`;
  }
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    return /does not take/.test(message) ? `${name} takes no value` : `${name} needs a value`;
  }
  return message.split("\n")[0];
}
