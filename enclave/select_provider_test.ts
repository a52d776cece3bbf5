import assert from "node:assert/strict";
import { startFakeConfigfsTsm } from "./configfs_fake.ts";
import { DEV_TEE_TYPE } from "../src/aci/dev_quote.ts";
import { denoTsmFs, type TsmFs } from "./configfs_tsm.ts";
import { type QuoteMode, selectQuoteProvider } from "./select_provider.ts";

const rd = new Uint8Array(64).fill(7);

async function withDirs(fn: (present: string, absent: string) => Promise<void>) {
  const present = await Deno.makeTempDir({ prefix: "fake-tsm-" });
  try {
    await fn(present, `${present}/no-such-tsm`);
  } finally {
    await Deno.remove(present, { recursive: true });
  }
}

Deno.test("auto without configfs and without allowDev throws (no silent fallback)", async () => {
  await withDirs(async (_present, absent) => {
    await assert.rejects(
      selectQuoteProvider({ mode: "auto", root: absent, allowDev: false }),
      (e: unknown) => {
        assert.ok(e instanceof Error);
        assert.ok(e.message.includes(absent));
        assert.match(e.message, /dev quotes are not allowed/);
        return true;
      },
    );
  });
});

Deno.test("auto without configfs uses dev only when allowDev is true", async () => {
  await withDirs(async (_present, absent) => {
    const p = await selectQuoteProvider({ mode: "auto", root: absent, allowDev: true });
    assert.equal(p.hardware, false);
    assert.equal((await p.getQuote(rd)).tee_type, DEV_TEE_TYPE);
  });
});

Deno.test("auto prefers configfs when present, even if dev is allowed", async () => {
  await withDirs(async (present) => {
    const fake = startFakeConfigfsTsm(present, { provider: "tdx_guest" });
    try {
      const p = await selectQuoteProvider({
        mode: "auto",
        root: present,
        allowDev: true,
        fs: fake.fs,
      });
      assert.equal(p.hardware, true);
      assert.equal((await p.getQuote(rd)).tee_type, "tdx");
    } finally {
      await fake.stop();
    }
  });
});

Deno.test("configfs mode requires the interface and names the path", async () => {
  await withDirs(async (present, absent) => {
    await assert.rejects(
      selectQuoteProvider({ mode: "configfs", root: absent, allowDev: true }),
      (e: unknown) => e instanceof Error && e.message.includes(absent),
    );
    const p = await selectQuoteProvider({ mode: "configfs", root: present, allowDev: false });
    assert.equal(p.hardware, true);
  });
});

Deno.test("dev mode needs allowDev; unknown modes are rejected", async () => {
  await assert.rejects(
    selectQuoteProvider({ mode: "dev", allowDev: false }),
    /quote mode "dev" .*identity\.allow_dev_quotes: true/,
  );
  const p = await selectQuoteProvider({ mode: "dev", allowDev: true });
  assert.equal(p.hardware, false);
  await assert.rejects(
    selectQuoteProvider({ mode: "tdx" as QuoteMode, allowDev: true }),
    /unknown quote mode "tdx"/,
  );
});

Deno.test("a root Deno may not look at (NotCapable) fails every mode, naming the fix", async () => {
  const refusing: TsmFs = {
    ...denoTsmFs,
    isDirectory: () => Promise.reject(new Deno.errors.NotCapable("Requires all access")),
  };
  for (const mode of ["auto", "configfs"] as const) {
    for (const allowDev of [false, true]) {
      await assert.rejects(
        selectQuoteProvider({
          mode,
          root: "/sys/kernel/config/tsm/report",
          allowDev,
          fs: refusing,
        }),
        (e: unknown) => {
          assert.ok(e instanceof Error);
          assert.match(e.message, /out of this process's reach/);
          assert.match(e.message, /--allow-all/);
          assert.match(e.message, /identity\.configfs_root/);
          return true;
        },
      );
    }
  }
});
