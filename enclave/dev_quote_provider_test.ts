import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  DEV_QUOTE_LENGTH,
  DEV_QUOTE_MAGIC,
  DEV_TEE_TYPE,
  parseDevQuote,
} from "../src/aci/dev_quote.ts";
import { createDevQuoteProvider, DEV_QUOTE_WARNING } from "./dev_quote_provider.ts";

const rd = Uint8Array.from({ length: 64 }, (_, i) => 255 - i);

Deno.test("dev provider is marked non-hardware everywhere", async () => {
  const provider = createDevQuoteProvider();
  assert.equal(provider.hardware, false);
  const q = await provider.getQuote(rd);
  assert.equal(q.tee_type, DEV_TEE_TYPE);
  assert.notEqual(q.tee_type, "tdx");
  assert.notEqual(q.tee_type, "sev_snp");
  assert.match(q.tee_type, /insecure/);
  assert.match(DEV_QUOTE_WARNING, /not hardware evidence/);
});

Deno.test("dev quote = magic ‖ report_data ‖ sha256(magic ‖ report_data)", async () => {
  const q = (await createDevQuoteProvider().getQuote(rd)).quote;
  const magic = new TextEncoder().encode(DEV_QUOTE_MAGIC);
  assert.equal(q.length, DEV_QUOTE_LENGTH);
  assert.deepEqual(q.slice(0, magic.length), magic);
  assert.deepEqual(q.slice(magic.length, magic.length + 64), rd);
  const expected = createHash("sha256").update(magic).update(rd).digest();
  assert.deepEqual(q.slice(magic.length + 64), new Uint8Array(expected));
  assert.deepEqual(parseDevQuote(q), rd);
});

Deno.test("dev quote cannot pass as a TDX quote or an SNP report", async () => {
  const q = (await createDevQuoteProvider().getQuote(rd)).quote;
  const version = new DataView(q.buffer, q.byteOffset).getUint16(0, true);
  assert.ok(version !== 4 && version !== 5, "TDX version field must not be 4 or 5");
  assert.notEqual(q.length, 1184);
});

Deno.test("parseDevQuote rejects tampered or foreign bytes", async () => {
  const q = (await createDevQuoteProvider().getQuote(rd)).quote;
  const tampered = q.slice();
  tampered[DEV_QUOTE_MAGIC.length + 3] ^= 1;
  assert.throws(() => parseDevQuote(tampered));
  assert.throws(() => parseDevQuote(q.slice(0, -1)));
  const foreign = q.slice();
  foreign[0] = 0x04;
  assert.throws(() => parseDevQuote(foreign));
});

Deno.test("dev provider rejects report data that is not 64 bytes", async () => {
  const provider = createDevQuoteProvider();
  await assert.rejects(provider.getQuote(new Uint8Array(32)), RangeError);
  await assert.rejects(provider.getQuote(new Uint8Array(65)), RangeError);
});
