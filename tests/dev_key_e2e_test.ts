/**
 * `task dev` (main.ts serve --dev) reuses its development key across restarts (#17 item 8),
 * and outlives a SIGHUP (it has no configuration file to reload).
 */
import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url).pathname;
const TOKEN = "dev-e2e-operator-token-" + "9".repeat(20);

async function startDev(
  cwd: string,
): Promise<{ key: string; url: string; hup: () => void; stop: () => Promise<void> }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--config",
      `${ROOT}deno.json`,
      `${ROOT}main.ts`,
      "serve",
      "--dev",
      "--port",
      "0",
    ],
    cwd,
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1", GATEWAY_ADMIN_TOKEN: TOKEN, GATEWAY_PROCESS_METRICS: "on" },
  }).spawn();
  const lines: string[] = [];
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  const deadline = Date.now() + 60_000;
  while (!lines.some((l) => l.startsWith("cgw-"))) {
    if (Date.now() > deadline) throw new Error(`dev gateway did not start:\n${lines.join("\n")}`);
    const { value, done } = await reader.read();
    if (done) throw new Error(`dev gateway exited:\n${lines.join("\n")}`);
    buf += value;
    const parts = buf.split("\n");
    buf = parts.pop()!;
    lines.push(...parts);
  }
  const url = lines.map((l) => /listening on (http:\/\/\S+)\/v1/.exec(l)?.[1]).find(Boolean)!;
  const key = lines.find((l) => l.startsWith("cgw-"))!;
  assert.ok(lines.some((l) => l.startsWith("development API key")));
  // The process to signal, named once it serves.
  assert.ok(lines.includes(`gateway pid ${child.pid}: SIGTERM drains and stops it`), lines[0]);
  return {
    key,
    url,
    hup: () => child.kill("SIGHUP"),
    async stop() {
      child.kill("SIGTERM");
      await child.status;
      await reader.cancel().catch(() => {});
    },
  };
}

Deno.test("task dev reuses its development key across restarts; main.ts serves metrics", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const first = await startDev(dir);
    await first.stop();
    const second = await startDev(dir);
    try {
      assert.equal(second.key, first.key, "the same key after a restart");
      const res = await fetch(`${second.url}/v1/key`, {
        headers: { authorization: `Bearer ${second.key}` },
      });
      const body = await res.json();
      assert.equal(res.status, 200);
      assert.equal(body.data.tier, "pro");
      assert.equal(body.data.balance, "100");
      // SIGHUP has no file to reload here: ignored (with a log line), not the end of the process.
      second.hup();
      await new Promise((r) => setTimeout(r, 300));
      const again = await fetch(`${second.url}/v1/key`, {
        headers: { authorization: `Bearer ${second.key}` },
      });
      await again.body?.cancel();
      assert.equal(again.status, 200, "still serving after SIGHUP");
      // The real binary path records process metrics when asked (GATEWAY_PROCESS_METRICS=on).
      const m = await fetch(`${second.url}/admin/v1/metrics`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      const text = await m.text();
      assert.equal(m.status, 200);
      assert.match(text, /^process_resident_memory_bytes \d+/m);
      assert.match(text, /^process_open_fds \d+/m);
      // The accept loop's connections, by listener (this scrape's own connection is open).
      assert.match(text, /^gateway_open_connections\{listener="base"\} [1-9]/m);
      assert.match(
        text,
        /^gateway_connections_closed_total\{listener="base",reason="header_timeout"\} \d+/m,
      );
      assert.match(text, /^gateway_requests_total\{endpoint="\/v1\/key",status="200"/m);
    } finally {
      await second.stop();
    }
    const mode = (await Deno.stat(`${dir}/.data/dev.key`)).mode! & 0o777;
    assert.equal(mode, 0o600);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
