/**
 * The coding agent's workload (#27): a conversation of about 100k tokens sent
 * whole, one turn longer each request, one request at a time, to a model with
 * a 200k-token context ({@link AGENT_MODEL}). Its byte ceiling (~400 KB) does
 * not fit the context, so the gateway counts the prompt: what the prompt-size
 * rows (a 2M-token context, where the ceiling decides) never make it do.
 *
 * The conversation: a system prompt of 16 KB and turns of a user line, an
 * assistant tool call reading a file, and the tool's answer (8 KB of this
 * repository's source, a different slice per turn): what Claude Code, Cursor
 * or Aider resend every turn.
 */
import { AGENT_MODEL } from "./gateway_setup.ts";
import { promptText } from "./prompt_text.ts";
import { encodeRequest, HttpConn } from "./http_conn.ts";
import { schedCpuMs } from "./processes.ts";
import { median } from "./stats.ts";

const SYSTEM_CHARS = 16 * 1024;
const TOOL_CHARS = 8 * 1024;

const TOOLS = [{
  type: "function",
  function: {
    name: "read_file",
    description: "Read a file of the repository.",
    parameters: {
      type: "object",
      properties: { path: { type: "string" } },
      required: ["path"],
    },
  },
}];

/** Anthropic's Messages format (Claude Code's), or OpenAI's chat. */
export type AgentFormat = "chat" | "anthropic";

/**
 * The messages of turn `n` (0-based): a user line, a tool call, its answer
 * (the source from `shift` characters further on).
 */
function turn(n: number, source: string, format: AgentFormat, shift = 0): unknown[] {
  const at = (SYSTEM_CHARS + n * TOOL_CHARS + shift) % (source.length - TOOL_CHARS);
  const id = `call_${n}`;
  const line = `Step ${n}: read the next file and check its error handling.`;
  const path = { path: `src/file_${n}.ts` };
  const content = source.slice(at, at + TOOL_CHARS);
  if (format === "anthropic") {
    return [
      { role: "user", content: [{ type: "text", text: line }] },
      { role: "assistant", content: [{ type: "tool_use", id, name: "read_file", input: path }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: id, content }] },
    ];
  }
  return [
    { role: "user", content: line },
    {
      role: "assistant",
      content: null,
      tool_calls: [{
        id,
        type: "function",
        function: { name: "read_file", arguments: JSON.stringify(path) },
      }],
    },
    { role: "tool", tool_call_id: id, content },
  ];
}

/**
 * Request bodies of a growing conversation: the first holds about
 * `startKiB` KiB of text, each next one a turn more. `model` defaults to
 * {@link AGENT_MODEL}; `format` to chat (`/v1/chat/completions`), else
 * Anthropic's (`/v1/messages`, the system prompt and tools as Claude Code sends them).
 * Every `round` starts from the same conversation (which the gateway has then
 * counted before) and grows it by turns of its own (new texts).
 */
export function agentBodies(
  count: number,
  startKiB = 400,
  model = AGENT_MODEL,
  format: AgentFormat = "chat",
  round = 0,
): string[] {
  const source = promptText(4 * 1024 * 1024);
  const system = source.slice(0, SYSTEM_CHARS);
  const messages: unknown[] = format === "chat" ? [{ role: "system", content: system }] : [];
  let chars = SYSTEM_CHARS;
  let n = 0;
  while (chars < startKiB * 1024) {
    messages.push(...turn(n++, source, format));
    chars += TOOL_CHARS;
  }
  const tools = format === "chat" ? TOOLS : TOOLS.map(({ function: f }) => ({
    name: f.name,
    description: f.description,
    input_schema: f.parameters,
  }));
  const bodies: string[] = [];
  for (let i = 0; i < count; i++) {
    bodies.push(
      JSON.stringify(
        format === "chat"
          ? { model, messages, tools, max_tokens: 4096 }
          : { model, system: [{ type: "text", text: system }], messages, tools, max_tokens: 4096 },
      ),
    );
    messages.push(...turn(n++, source, format, round * 1_000_003));
  }
  return bodies;
}

/** One path of the agent rows: where it listens, its headers, the model it is sent. */
export interface AgentPath {
  name: string;
  /** The server's pid for its CPU (none for the mock itself). */
  pid?: number;
  base: string;
  headers: Record<string, string>;
  model: string;
}

export interface AgentResult {
  /** Server CPU per request, µs (summed over the turns). */
  cpu: Map<string, number>;
  /** Median latency per path, ms. */
  p50: Map<string, number>;
  /** The smallest and largest measured body, KiB. */
  kib: [number, number];
}

/**
 * Sends the same growing conversation through every path, one request at a
 * time, the paths' order rotating each turn: `rounds` rounds of `turns` turns,
 * each round growing the same starting conversation by new turns (an agent's
 * session going on), after `warmTurns` unmeasured ones (the first turn counts
 * the whole conversation; later ones warm the code a turn runs).
 */
export async function measureAgentTurns(
  paths: AgentPath[],
  rounds: number,
  turns: number,
  chatPath: string,
  warmTurns = 2,
): Promise<AgentResult> {
  const enc = new TextEncoder();
  const cpu = new Map<string, number>();
  const lat = new Map<string, number[]>();
  const measured = rounds * turns;
  const sizes: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const warm = r === 0 ? warmTurns : 0;
    const bodies = new Map(
      paths.map((p) => [p.model, agentBodies(turns + warm, 300, p.model, "chat", r)]),
    );
    for (const b of bodies.get(paths[0].model)!.slice(warm)) {
      sizes.push(enc.encode(b).length / 1024);
    }
    for (let i = 0; i < turns + warm; i++) {
      await agentTurn(paths, i, bodies, chatPath, i < warm ? null : { cpu, lat, measured });
    }
  }
  return {
    cpu,
    p50: new Map([...lat].map(([n, v]) => [n, median(v)])),
    kib: [Math.min(...sizes), Math.max(...sizes)],
  };
}

/** One turn through every path (rotating order); recorded unless `into` is null. */
async function agentTurn(
  paths: AgentPath[],
  i: number,
  bodies: Map<string, string[]>,
  chatPath: string,
  into: { cpu: Map<string, number>; lat: Map<string, number[]>; measured: number } | null,
): Promise<void> {
  for (let j = 0; j < paths.length; j++) {
    const p = paths[(i + j) % paths.length];
    const req = encodeRequest(new URL(chatPath, p.base), {
      headers: { "content-type": "application/json", ...p.headers },
      body: bodies.get(p.model)![i],
    });
    const c = await HttpConn.open(new URL(p.base));
    const c0 = p.pid ? schedCpuMs(p.pid) : 0;
    const t0 = performance.now();
    const res = await c.request(req);
    const ms = performance.now() - t0;
    c.close();
    if (res.status !== 200) throw new Error(`${p.name}: coding agent turn ${i}: ${res.status}`);
    // Work finished just after the answer (the receipt's commit) is the request's too.
    await new Promise((r) => setTimeout(r, 20));
    if (into === null) continue;
    if (p.pid) {
      const us = (schedCpuMs(p.pid) - c0) * 1000 / into.measured;
      into.cpu.set(p.name, (into.cpu.get(p.name) ?? 0) + us);
    }
    into.lat.set(p.name, [...(into.lat.get(p.name) ?? []), ms]);
  }
}
