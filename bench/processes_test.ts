import assert from "node:assert/strict";
import { spawnPinned } from "./processes.ts";

Deno.test("spawnPinned: a start that prints nothing is killed and started again", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const flag = `${dir}/first`;
    // The first start sleeps silently; the second announces itself.
    const script = `if [ -e ${flag} ]; then echo "ready on http://x" >&2; exec sleep 30; ` +
      `else touch ${flag}; exec sleep 30; fi`;
    const t0 = performance.now();
    const s = await spawnPinned(0, ["-c", script], /ready on (\S+)/, {
      program: "bash",
      silentMs: 300,
    });
    assert.equal(s.url, "http://x");
    assert.ok(performance.now() - t0 >= 300);
    await s.stop();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
