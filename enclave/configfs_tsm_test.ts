import assert from "node:assert/strict";
import {
  ConfigfsTsmError,
  createConfigfsTsmProvider,
  denoTsmFs,
  detectConfigfsTsm,
  type TsmFs,
} from "./configfs_tsm.ts";
import {
  FAKE_QUOTE_MARKER,
  FAKE_TDX_QUOTE_LENGTH,
  type FakeConfigfsTsmOptions,
  SEV_SNP_REPORT_DATA_OFFSET,
  SEV_SNP_REPORT_LENGTH,
  startFakeConfigfsTsm,
  TDX_V4_REPORT_DATA_OFFSET,
} from "./configfs_fake.ts";

function reportData(seed: number): Uint8Array {
  return Uint8Array.from({ length: 64 }, (_, i) => (seed * 31 + i * 7 + 1) & 0xff);
}

async function listEntries(root: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(root)) names.push(e.name);
  return names;
}

/** Runs `fn` against a fresh imitation in a temp dir, always cleaning up. */
async function withFake(
  options: FakeConfigfsTsmOptions,
  fn: (root: string, fs: TsmFs) => Promise<void>,
): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: "fake-tsm-" });
  const fake = startFakeConfigfsTsm(root, options);
  try {
    await fn(root, fake.fs);
  } finally {
    await fake.stop();
    await Deno.remove(root, { recursive: true });
  }
}

Deno.test("tdx: REPORTDATA at offset 568 equals the given bytes; entry removed", async () => {
  await withFake({ provider: "tdx_guest" }, async (root, fs) => {
    const provider = createConfigfsTsmProvider({ root, fs });
    assert.equal(provider.hardware, true);
    const rd = reportData(1);
    const q = await provider.getQuote(rd);
    assert.equal(q.tee_type, "tdx");
    assert.equal(q.provider, "tdx_guest");
    assert.equal(q.quote.length, FAKE_TDX_QUOTE_LENGTH);
    const view = new DataView(q.quote.buffer, q.quote.byteOffset);
    assert.equal(view.getUint16(0, true), 4);
    assert.equal(view.getUint32(4, true), 0x81);
    assert.deepEqual(
      q.quote.slice(TDX_V4_REPORT_DATA_OFFSET, TDX_V4_REPORT_DATA_OFFSET + 64),
      rd,
    );
    assert.ok(new TextDecoder().decode(q.quote).includes(FAKE_QUOTE_MARKER));
    assert.equal(q.aux, undefined);
    assert.deepEqual(await listEntries(root), []);
  });
});

Deno.test("sev: REPORT_DATA at 0x50 of a 1184-byte report; auxblob returned", async () => {
  await withFake({ provider: "sev_guest" }, async (root, fs) => {
    const provider = createConfigfsTsmProvider({ root, fs });
    const rd = reportData(2);
    const q = await provider.getQuote(rd);
    assert.equal(q.tee_type, "sev_snp");
    assert.equal(q.provider, "sev_guest");
    assert.equal(q.quote.length, SEV_SNP_REPORT_LENGTH);
    assert.deepEqual(
      q.quote.slice(SEV_SNP_REPORT_DATA_OFFSET, SEV_SNP_REPORT_DATA_OFFSET + 64),
      rd,
    );
    assert.ok(q.aux instanceof Uint8Array && q.aux.length > 0);
    assert.deepEqual(await listEntries(root), []);
  });
});

Deno.test("a generation race is detected and retried in a fresh entry", async () => {
  await withFake({ provider: "tdx_guest", raceOnce: true }, async (root, fs) => {
    const created: string[] = [];
    const spy: TsmFs = {
      ...fs,
      mkdir: (p) => {
        created.push(p);
        return fs.mkdir(p);
      },
    };
    const provider = createConfigfsTsmProvider({ root, fs: spy });
    const rd = reportData(3);
    const q = await provider.getQuote(rd);
    assert.deepEqual(
      q.quote.slice(TDX_V4_REPORT_DATA_OFFSET, TDX_V4_REPORT_DATA_OFFSET + 64),
      rd,
    );
    assert.equal(created.length, 2);
    assert.notEqual(created[0], created[1]);
    assert.deepEqual(await listEntries(root), []);
  });
});

Deno.test("a race on every attempt fails with a clear error after the bound", async () => {
  await withFake({ provider: "tdx_guest" }, async (root, fs) => {
    // Another writer bumps the generation between our write and our re-read, every time.
    const racing: TsmFs = {
      ...fs,
      async readFile(p) {
        const bytes = await fs.readFile(p);
        if (p.endsWith("/outblob")) {
          const generation = `${p.slice(0, -"outblob".length)}generation`;
          await Deno.writeFile(generation, new TextEncoder().encode("7\n"));
        }
        return bytes;
      },
    };
    const provider = createConfigfsTsmProvider({ root, fs: racing, maxAttempts: 2 });
    await assert.rejects(provider.getQuote(reportData(4)), (e: unknown) => {
      assert.ok(e instanceof ConfigfsTsmError);
      assert.match(e.message, /raced on all 2 attempts/);
      return true;
    });
    assert.deepEqual(await listEntries(root), []);
  });
});

Deno.test("a missing provider attribute is an error and the entry is still removed", async () => {
  await withFake({ provider: null }, async (root, fs) => {
    const provider = createConfigfsTsmProvider({ root, fs });
    await assert.rejects(provider.getQuote(reportData(5)), (e: unknown) => {
      assert.ok(e instanceof ConfigfsTsmError);
      assert.match(e.message, /no 'provider' attribute/);
      return true;
    });
    assert.deepEqual(await listEntries(root), []);
  });
});

Deno.test("an unknown provider name is an error", async () => {
  await withFake({ provider: "tdx_guest" }, async (root, fs) => {
    const foreign: TsmFs = {
      ...fs,
      async readFile(p) {
        if (p.endsWith("/provider")) return new TextEncoder().encode("arm_cca_guest\n");
        return await fs.readFile(p);
      },
    };
    const provider = createConfigfsTsmProvider({ root, fs: foreign });
    await assert.rejects(provider.getQuote(reportData(6)), /"arm_cca_guest" is not tdx_guest/);
    assert.deepEqual(await listEntries(root), []);
  });
});

Deno.test("wrong report-data length is rejected before touching the fs", async () => {
  const touched: string[] = [];
  const recording: TsmFs = {
    mkdir: (p) => Promise.resolve(void touched.push(`mkdir ${p}`)),
    rmdir: (p) => Promise.resolve(void touched.push(`rmdir ${p}`)),
    readFile: (p) => Promise.reject(new Error(`unexpected read ${p}`)),
    writeFile: (p) => Promise.reject(new Error(`unexpected write ${p}`)),
    isDirectory: () => Promise.resolve(true),
  };
  const provider = createConfigfsTsmProvider({ root: "/nowhere", fs: recording });
  for (const len of [0, 32, 63, 65, 128]) {
    await assert.rejects(provider.getQuote(new Uint8Array(len)), RangeError);
  }
  await assert.rejects(provider.getQuote("x".repeat(64) as unknown as Uint8Array), TypeError);
  assert.deepEqual(touched, []);
});

Deno.test("20 concurrent callers each get a quote over their own report data", async () => {
  await withFake({ provider: "tdx_guest" }, async (root, fs) => {
    let inFlight = 0;
    let maxInFlight = 0;
    const counting: TsmFs = {
      ...fs,
      async mkdir(p) {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await fs.mkdir(p);
      },
      async rmdir(p) {
        await fs.rmdir(p);
        inFlight--;
      },
    };
    const provider = createConfigfsTsmProvider({ root, fs: counting });
    const inputs = Array.from({ length: 20 }, (_, i) => reportData(100 + i));
    const quotes = await Promise.all(inputs.map((rd) => provider.getQuote(rd)));
    quotes.forEach((q, i) => {
      assert.deepEqual(
        q.quote.slice(TDX_V4_REPORT_DATA_OFFSET, TDX_V4_REPORT_DATA_OFFSET + 64),
        inputs[i],
      );
    });
    assert.equal(maxInFlight, 1, "requests must be serialized");
    assert.deepEqual(await listEntries(root), []);
  });
});

Deno.test("a failed request does not poison the queue", async () => {
  await withFake({ provider: "sev_guest" }, async (root, fs) => {
    let failNext = true;
    const flaky: TsmFs = {
      ...fs,
      writeFile(p, d) {
        if (failNext) {
          failNext = false;
          return Promise.reject(new Error("EIO"));
        }
        return fs.writeFile(p, d);
      },
    };
    const provider = createConfigfsTsmProvider({ root, fs: flaky });
    const [a, b] = await Promise.allSettled([
      provider.getQuote(reportData(7)),
      provider.getQuote(reportData(8)),
    ]);
    assert.equal(a.status, "rejected");
    assert.equal(b.status, "fulfilled");
    assert.deepEqual(await listEntries(root), []);
  });
});

Deno.test("a caller mutating its buffer while queued does not change its quote", async () => {
  await withFake({ provider: "tdx_guest", delayMs: 20 }, async (root, fs) => {
    const provider = createConfigfsTsmProvider({ root, fs });
    const first = provider.getQuote(reportData(9));
    const buf = reportData(10);
    const expected = buf.slice();
    const second = provider.getQuote(buf);
    buf.fill(0);
    await first;
    const q = await second;
    assert.deepEqual(
      q.quote.slice(TDX_V4_REPORT_DATA_OFFSET, TDX_V4_REPORT_DATA_OFFSET + 64),
      expected,
    );
  });
});

Deno.test("a slow quote does not block the event loop", async () => {
  await withFake({ provider: "tdx_guest", delayMs: 150 }, async (root, fs) => {
    const provider = createConfigfsTsmProvider({ root, fs });
    const order: string[] = [];
    const quote = provider.getQuote(reportData(11)).then(() => order.push("quote"));
    await new Promise((r) => setTimeout(r, 10)).then(() => order.push("timer"));
    await quote;
    assert.deepEqual(order, ["timer", "quote"]);
  });
});

Deno.test("mkdir failure is reported with the root, and nothing is left behind", async () => {
  const root = await Deno.makeTempDir({ prefix: "fake-tsm-" });
  try {
    const provider = createConfigfsTsmProvider({ root: `${root}/absent` });
    await assert.rejects(provider.getQuote(reportData(12)), /cannot create an entry under/);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("detectConfigfsTsm: present only for an existing directory", async () => {
  const root = await Deno.makeTempDir({ prefix: "fake-tsm-" });
  try {
    assert.equal(await detectConfigfsTsm(root), true);
    assert.equal(await detectConfigfsTsm(`${root}/missing`), false);
    await Deno.writeFile(`${root}/file`, new Uint8Array());
    assert.equal(await detectConfigfsTsm(`${root}/file`, denoTsmFs), false);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("maxAttempts must be a positive integer", () => {
  assert.throws(() => createConfigfsTsmProvider({ maxAttempts: 0 }), RangeError);
  assert.throws(() => createConfigfsTsmProvider({ maxAttempts: 1.5 }), RangeError);
});
