/**
 * Spawning the real gateway binary path (`main.ts serve --config`) as a child
 * process, for tests that need several processes, signals or restarts.
 */
import type { GatewayConfig } from "../../src/config/schema.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

export interface GatewayProcess {
  url: string;
  child: Deno.ChildProcess;
  /** Lines the process wrote to stdout (its JSON request log). */
  stdout: string[];
  stderr: string[];
  stop(signal?: Deno.Signal): Promise<Deno.CommandStatus>;
}

export async function writeConfig(dir: string, config: unknown): Promise<string> {
  const path = `${dir}/config.json`;
  await Deno.writeTextFile(path, JSON.stringify(config, null, 2));
  return path;
}

export function baseConfig(
  opts: { upstreamUrl: string; storePath: string; zdr?: boolean },
): Record<string, unknown> {
  return {
    listen: { base: { hostname: "127.0.0.1", port: 0 } },
    store: { path: opts.storePath },
    identity: { quote_provider: "dev", allow_dev_quotes: true },
    providers: [{ name: "plain", base_url: opts.upstreamUrl, zdr: opts.zdr ?? false }],
    models: [{
      id: "demo/echo",
      name: "Echo",
      created: 1,
      context_length: 8192,
      max_output_length: 1024,
      input_modalities: ["text"],
      output_modalities: ["text"],
      pricing: { prompt: 0.000001, completion: 0.000002 },
      supported_parameters: ["max_tokens", "temperature"],
      routes: [{ provider: "plain", model: "demo-chat" }],
    }],
  } satisfies Partial<Record<keyof GatewayConfig, unknown>>;
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
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      sink.push(line);
      onLine?.(line);
    }
  }
}

export async function spawnGateway(
  configPath: string,
  extraArgs: string[] = [],
  env: Record<string, string> = {},
  opts: { nofile?: number; v8Flags?: readonly string[] } = {},
): Promise<GatewayProcess> {
  const v8 = opts.v8Flags ? [`--v8-flags=${opts.v8Flags.join(",")}`] : [];
  const deno = [Deno.execPath(), "run", "-A", ...v8, "main.ts", "serve", "--config", configPath];
  // With `nofile`, under that file-descriptor limit (`ulimit -n`, soft and hard).
  const [cmd, ...args] = opts.nofile === undefined
    ? [...deno, ...extraArgs]
    : ["bash", "-c", `ulimit -n ${opts.nofile} && exec "$@"`, "bash", ...deno, ...extraArgs];
  const child = new Deno.Command(cmd, {
    args,
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1", ...env },
  }).spawn();
  const stdout: string[] = [];
  const stderr: string[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`gateway did not start:\n${stderr.join("\n")}`)),
      30_000,
    );
    collectLines(child.stderr, stderr, (l) => {
      const m = l.match(/gateway base listening on (https?:\/\/[^/\s]+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
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
      return await child.status;
    },
  };
}
