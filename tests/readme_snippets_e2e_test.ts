/**
 * Every TypeScript snippet in README.md runs as written (#31 section 4),
 * where its first line says to put it (`// name.ts (any directory)` or
 * `// name.ts (the repository's root)`), with `KEY` set as the README says,
 * against a real gateway. Only the port differs: the README's 8787 becomes
 * the test gateway's.
 */
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { ROOT } from "./support/task_line.ts";

const README = await Deno.readTextFile(`${ROOT}README.md`);
const SNIPPETS = [...README.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
const PLACE = /^\/\/ (\w+\.ts) \((any directory|the repository's root)\)\n/;

Deno.test("README: every TypeScript snippet says where it goes and runs there as written", async () => {
  assert.ok(SNIPPETS.length >= 3, "the README's SDK snippets");
  // As `task dev` runs: the demo upstreams, the confidential one verified by the dev verifier.
  const gw = await startTestGateway();
  const written: string[] = [];
  const elsewhere = await Deno.makeTempDir();
  try {
    for (const snippet of SNIPPETS) {
      const place = snippet.match(PLACE);
      assert.ok(place, `a snippet without its place:\n${snippet.slice(0, 200)}`);
      const [, name, where] = place;
      const code = snippet.replaceAll("http://127.0.0.1:8787", gw.url);
      // In the root: the file beside deno.json (a unique name; removed afterwards), run from there.
      const inRoot = where !== "any directory";
      const dir = inRoot ? ROOT : elsewhere;
      const file = inRoot ? `${name.replace(/\.ts$/, "")}_${crypto.randomUUID()}.ts` : name;
      await Deno.writeTextFile(`${dir}/${file}`, code);
      written.push(`${dir}/${file}`);
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", file],
        cwd: dir,
        env: { KEY: gw.apiKey, NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const dec = new TextDecoder();
      assert.equal(
        out.code,
        0,
        `${name} (${where}):\n${dec.decode(out.stderr)}\n${dec.decode(out.stdout)}`,
      );
      // The E2EE example leaves what `task verify` takes beside it.
      if (name === "e2ee_example.ts") {
        const out = `${dir}/.data/e2ee`;
        for (const f of ["receipt-id", "request.json", "response.bin", "e2ee.json"]) {
          assert.ok((await Deno.stat(`${out}/${f}`)).size > 0, f);
          written.push(`${out}/${f}`);
        }
        assert.match(await Deno.readTextFile(`${out}/receipt-id`), /^rcpt-[0-9a-f]{32}\n$/);
        // It holds the client's private key.
        assert.equal((await Deno.stat(`${out}/e2ee.json`)).mode! & 0o777, 0o600);
        written.push(out); // removed once empty
      }
    }
    // Every snippet reached the gateway: one log line per request it made.
    assert.ok(gw.logs.filter((l) => l.route === "/v1/chat/completions").length >= 4);
  } finally {
    for (const f of written) await Deno.remove(f).catch(() => {});
    await Deno.remove(elsewhere, { recursive: true });
    await gw.close();
  }
});
