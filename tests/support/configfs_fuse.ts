/**
 * Mounts `configfs_tsm_fuse.py` (configfs-tsm's report interface over FUSE)
 * on a directory, so a gateway started with its real command line and real
 * file I/O can get quotes from it. Needs root, /dev/fuse and python3-fusepy
 * (`.ci/run` installs it); a missing piece fails the test, never skips it.
 */

const SCRIPT = new URL("./configfs_tsm_fuse.py", import.meta.url).pathname;

export interface FuseTsm {
  root: string;
  unmount(): Promise<void>;
}

export async function mountFuseTsm(
  dir: string,
  provider: "tdx_guest" | "sev_guest",
): Promise<FuseTsm> {
  const child = new Deno.Command("/usr/bin/python3", {
    args: [SCRIPT, dir, provider],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const errText = new Response(child.stderr).text();
  const ready = await Promise.race([
    reader.read().then((r) => r.value?.includes("ready") === true),
    new Promise<false>((r) => setTimeout(() => r(false), 15_000)),
  ]);
  if (!ready) {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
    await child.status;
    throw new Error(
      `could not mount the configfs-tsm FUSE imitation on ${dir} (needs root, /dev/fuse and ` +
        `python3-fusepy: apt-get install python3-fusepy): ${await errText}`,
    );
  }
  return {
    root: dir,
    async unmount() {
      await new Deno.Command("umount", { args: [dir], stdout: "null", stderr: "null" }).output();
      const done = await Promise.race([
        child.status.then(() => true),
        new Promise<false>((r) => setTimeout(() => r(false), 5_000)),
      ]);
      if (!done) {
        child.kill("SIGKILL");
        await child.status;
        await new Deno.Command("umount", { args: ["-l", dir], stderr: "null" }).output();
      }
      await reader.cancel().catch(() => {});
      await errText.catch(() => {});
    },
  };
}
