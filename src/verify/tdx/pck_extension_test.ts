import assert from "node:assert/strict";
import "reflect-metadata";
import { X509Certificate } from "@peculiar/x509";
import { parseTdxQuote } from "./quote.ts";
import { parsePckExtension, parsePckExtensionValue } from "./pck_extension.ts";

const FIX = new URL("../../../tests/fixtures/tdx/", import.meta.url);

Deno.test({
  name: "SGX extension of a real PCK certificate: FMSPC, PCESVN, TCB components",
  fn: () => {
    const q = parseTdxQuote(Deno.readFileSync(new URL("dcap-qvl-tdx_quote", FIX)));
    assert.ok(q.ok);
    if (!q.ok) return;
    const r = parsePckExtension(new X509Certificate(new Uint8Array(q.quote.pckChainDer[0])));
    assert.ok(r.ok, r.ok ? "" : r.reason);
    if (!r.ok) return;
    assert.equal(r.ext.fmspc, "b0c06f000000");
    assert.equal(r.ext.pceId, "0000");
    assert.equal(r.ext.sgxTcbComponents.length, 16);
    assert.equal(
      r.ext.cpuSvn,
      r.ext.sgxTcbComponents.map((n) => n.toString(16).padStart(2, "0")).join(""),
    );
  },
});

Deno.test("malformed SGX extension values give reasons", () => {
  assert.deepEqual(parsePckExtensionValue(Uint8Array.of(0x30, 0x05, 0x00)), {
    ok: false,
    reason: "PCK certificate SGX extension: malformed DER",
  });
  assert.deepEqual(parsePckExtensionValue(Uint8Array.of(0x30, 0x00)), {
    ok: false,
    reason: "PCK certificate SGX extension: missing TCB, FMSPC, PCE-ID or PPID",
  });
});
