import assert from "node:assert/strict";
import { freeze, holdsWriteLock, spawnPinned, stateLetter } from "./processes.ts";

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

Deno.test("holdsWriteLock: a held write lock counts, read locks and a waiter's line do not", () => {
  const locks = [
    "9: POSIX  ADVISORY  WRITE 880 fe:00:16042438 123 123",
    "36: POSIX  ADVISORY  READ 895 fe:00:16042449 128 128",
    "40: -> POSIX  ADVISORY  WRITE 901 fe:00:16042438 123 123",
    "41: FLOCK  ADVISORY  WRITE 902 fe:00:2229641 0 EOF",
  ].join("\n");
  assert.equal(holdsWriteLock(locks, 880), true);
  assert.equal(holdsWriteLock(locks, 895), false);
  assert.equal(holdsWriteLock(locks, 901), false, "waiting is not holding");
  assert.equal(holdsWriteLock(locks, 902), true);
  assert.equal(holdsWriteLock(locks, 88), false, "a pid is matched whole");
});

Deno.test("freeze: a process is stopped only once it lets go of its write lock", async () => {
  const dir = await Deno.makeTempDir();
  const file = `${dir}/lock`;
  await Deno.writeTextFile(file, "");
  // Holds an exclusive lock for 400 ms, then releases it and idles.
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `const f = await Deno.open(${JSON.stringify(file)}, { read: true, write: true });
       await f.lock(true); console.log("locked");
       await new Promise((r) => setTimeout(r, 400)); await f.unlock(); console.log("unlocked");
       await new Promise((r) => setTimeout(r, 60_000));`,
    ],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  try {
    assert.match((await lines.read()).value ?? "", /locked/);
    const t0 = performance.now();
    assert.equal(await freeze(child.pid), true);
    const waited = performance.now() - t0;
    assert.ok(waited >= 250, `stopped after ${waited} ms, while the lock was still held`);
    assert.equal(stateLetter(child.pid), "T", "stopped");
  } finally {
    Deno.kill(child.pid, "SIGCONT");
    child.kill("SIGKILL");
    await child.status;
    await lines.cancel();
    await Deno.remove(dir, { recursive: true });
  }
});
