/**
 * The benchmark's peer column: Portkey's open-source gateway under Node
 * (bench/peer/README.md), installed from bench/peer/package-lock.json with
 * `npm ci` when missing, started pinned to a core like every server here.
 */
import { ROOT, type Server, spawnPinned } from "./processes.ts";
import type { Target } from "./load.ts";

const PEER_DIR = `${ROOT}bench/peer`;

async function ensureInstalled(): Promise<void> {
  try {
    await Deno.stat(`${PEER_DIR}/node_modules/@portkey-ai/gateway/build/start-server.js`);
    return;
  } catch {
    // not installed yet
  }
  const out = await new Deno.Command("npm", {
    args: ["ci", "--ignore-scripts", "--no-audit", "--no-fund"],
    cwd: PEER_DIR,
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`npm ci in bench/peer failed: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** Starts the peer on core `cpu`. */
export async function startPeer(cpu: number): Promise<Server> {
  await ensureInstalled();
  return spawnPinned(cpu, ["run.mjs"], /portkey listening on (\S+)/, {
    program: "node",
    cwd: PEER_DIR,
  });
}

/** The load target: provider `openai` with its custom host at the mock. */
export function peerTarget(peer: Server, mockUrl: string): Target {
  return {
    base: peer.url,
    headers: {
      "x-portkey-provider": "openai",
      "x-portkey-custom-host": `${mockUrl}/v1`,
      authorization: "Bearer bench",
    },
    model: (m) => m,
  };
}
