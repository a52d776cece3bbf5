/**
 * Metrics under `task dev` (#31): `gateway_build_info`, token counters by
 * model and provider, and process metrics (CPU, memory, file descriptors)
 * without opting in to prom-client's costlier collectors — read at scrape
 * time only, so they work with the dev task's permissions and cost nothing
 * per request.
 */
import assert from "node:assert/strict";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { ROOT, spawnListening, taskArgs } from "./support/task_line.ts";

const TOKEN = "metrics-dev-operator-token-" + "7e21".repeat(8);

interface Family {
  name: string;
  metrics: { value?: string; labels?: Record<string, string> }[];
}

Deno.test("task dev: build_info, token counters by model and provider, process metrics", async () => {
  const dir = await Deno.makeTempDir();
  const args = (await taskArgs("dev")).map((a) => a === "main.ts" ? `${ROOT}main.ts` : a);
  const gw = await spawnListening(Deno.execPath(), [...args, "--port", "0"], {
    cwd: dir,
    env: { GATEWAY_ADMIN_TOKEN: TOKEN },
  });
  try {
    const started = Date.now();
    while (!gw.stderr.some((l) => l.startsWith("cgw-"))) {
      if (Date.now() - started > 30_000) throw new Error("no dev key printed");
      await new Promise((r) => setTimeout(r, 20));
    }
    const key = gw.stderr.find((l) => l.startsWith("cgw-"))!;
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "demo/echo",
        messages: [{ role: "user", content: "count these tokens" }],
        provider: { only: ["plain"] },
      }),
    });
    assert.equal(res.status, 200);
    const usage = (await res.json()).usage;

    const scrape = await fetch(`${gw.url}/admin/v1/metrics`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(scrape.status, 200);
    const families = parsePrometheusTextFormat(await scrape.text()) as Family[];
    const family = (name: string) => {
      const f = families.find((f) => f.name === name);
      assert.ok(f, `${name} is served`);
      return f;
    };
    const build = family("gateway_build_info").metrics[0];
    assert.equal(build.value, "1");
    assert.equal(build.labels?.api_version, "1.0.0");
    assert.match(build.labels?.deno ?? "", /^2\.9\.6$/);
    const tokens = family("gateway_tokens_total").metrics;
    const count = (kind: string) =>
      Number(
        tokens.find((m) =>
          m.labels?.model === "demo/echo" && m.labels?.provider === "plain" &&
          m.labels?.kind === kind
        )?.value,
      );
    assert.equal(count("prompt"), usage.prompt_tokens);
    assert.equal(count("completion"), usage.completion_tokens);
    assert.ok(Number(family("process_resident_memory_bytes").metrics[0].value) > 10_000_000);
    assert.ok(Number(family("process_cpu_seconds_total").metrics[0].value) > 0);
    // /proc/self/fd needs --allow-all, which task dev does not grant: absent rather than wrong.
    assert.ok(!families.some((f) => f.name === "process_open_fds"));
    assert.ok(Number(family("process_start_time_seconds").metrics[0].value) > 1.7e9);
  } finally {
    assert.equal((await gw.stop()).code, 0);
    await Deno.remove(dir, { recursive: true });
  }
});
