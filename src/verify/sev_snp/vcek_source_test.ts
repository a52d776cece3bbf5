import assert from "node:assert/strict";
import { parseSnpReport, type SnpReport } from "./report.ts";
import { kdsVcekSource, kdsVcekUrl, localVcekSource } from "./vcek_source.ts";

const FIX = new URL("../../../tests/fixtures/sev-snp/", import.meta.url);
const vcek = Deno.readFileSync(new URL("go-sev-guest-vcek.der", FIX));
function realReport(): SnpReport {
  const p = parseSnpReport(Deno.readFileSync(new URL("go-sev-guest-attestation.bin", FIX)));
  if (!p.ok) throw new Error(p.reason);
  return p.report;
}

Deno.test("VCEK directory: the real VCEK is picked for the real report, by hwID and TCB", async () => {
  const r = realReport();
  const other = new Uint8Array(vcek.length); // not a certificate at all
  assert.deepEqual(await localVcekSource([other, vcek]).get(r, "Milan"), vcek);
  // The same chip at another TCB needs another VCEK.
  const newer = { ...r, reportedTcb: { ...r.reportedTcb, snp: r.reportedTcb.snp + 1 } };
  await assert.rejects(
    () => localVcekSource([vcek], "/vceks").get(newer, "Milan"),
    /no VCEK in \/vceks matches CHIP_ID [0-9a-f]{16}… at the report's REPORTED_TCB for Milan/,
  );
});

Deno.test("KDS: the VCEK URL names product, hwID and the REPORTED_TCB SPLs", () => {
  const r = realReport();
  const t = r.reportedTcb;
  const hwid = Array.from(r.chipId, (b) => b.toString(16).padStart(2, "0")).join("");
  assert.equal(hwid.length, 128);
  assert.equal(
    kdsVcekUrl("https://kdsintf.amd.com/", "Milan", r),
    `https://kdsintf.amd.com/vcek/v1/Milan/${hwid}?blSPL=${t.bootloader}&teeSPL=${t.tee}` +
      `&snpSPL=${t.snp}&ucodeSPL=${t.microcode}`,
  );
});

Deno.test("KDS: answers are cached, failures and non-certificates are not", async () => {
  const r = realReport();
  const answers = [
    new Response("busy", { status: 503 }),
    new Response(new Uint8Array(0)),
    new Response(vcek.slice()),
  ];
  const asked: string[] = [];
  const kds = kdsVcekSource({
    baseUrl: "https://kds.test",
    fetch: (url) => {
      asked.push(url);
      return Promise.resolve(answers.shift()!);
    },
  });
  await assert.rejects(() => kds.get(r, "Milan"), /KDS answered HTTP 503 for the VCEK/);
  await assert.rejects(() => kds.get(r, "Milan"), /KDS answered 0 bytes, not a VCEK/);
  assert.deepEqual(await kds.get(r, "Milan"), vcek);
  assert.deepEqual(await kds.get(r, "Milan"), vcek);
  assert.equal(asked.length, 3, "the fourth lookup was served from the cache");
});
