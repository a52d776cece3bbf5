import assert from "node:assert/strict";
import { bytesToHex } from "./hex.ts";
import { attestationStatement, reportData, reportDataSlot } from "./statement.ts";

const DIGEST = "sha256:53a5cd44b30dcc51999754c719f2628a041f174ecbf9662a6f8e898a10cd9371";
const NONCE = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

Deno.test("statement: exact bytes and report_data with a nonce (ACI vector)", () => {
  assert.equal(
    attestationStatement(DIGEST, NONCE),
    `{"keyset_digest":"${DIGEST}","nonce":"${NONCE}","purpose":"aci.report_data.v1"}`,
  );
  assert.equal(
    bytesToHex(reportData(DIGEST, NONCE)),
    "df2174d28130852b413646a3786927b93e94c11d770268b65def8bdba45cb49e",
  );
});

Deno.test("statement: exact bytes and report_data without a nonce (ACI vector)", () => {
  assert.equal(
    attestationStatement(DIGEST, null),
    `{"keyset_digest":"${DIGEST}","nonce":null,"purpose":"aci.report_data.v1"}`,
  );
  assert.equal(
    bytesToHex(reportData(DIGEST, null)),
    "0633919ca3f00e97bafaa3304278eb22420cc3ff0d19f87dfca2d3f7508150bc",
  );
});

Deno.test("statement: the 64-byte slot is report_data then 32 zero bytes", () => {
  const slot = reportDataSlot(reportData(DIGEST, NONCE));
  assert.equal(
    bytesToHex(slot),
    "df2174d28130852b413646a3786927b93e94c11d770268b65def8bdba45cb49e" + "00".repeat(32),
  );
  assert.throws(() => reportDataSlot(new Uint8Array(31)));
});

Deno.test("statement: malformed digest or nonce is refused", () => {
  assert.throws(() => attestationStatement("sha256:XYZ", null));
  assert.throws(() => attestationStatement(DIGEST, NONCE.toUpperCase()));
});
