import assert from "node:assert/strict";
import {
  fakeSevSnpReport,
  fakeTdxQuote,
  SEV_SNP_REPORT_DATA_OFFSET,
  startFakeConfigfsTsm,
  TDX_V4_REPORT_DATA_OFFSET,
} from "./configfs_fake.ts";

const rd = Uint8Array.from({ length: 64 }, (_, i) => i + 1);
const dec = new TextDecoder();

Deno.test("fake: a new entry gets attributes; each inblob write bumps generation", async () => {
  const root = await Deno.makeTempDir({ prefix: "fake-tsm-" });
  const fake = startFakeConfigfsTsm(root, { provider: "sev_guest" });
  try {
    const entry = `${root}/e1`;
    await fake.fs.mkdir(entry);
    assert.equal(dec.decode(await Deno.readFile(`${entry}/generation`)), "0\n");
    assert.equal(dec.decode(await Deno.readFile(`${entry}/provider`)), "sev_guest\n");
    await fake.fs.writeFile(`${entry}/inblob`, rd);
    const out = await fake.fs.readFile(`${entry}/outblob`);
    assert.deepEqual(out.slice(SEV_SNP_REPORT_DATA_OFFSET, SEV_SNP_REPORT_DATA_OFFSET + 64), rd);
    assert.equal(dec.decode(await fake.fs.readFile(`${entry}/generation`)), "1\n");
    // The same bytes written again are a second write.
    await fake.fs.writeFile(`${entry}/inblob`, rd);
    await fake.fs.readFile(`${entry}/outblob`);
    assert.equal(dec.decode(await fake.fs.readFile(`${entry}/generation`)), "2\n");
    assert.equal(fake.quotesIssued, 2);
    await fake.fs.rmdir(entry);
    await assert.rejects(Deno.stat(entry), Deno.errors.NotFound);
  } finally {
    await fake.stop();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("fake: tdx rejects a short inblob like the kernel (EINVAL on outblob)", async () => {
  const root = await Deno.makeTempDir({ prefix: "fake-tsm-" });
  const fake = startFakeConfigfsTsm(root, { provider: "tdx_guest" });
  try {
    await fake.fs.mkdir(`${root}/e`);
    await fake.fs.writeFile(`${root}/e/inblob`, new Uint8Array(32).fill(1));
    await assert.rejects(fake.fs.readFile(`${root}/e/outblob`), /EINVAL/);
    await assert.rejects(fake.fs.rmdir(`${root}/e/outblob`), /not an entry/);
  } finally {
    await fake.stop();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("fake: layouts put report data at the documented offsets", () => {
  const tdx = fakeTdxQuote(rd);
  assert.deepEqual(tdx.slice(TDX_V4_REPORT_DATA_OFFSET, TDX_V4_REPORT_DATA_OFFSET + 64), rd);
  assert.ok(dec.decode(tdx.slice(28, 48)).startsWith("FAKE-CONFIGFS-TSM"));
  const sev = fakeSevSnpReport(rd);
  assert.equal(sev.length, 1184);
  assert.deepEqual(sev.slice(0x50, 0x90), rd);
});

Deno.test("fake: the adapter refuses to work after stop", async () => {
  const root = await Deno.makeTempDir({ prefix: "fake-tsm-" });
  const fake = startFakeConfigfsTsm(root, { provider: "tdx_guest" });
  await fake.stop();
  try {
    await assert.rejects(fake.fs.mkdir(`${root}/late`), /stopped/);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
