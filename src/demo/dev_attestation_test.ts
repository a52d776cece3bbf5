import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { isDevQuote, parseDevQuote } from "../aci/dev_quote.ts";
import { bytesToHex, hexToBytes } from "../aci/hex.ts";
import { generateWorkloadKeys } from "../aci/signer.ts";
import { GatewayError } from "../http/errors.ts";
import { devAttestationReport, devAttestationRoutes } from "./dev_attestation.ts";
import { startDemoUpstream } from "./upstream.ts";

const keys = generateWorkloadKeys();
const spki = createHash("sha256").update("tls key").digest("hex");
const nonce = "ab".repeat(32);
const opts = {
  signingAddress: keys.ethereumAddress,
  addressBytes: keys.ethereumAddressBytes,
  spkiSha256: spki,
  randomBytes: (n: number) => new Uint8Array(n).fill(7),
};

Deno.test("dev attestation: the DEV quote slot is sha256(address ‖ spki) ‖ nonce", () => {
  const r = devAttestationReport(opts, nonce);
  assert.equal(r.signing_address, keys.ethereumAddress);
  assert.equal(r.signing_algo, "ecdsa");
  assert.equal(r.request_nonce, nonce);
  assert.equal(r.nvidia_payload, null);
  assert.deepEqual(r.event_log, []);
  assert.deepEqual(r.info, { development: true });
  const quote = hexToBytes(String(r.intel_quote));
  assert.ok(isDevQuote(quote));
  const slot = parseDevQuote(quote);
  const head = createHash("sha256").update(keys.ethereumAddressBytes).update(hexToBytes(spki))
    .digest("hex");
  assert.equal(bytesToHex(slot), head + nonce);
});

Deno.test("dev attestation: routes answer only the attestation path and validate queries", async () => {
  const route = devAttestationRoutes(opts);
  assert.equal(route(new Request("http://x/v1/chat/completions")), null);
  const res = route(
    new Request(`http://x/v1/attestation/report?nonce=${nonce}&signing_algo=ecdsa`),
  );
  assert.ok(res);
  assert.deepEqual(await res.json(), devAttestationReport(opts, nonce));
  const noNonce = route(new Request("http://x/v1/attestation/report"));
  assert.equal((await noNonce!.json()).request_nonce, "07".repeat(32));
  assert.throws(
    () => route(new Request("http://x/v1/attestation/report?nonce=XYZ")),
    (e: unknown) => e instanceof GatewayError && e.kind === "invalid_request",
  );
  assert.throws(
    () => route(new Request(`http://x/v1/attestation/report?nonce=${nonce}&signing_algo=ed25519`)),
    (e: unknown) => e instanceof GatewayError && e.kind === "invalid_request",
  );
  assert.throws(
    () => route(new Request("http://x/v1/attestation/report", { method: "POST", body: "{}" })),
    (e: unknown) => e instanceof GatewayError && e.kind === "method_not_allowed",
  );
});

Deno.test("dev attestation: misconfiguration fails at construction", () => {
  assert.throws(() => devAttestationRoutes({ ...opts, spkiSha256: "zz" }), RangeError);
  assert.throws(
    () => devAttestationRoutes({ ...opts, signingAddress: "0x" + "00".repeat(20) }),
    RangeError,
  );
  assert.throws(
    () => devAttestationRoutes({ ...opts, addressBytes: new Uint8Array(19) }),
    RangeError,
  );
});

Deno.test("dev attestation: plugged into the demo upstream, outside its stats and API key", async () => {
  const u = await startDemoUpstream({
    name: "dev",
    apiKey: "secret",
    extraRoutes: devAttestationRoutes(opts),
  });
  try {
    const res = await fetch(`${u.url}/v1/attestation/report?nonce=${nonce}`);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).request_nonce, nonce);
    const bad = await fetch(`${u.url}/v1/attestation/report?nonce=nope`);
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.param, "nonce");
    assert.equal(u.stats.total, 0);
    const models = await fetch(`${u.url}/v1/models`);
    assert.equal(models.status, 401, "the demo API still wants its key");
    await models.body?.cancel();
    assert.equal(u.stats.listings, 1);
  } finally {
    await u.close();
  }
});
