/**
 * Spawning the real gateway binary path (`main.ts serve --config`) as a child
 * process, for tests that need several processes, signals or restarts.
 */
import type { GatewayConfig } from "../../src/config/schema.ts";
import { spawnListening, type TaskProcess } from "./task_line.ts";

/** A running gateway: its base origin, its output lines (stdout: the JSON request log), stop(). */
export type GatewayProcess = TaskProcess;

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
    // One process per gateway unless a test asks for workers (tests/workers_e2e_test.ts):
    // these tests signal, kill and count one process's work.
    serve: { workers: 1 },
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
  return await spawnListening(cmd, args, { env });
}

/**
 * A loopback server certificate from a fresh CA, written to `dir` as the
 * listener's `tls_cert_file`/`tls_key_file`: the CA (for clients), the
 * certificate's SPKI digest, and the two config fields.
 */
export async function writeListenerCert(dir: string) {
  const { makeCa, issueServerCert } = await import("../../src/demo/certs.ts");
  const ca = await makeCa({ now: Date.now() });
  const cert = await issueServerCert(ca, { now: Date.now(), hosts: ["127.0.0.1", "localhost"] });
  await Deno.writeTextFile(`${dir}/tls.crt`, cert.certPem);
  await Deno.writeTextFile(`${dir}/tls.key`, cert.keyPem);
  return {
    ca,
    cert,
    files: { tls_cert_file: `${dir}/tls.crt`, tls_key_file: `${dir}/tls.key` },
  };
}
