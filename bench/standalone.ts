/**
 * Running one of `task bench`'s measurements on its own: `--rounds` and
 * `--seconds` from the command line, this process on core 1 with the mock
 * upstream, the servers under test on core 0, the rows printed as the table.
 */
import { type EarlyStarts, pinSelf, type Server, spawnPinned } from "./processes.ts";
import { renderTable, type Row } from "./report.ts";

/** A positive number flag (`--name N`), or `def`. */
export function numFlag(name: string, def: number): number {
  const i = Deno.args.indexOf(`--${name}`);
  if (i < 0) return def;
  const v = Number(Deno.args[i + 1]);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} needs a positive number`);
  return v;
}

/** A text flag (`--name value`, or `--name=value` for a value that starts with `--`), or `def`. */
export function strFlag(name: string, def: string): string {
  const eq = Deno.args.find((a) => a.startsWith(`--${name}=`));
  if (eq !== undefined) return eq.slice(name.length + 3);
  const i = Deno.args.indexOf(`--${name}`);
  if (i < 0) return def;
  const v = Deno.args[i + 1];
  if (v === undefined || v.startsWith("--")) throw new Error(`--${name} needs a value`);
  return v;
}

/** What a measurement gets: as `task bench` passes it. */
export interface MeasureOptions {
  dir: string;
  mockUrl: string;
  serverCpu: number;
  rounds: number;
  seconds: number;
  /** Seconds of unrecorded warm-up load per server, where the measurement has one. */
  warmSeconds?: number;
  /** `--quick`: a section's servers start together (bench/processes.ts startAll). */
  concurrentStarts?: boolean;
  /** `--quick`: servers started ahead of this section (bench/processes.ts EarlyStarts). */
  early?: EarlyStarts;
  log: (msg: string) => void;
}

export async function runStandalone(
  name: string,
  defaults: { rounds: number; seconds: number },
  measure: (o: MeasureOptions) => Promise<Row[]>,
): Promise<void> {
  await pinSelf(1);
  const dir = await Deno.makeTempDir({ prefix: `gateway-bench-${name}-` });
  let mock: Server | undefined;
  try {
    mock = await spawnPinned(1, ["run", "-A", "bench/mock_upstream.ts"], /mock listening on (\S+)/);
    const rows = await measure({
      dir,
      mockUrl: mock.url,
      serverCpu: 0,
      rounds: numFlag("rounds", defaults.rounds),
      seconds: numFlag("seconds", defaults.seconds),
      log: (msg) => console.error(`[bench] ${msg}`),
    });
    console.log(renderTable(rows));
  } finally {
    await mock?.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
