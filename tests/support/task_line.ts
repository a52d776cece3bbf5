/**
 * A `deno.json` task's own command line, for tests that must run exactly what
 * an operator runs (its permissions are part of what is tested), and spawning
 * it as a gateway process.
 */

export const ROOT = new URL("../../", import.meta.url).pathname;

/** The task's arguments after `deno`, split on spaces (our tasks quote nothing). */
export async function taskArgs(name: string, root = ROOT): Promise<string[]> {
  const tasks = JSON.parse(await Deno.readTextFile(`${root}/deno.json`)).tasks;
  const line: string | undefined = tasks[name];
  if (line === undefined) throw new Error(`deno.json has no task ${name}`);
  const [deno, ...args] = line.split(" ").filter((a) => a !== "");
  if (deno !== "deno") throw new Error(`task ${name} does not start with deno: ${line}`);
  return args;
}

export interface TaskProcess {
  /** The base listener's origin, e.g. `http://127.0.0.1:41234`. */
  url: string;
  child: Deno.ChildProcess;
  stdout: string[];
  stderr: string[];
  stop(signal?: Deno.Signal): Promise<Deno.CommandStatus>;
}

async function collectLines(
  stream: ReadableStream<Uint8Array>,
  sink: string[],
  onLine?: (l: string) => void,
) {
  const dec = new TextDecoder();
  let buf = "";
  for await (const chunk of stream) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      sink.push(buf.slice(0, i));
      onLine?.(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  }
  if (buf !== "") sink.push(buf);
}

/** Runs `cmd args` to completion: exit code and both outputs' lines. */
export async function runToEnd(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<{ code: number; stdout: string[]; stderr: string[] }> {
  const out = await new Deno.Command(cmd, {
    args,
    cwd: opts.cwd ?? ROOT,
    env: { NO_COLOR: "1", ...opts.env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(opts.timeoutMs ?? 60_000),
  }).output();
  const lines = (b: Uint8Array) =>
    new TextDecoder().decode(b).split("\n").filter((l) => l.trim() !== "");
  return { code: out.code, stdout: lines(out.stdout), stderr: lines(out.stderr) };
}

/** How long a stopped gateway may take to end: its drain's grace (10 s) and some. */
const STOP_MS = 30_000;

/**
 * Spawns `cmd args` and resolves once it prints its base listener line and
 * then its keyset digest (main.ts installs its signal handlers right after
 * that line, so a stop() from then on is a graceful one).
 */
export async function spawnListening(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string> } = {},
): Promise<TaskProcess> {
  const child = new Deno.Command(cmd, {
    args,
    cwd: opts.cwd ?? ROOT,
    env: { NO_COLOR: "1", ...opts.env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stdout: string[] = [];
  const stderr: string[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch {
        // already gone
      }
      reject(new Error(`gateway did not start:\n${stderr.join("\n")}`));
    }, 60_000);
    let base: string | null = null;
    collectLines(child.stderr, stderr, (l) => {
      const m = l.match(/gateway base listening on (https?:\/\/[^/\s]+)/);
      if (m) base = m[1];
      if (base !== null && l.startsWith("keyset digest ")) {
        clearTimeout(timer);
        resolve(base);
      }
    }).catch(() => {});
    collectLines(child.stdout, stdout).catch(() => {});
    child.status.then((s) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited early (${s.code}):\n${stderr.join("\n")}`));
    });
  });
  return {
    url,
    child,
    stdout,
    stderr,
    async stop(signal: Deno.Signal = "SIGTERM") {
      try {
        child.kill(signal);
      } catch {
        // already gone
      }
      // Bounded: a gateway that does not end after a drain fails the test that stopped it
      // (with its last lines) instead of stalling the whole suite.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const stuck = new Promise<"stuck">((r) => timer = setTimeout(() => r("stuck"), STOP_MS));
      const ended = await Promise.race([child.status, stuck]);
      clearTimeout(timer);
      if (ended !== "stuck") return ended;
      try {
        child.kill("SIGKILL");
      } catch {
        // ended meanwhile
      }
      await child.status;
      throw new Error(
        `gateway did not end within ${STOP_MS / 1000} s of ${signal}:\n${
          stderr.slice(-10).join("\n")
        }`,
      );
    },
  };
}
