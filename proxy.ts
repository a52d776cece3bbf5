/**
 * `task proxy`: the verifying client library as a local OpenAI- and
 * Anthropic-compatible server (src/client/proxy.ts). The client library is
 * not part of the gateway, so this is its own entry point, beside main.ts:
 * the only module of the client that reads flags, files and sockets.
 *
 *   npx -y deno@2.9.6 task proxy --gateway https://gateway.example/v1 [--listen 127.0.0.1:8788]
 *                   [--require-verified-upstream] [--policy FILE] [--audit FILE]
 */
import { parseArgs } from "node:util";
import { parsePolicy } from "./src/client/policy.ts";
import { createVerifyingProxy } from "./src/client/proxy.ts";
import { verifyingFetch } from "./src/client/node.ts";

const USAGE = [
  "usage: npx -y deno@2.9.6 task proxy --gateway URL [--listen 127.0.0.1:PORT]",
  "         [--require-verified-upstream] [--policy FILE] [--audit FILE]",
  "  --gateway                    the gateway's base URL (…/v1)",
  "  --listen                     loopback address to serve on (default 127.0.0.1:8788)",
  "  --require-verified-upstream  refuse answers not served by a verified confidential upstream",
  "  --policy                     a JSON verification policy file",
  "  --audit                      where each verified exchange is appended (aci-proxy-audit.jsonl)",
].join("\n");

function fail(msg: string): never {
  console.error(msg);
  Deno.exit(2);
}

function userPath(path: string): string {
  if (path.startsWith("/")) return path;
  return `${(Deno.env.get("INIT_CWD") ?? Deno.cwd()).replace(/\/+$/, "")}/${path}`;
}

async function main(): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      args: Deno.args,
      options: {
        gateway: { type: "string" },
        listen: { type: "string", default: "127.0.0.1:8788" },
        "require-verified-upstream": { type: "boolean", default: false },
        policy: { type: "string" },
        audit: { type: "string", default: "aci-proxy-audit.jsonl" },
        help: { type: "boolean", default: false },
      },
      strict: true,
    }));
  } catch (e) {
    fail(`${(e as Error).message}\n${USAGE}`);
  }
  if (values.help) {
    console.log(USAGE);
    Deno.exit(0);
  }
  if (!values.gateway) fail(USAGE);
  const m = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]):(\d{1,5})$/.exec(values.listen);
  // It forwards whatever key the caller sends and has no auth of its own: loopback only.
  if (!m) fail(`--listen must be a loopback address with a port (got ${values.listen})`);
  let policy;
  try {
    const raw = values.policy ? JSON.parse(await Deno.readTextFile(userPath(values.policy))) : {};
    if (values["require-verified-upstream"]) raw.require_verified_upstream = true;
    policy = parsePolicy(raw);
  } catch (e) {
    fail(`--policy: ${(e as Error).message}`);
  }
  const audit = await Deno.open(userPath(values.audit), { create: true, append: true });
  const enc = new TextEncoder();
  const proxy = createVerifyingProxy({
    gateway: values.gateway,
    makeFetch: (o) => verifyingFetch({ ...o, policy }),
    audit: (r) => audit.writeSync(enc.encode(JSON.stringify(r) + "\n")),
    now: Date.now,
  });
  const hostname = m[1] === "[::1]" ? "::1" : m[1];
  const server = Deno.serve({
    hostname,
    port: Number(m[2]),
    onListen: (a) => {
      console.error(`verifying proxy for ${values.gateway} on http://${m[1]}:${a.port}/v1`);
      console.error(
        `  OPENAI_BASE_URL=http://${m[1]}:${a.port}/v1  ANTHROPIC_BASE_URL=http://${
          m[1]
        }:${a.port}`,
      );
    },
  }, proxy.handler);
  const stop = () => {
    // Answers already delivered get their deferred inclusion verdicts audited before exit.
    server.shutdown().then(() => proxy.settle()).finally(() => {
      proxy.close();
      audit.close();
      Deno.exit(0);
    });
  };
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
}

if (import.meta.main) await main();
