/**
 * The gateway's attested identity end to end: reports bind the keyset digest
 * and the client's nonce into the quote, for the development provider and for
 * the configfs-tsm imitation; the legacy report; nonce rules; the archive.
 * Every value is recomputed independently here (canonicalize + node:crypto + noble).
 */
import assert from "node:assert/strict";
import canonicalize from "canonicalize";
import { createHash } from "node:crypto";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { keccak_256 } from "@noble/hashes/sha3.js";
import { startTestGateway } from "./support/gateway.ts";
import { parseDevQuote } from "../src/aci/dev_quote.ts";
import { startFakeConfigfsTsm, TDX_V4_REPORT_DATA_OFFSET } from "../enclave/configfs_fake.ts";
import { createConfigfsTsmProvider } from "../enclave/configfs_tsm.ts";
import { type CanonicalReport, type ErrorEnvelope, jsonOf } from "./support/wire.ts";

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const unhex = (s: string) => Uint8Array.from(s.match(/../g)!.map((h) => parseInt(h, 16)));
const sha256 = (b: Uint8Array | string) => createHash("sha256").update(b).digest();
const randomNonce = () => hex(crypto.getRandomValues(new Uint8Array(32)));

/** The legacy report (`/v1/attestation/report`): the canonical one plus the legacy fields. */
interface LegacyReport extends CanonicalReport {
  signing_algo: "ecdsa" | "ed25519";
  signing_address: string;
  signing_public_key: string;
  request_nonce: string;
  intel_quote: string;
}

function checkBinding(report: CanonicalReport, nonce: string | null): Uint8Array {
  const keyset = report.attestation.workload_keyset;
  const digest = "sha256:" + sha256(canonicalize(keyset)!).toString("hex");
  assert.equal(report.workload_keyset_digest, digest);
  assert.equal(report.attestation.workload_keyset_digest, digest);
  const statement = `{"keyset_digest":"${digest}","nonce":${
    nonce === null ? "null" : `"${nonce}"`
  },"purpose":"aci.report_data.v1"}`;
  const rd = sha256(statement);
  assert.equal(report.attestation.report_data, rd.toString("hex"));
  const slot = new Uint8Array(64);
  slot.set(rd);
  return slot;
}

Deno.test("canonical report binds keyset and nonce (development provider)", async () => {
  const gw = await startTestGateway();
  try {
    const nonce = randomNonce();
    const res = await fetch(`${gw.baseURL}/aci/attestation?nonce=${nonce}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-aci-version"), "aci/1");
    const report = await jsonOf<CanonicalReport>(res);
    assert.equal(res.headers.get("x-aci-keyset-digest"), report.workload_keyset_digest);
    assert.equal(report.api_version, "aci/1");
    const slot = checkBinding(report, nonce);
    assert.equal(report.attestation.tee_type, "dev-insecure-no-tee");
    assert.equal(report.attestation.evidence.hardware, false);
    assert.deepEqual(parseDevQuote(unhex(report.attestation.evidence.quote)), slot);
    // keyset shape
    const ks = report.attestation.workload_keyset;
    assert.deepEqual(ks.receipt_signing_keys.map((k) => k.algo), [
      "ed25519",
      "secp256k1",
      "c2sp-note-ed25519",
    ]);
    assert.equal(typeof ks.not_after, "number");
    // E2EE v2: one key per suite, X25519 first, never a receipt key reused.
    assert.deepEqual(ks.e2ee_public_keys.map((k) => k.algo), [
      "x25519-aes-256-gcm-hkdf-sha256",
      "secp256k1-aes-256-gcm-hkdf-sha256",
    ]);
    assert.match(ks.e2ee_public_keys[0].public_key, /^[0-9a-f]{64}$/);
    assert.match(ks.e2ee_public_keys[1].public_key, /^04[0-9a-f]{128}$/);
    for (const e of ks.e2ee_public_keys) {
      assert.ok(!ks.receipt_signing_keys.some((r) => r.public_key === e.public_key));
    }
    assert.deepEqual(report.service_capabilities.supported_e2ee_versions, ["2"]);
    assert.equal(report.service_capabilities.serving, "aggregator");
    assert.ok(report.all_attestations.length >= 1);
    // nonce-less report: null statement, cacheable
    const plain = await fetch(`${gw.baseURL}/aci/attestation`);
    assert.match(plain.headers.get("cache-control") ?? "", /max-age/);
    checkBinding(await jsonOf<CanonicalReport>(plain), null);
  } finally {
    await gw.close();
  }
});

Deno.test("canonical report through the configfs-tsm provider (imitation), concurrent requests", async () => {
  const dir = await Deno.makeTempDir();
  const fake = await startFakeConfigfsTsm(dir, { provider: "tdx_guest" });
  const gw = await startTestGateway({
    // The imitation polls its directory; under a fully loaded parallel suite it can see a
    // half-written inblob and bump the generation twice, which the provider treats as a
    // race and retries. More attempts than production's default keep that from flaking.
    quotes: createConfigfsTsmProvider({ root: fake.root, fs: fake.fs, maxAttempts: 10 }),
  });
  try {
    const nonces = Array.from({ length: 12 }, randomNonce);
    const reports = await Promise.all(
      nonces.map(async (n) => {
        const r = await fetch(`${gw.baseURL}/aci/attestation?nonce=${n}`);
        const body = await jsonOf<CanonicalReport>(r);
        assert.equal(r.status, 200, JSON.stringify(body));
        return body;
      }),
    );
    reports.forEach((report, i) => {
      const slot = checkBinding(report, nonces[i]);
      assert.equal(report.attestation.tee_type, "tdx");
      const quote = unhex(report.attestation.evidence.quote);
      assert.deepEqual(
        quote.subarray(TDX_V4_REPORT_DATA_OFFSET, TDX_V4_REPORT_DATA_OFFSET + 64),
        slot,
      );
    });
  } finally {
    await gw.close();
    await fake.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("bad nonces and parameters → 400 invalid_request_error", async () => {
  const gw = await startTestGateway();
  try {
    const good = randomNonce();
    for (
      const q of [
        `nonce=${good.slice(1)}`,
        `nonce=${good}0`,
        `nonce=${good.toUpperCase()}`,
        `nonce=${"g".repeat(64)}`,
        `nonce=${good}&nonce=${good}`,
        "nonce=",
        "workload_keyset_digest=sha256:xyz",
      ]
    ) {
      const r = await fetch(`${gw.baseURL}/aci/attestation?${q}`);
      assert.equal(r.status, 400, q);
      assert.equal((await jsonOf<ErrorEnvelope>(r)).error.type, "invalid_request_error");
    }
    const unknown = await fetch(
      `${gw.baseURL}/aci/attestation?workload_keyset_digest=sha256:${"0".repeat(64)}`,
    );
    assert.equal(unknown.status, 404);
    await unknown.body?.cancel();
    const algo = await fetch(`${gw.baseURL}/attestation/report?signing_algo=rsa`);
    assert.equal(algo.status, 400);
    await algo.body?.cancel();
  } finally {
    await gw.close();
  }
});

Deno.test("legacy report: address derivation, padding, nonce rules, signing_algo", async () => {
  const gw = await startTestGateway();
  try {
    const nonce = randomNonce();
    const legacy = (q: string) =>
      fetch(`${gw.baseURL}/attestation/report${q}`).then((r) => jsonOf<LegacyReport>(r));
    const r = await legacy(`?nonce=${nonce}`);
    assert.equal(r.signing_algo, "ecdsa");
    // Independent derivation: address = last 20 bytes of keccak256(uncompressed key without 04).
    const pub = unhex(r.signing_public_key);
    assert.equal(pub.length, 65);
    assert.equal(pub[0], 4);
    const addr = keccak_256(pub.subarray(1)).subarray(12);
    assert.equal(r.signing_address.toLowerCase(), "0x" + hex(addr));
    assert.notEqual(r.signing_address, r.signing_address.toLowerCase(), "EIP-55 checksummed");
    assert.ok(secp256k1.Point.fromHex(r.signing_public_key));
    const slot = parseDevQuote(unhex(r.intel_quote));
    assert.deepEqual(slot.subarray(0, 20), addr);
    assert.deepEqual(slot.subarray(20, 32), new Uint8Array(12), "right-padded with zeros");
    assert.equal(hex(slot.subarray(32)), nonce, "64-hex nonce used raw");
    assert.equal(r.request_nonce, nonce);
    assert.equal(r.all_attestations.length, 1);
    // The keyset covers the ecdsa key.
    assert.ok(
      r.attestation.workload_keyset.receipt_signing_keys.some((k) =>
        k.public_key === r.signing_public_key
      ),
    );

    // A flexible nonce is hashed; ed25519 switches the key.
    const r2 = await legacy("?nonce=hello-world&signing_algo=ed25519");
    assert.equal(r2.signing_algo, "ed25519");
    assert.equal(r2.signing_address, r2.signing_public_key);
    assert.equal(r2.signing_public_key.length, 64);
    const slot2 = parseDevQuote(unhex(r2.intel_quote));
    assert.equal(hex(slot2.subarray(0, 32)), r2.signing_public_key);
    assert.equal(hex(slot2.subarray(32)), sha256("hello-world").toString("hex"));
    // No nonce: a fresh random one each time.
    const a = await legacy("");
    const b = await legacy("");
    assert.notEqual(a.request_nonce, b.request_nonce);
    const rep = await fetch(`${gw.baseURL}/attestation/report?nonce=a&nonce=b`);
    assert.equal(rep.status, 400);
    await rep.body?.cancel();
  } finally {
    await gw.close();
  }
});

Deno.test("archived keysets survive a restart and rotation on the same store", async () => {
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/gw.kv`;
  let t = Date.now();
  const clock = () => t;
  const first = await startTestGateway({
    kvPath,
    now: clock,
    configure: (c) => (c.identity.keyset_ttl_seconds = 1000),
  });
  const report = (gw: { baseURL: string }, q = "") =>
    fetch(`${gw.baseURL}/aci/attestation${q}`).then((r) => jsonOf<CanonicalReport>(r));
  let firstDigest: string;
  let rotatedDigest: string;
  try {
    firstDigest = (await report(first)).workload_keyset_digest;
    // Rotation: within the last tenth of the keyset's life a new keyset is used.
    t += 950_000;
    const rotated = await report(first);
    assert.notEqual(rotated.workload_keyset_digest, firstDigest);
    rotatedDigest = rotated.workload_keyset_digest;
  } finally {
    // Closing waits for the rotated keyset's archive write (app/replica_upkeep.ts).
    await first.close();
  }
  const second = await startTestGateway({ kvPath, now: clock });
  try {
    const current = await report(second);
    assert.notEqual(
      current.workload_keyset_digest,
      firstDigest,
      "a restart generates a new keyset",
    );
    const old = await fetch(
      `${second.baseURL}/aci/attestation?workload_keyset_digest=${firstDigest}`,
    );
    assert.equal(old.status, 200);
    const archived = await jsonOf<CanonicalReport>(old);
    checkBinding(archived, null);
    assert.equal(archived.workload_keyset_digest, firstDigest);
    // The rotated keyset, archived just before the first gateway stopped, is there too.
    const rotated = await report(second, `?workload_keyset_digest=${rotatedDigest}`);
    checkBinding(rotated, null);
    assert.equal(rotated.workload_keyset_digest, rotatedDigest);
  } finally {
    await second.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the verify command checks a live report with its own nonce", async () => {
  const gw = await startTestGateway();
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "main.ts",
        "verify",
        "--report",
        `${gw.baseURL}/aci/attestation`,
        "--allow-dev",
      ],
      cwd: new URL("../", import.meta.url).pathname,
      env: { NO_COLOR: "1" },
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 0, text + new TextDecoder().decode(out.stderr));
    assert.match(text, /PASS/);
    assert.match(text, /not hardware/i);
    const strict = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "main.ts", "verify", "--report", `${gw.baseURL}/aci/attestation`],
      cwd: new URL("../", import.meta.url).pathname,
      env: { NO_COLOR: "1" },
    }).output();
    assert.equal(strict.code, 1, "development evidence fails without --allow-dev");
  } finally {
    await gw.close();
  }
});
