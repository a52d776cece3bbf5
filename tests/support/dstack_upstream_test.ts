import assert from "node:assert/strict";
import { hexToBytes } from "../../src/aci/hex.ts";
import { parseTdxQuote } from "../../src/verify/tdx/quote.ts";
import { expectedReportData } from "../../src/verify/dstack/report_data.ts";
import { forgeTdxEnvironment } from "./tdx_forge.ts";
import { makeTestCa } from "./tls_servers.ts";
import { startDstackUpstream } from "./dstack_upstream.ts";

const forge = await forgeTdxEnvironment();
const ca = await makeTestCa();

Deno.test("dstack upstream: serves the demo API and a v2-bound attestation report over TLS", async () => {
  const u = await startDstackUpstream({ forge, ca, models: ["m1"] });
  const client = Deno.createHttpClient({ caCerts: [u.caPem] });
  try {
    const nonce = "5a".repeat(32);
    const res = await fetch(`${u.url}/v1/attestation/report?nonce=${nonce}&signing_algo=ecdsa`, {
      client,
    });
    assert.equal(res.status, 200);
    const report = await res.json();
    assert.equal(report.request_nonce, nonce);
    assert.equal(report.signing_address, u.signingAddress);
    const q = parseTdxQuote(hexToBytes(report.intel_quote));
    if (!q.ok) throw new Error(q.reason);
    const rd = expectedReportData({
      version: "v2",
      address: hexToBytes(u.signingAddress.slice(2)),
      spkiSha256: hexToBytes(u.spkiSha256),
      nonce: hexToBytes(nonce),
    });
    assert.ok(rd.ok);
    assert.deepEqual(q.quote.report.reportData, rd.reportData);
    assert.equal(u.attestationRequests(), 1);
    assert.equal(u.demo.stats.total, 0, "attestation is not counted as inference traffic");

    const chat = await fetch(`${u.url}/v1/chat/completions`, {
      client,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m1", messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(chat.status, 200);
    assert.equal((await chat.json()).object, "chat.completion");
    assert.equal(u.demo.stats.total, 1);
  } finally {
    client.close();
    await u.close();
  }
});
