import assert from "node:assert/strict";
import {
  collateralFromDcapQvlJson,
  collateralFromPcsResponses,
  type TdxCollateral,
} from "./collateral.ts";
import {
  LocalCollateralSource,
  PcsCollateralSource,
  verifyTdxQuoteWithSource,
} from "./collateral_source.ts";
import { verifyTdxQuote } from "./dcap.ts";
import { INTEL_SGX_ROOT_CA_PEM } from "./intel_root.ts";
import { parseTdxQuote } from "./quote.ts";
import { checkTdPolicy } from "./td_policy.ts";

const FIX = new URL("../../../tests/fixtures/tdx/", import.meta.url);
const at = (iso: string) => () => Date.parse(iso);

function fixtureCollateral(): TdxCollateral {
  const r = collateralFromDcapQvlJson(
    Deno.readTextFileSync(new URL("dcap-qvl-tdx_quote_collateral.json", FIX)),
  );
  if (!r.ok) throw new Error(r.reason);
  return r.collateral;
}

Deno.test({
  name:
    "LocalCollateralSource feeds verifyTdxQuoteWithSource; a missing FMSPC is a precise failure",
  fn: async () => {
    const quote = Deno.readFileSync(new URL("dcap-qvl-tdx_quote", FIX));
    const now = at("2025-06-19T11:16:03Z");
    const empty = await verifyTdxQuoteWithSource(quote, {
      source: new LocalCollateralSource(),
      now,
    });
    assert.deepEqual(empty, {
      ok: false,
      stage: "collateral",
      reason: "collateral unavailable: no local collateral for FMSPC b0c06f000000 (platform)",
    });
    const source = new LocalCollateralSource().set("B0C06F000000", "platform", fixtureCollateral());
    const r = await verifyTdxQuoteWithSource(quote, { source, now });
    assert.equal(r.ok && r.tcbStatus, "UpToDate");
  },
});

Deno.test({
  name:
    "PcsCollateralSource fetches PCS v4 responses from a loopback server and caches until nextUpdate",
  fn: async () => {
    const c = fixtureCollateral();
    const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
    const seen: string[] = [];
    const ac = new AbortController();
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen: () => {} },
      (req) => {
        const u = new URL(req.url);
        seen.push(u.pathname + u.search);
        if (u.pathname === "/tdx/certification/v4/tcb") {
          if (u.searchParams.get("fmspc") !== "B0C06F000000") {
            return new Response("", { status: 404 });
          }
          return new Response(`{"tcbInfo":${c.tcbInfo},"signature":"${hex(c.tcbInfoSignature)}"}`, {
            headers: { "TCB-Info-Issuer-Chain": encodeURIComponent(c.tcbInfoIssuerChain) },
          });
        }
        if (u.pathname === "/tdx/certification/v4/qe/identity") {
          return new Response(
            `{"enclaveIdentity":${c.qeIdentity},"signature":"${hex(c.qeIdentitySignature)}"}`,
            {
              headers: {
                "SGX-Enclave-Identity-Issuer-Chain": encodeURIComponent(c.qeIdentityIssuerChain),
              },
            },
          );
        }
        if (u.pathname === "/sgx/certification/v4/pckcrl") {
          return new Response(c.pckCrl.slice(), {
            headers: { "SGX-PCK-CRL-Issuer-Chain": encodeURIComponent(c.pckCrlIssuerChain) },
          });
        }
        // PCCS serves the root CA CRL as hex text.
        if (u.pathname === "/sgx/certification/v4/rootcacrl") return new Response(hex(c.rootCaCrl));
        return new Response("", { status: 404 });
      },
    );
    try {
      let clock = Date.parse("2025-06-19T11:16:03Z");
      const now = () => clock;
      const source = new PcsCollateralSource({
        baseUrl: `http://127.0.0.1:${server.addr.port}/`,
        fetch,
        now,
      });
      const quote = Deno.readFileSync(new URL("dcap-qvl-tdx_quote", FIX));
      const r = await verifyTdxQuoteWithSource(quote, { source, now });
      assert.equal(r.ok && r.tcbStatus, "UpToDate");
      assert.equal(seen.length, 4);
      assert.ok(seen.includes("/sgx/certification/v4/pckcrl?ca=platform&encoding=der"));
      const fetched = await source.get("b0c06f000000", "platform");
      assert.equal(fetched.tcbInfo, c.tcbInfo);
      assert.equal(seen.length, 4, "served from cache");
      clock = Date.parse("2025-07-19T10:00:36Z"); // past the PCK CRL's nextUpdate
      await source.get("b0c06f000000", "platform");
      assert.equal(seen.length, 8, "refetched after expiry");
      await assert.rejects(source.get("aabbccddeeff", "platform"), /returned HTTP 404/);
    } finally {
      ac.abort();
      await server.finished;
    }
  },
});

// The Intel SGX TCB Signing certificate valid 2018-05-21..2025-05-21 (public;
// PCS sent it in the TCB-Info-Issuer-Chain header when go-tdx-guest's raw
// responses were captured, which do not include headers).
const INTEL_TCB_SIGNING_2018_PEM = `-----BEGIN CERTIFICATE-----
MIICizCCAjKgAwIBAgIUfjiC1ftVKUpASY5FhAPpFJG99FUwCgYIKoZIzj0EAwIw
aDEaMBgGA1UEAwwRSW50ZWwgU0dYIFJvb3QgQ0ExGjAYBgNVBAoMEUludGVsIENv
cnBvcmF0aW9uMRQwEgYDVQQHDAtTYW50YSBDbGFyYTELMAkGA1UECAwCQ0ExCzAJ
BgNVBAYTAlVTMB4XDTE4MDUyMTEwNTAxMFoXDTI1MDUyMTEwNTAxMFowbDEeMBwG
A1UEAwwVSW50ZWwgU0dYIFRDQiBTaWduaW5nMRowGAYDVQQKDBFJbnRlbCBDb3Jw
b3JhdGlvbjEUMBIGA1UEBwwLU2FudGEgQ2xhcmExCzAJBgNVBAgMAkNBMQswCQYD
VQQGEwJVUzBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABENFG8xzydWRfK92bmGv
P+mAh91PEyV7Jh6FGJd5ndE9aBH7R3E4A7ubrlh/zN3C4xvpoouGlirMba+W2lju
ypajgbUwgbIwHwYDVR0jBBgwFoAUImUM1lqdNInzg7SVUr9QGzknBqwwUgYDVR0f
BEswSTBHoEWgQ4ZBaHR0cHM6Ly9jZXJ0aWZpY2F0ZXMudHJ1c3RlZHNlcnZpY2Vz
LmludGVsLmNvbS9JbnRlbFNHWFJvb3RDQS5kZXIwHQYDVR0OBBYEFH44gtX7VSlK
QEmORYQD6RSRvfRVMA4GA1UdDwEB/wQEAwIGwDAMBgNVHRMBAf8EAjAAMAoGCCqG
SM49BAMCA0cAMEQCIB9C8wOAN/ImxDtGACV246KcqjagZOR0kyctyBrsGGJVAiAj
ftbrNGsGU8YH211dRiYNoPPu19Zp/ze8JmhujB0oBw==
-----END CERTIFICATE-----
`;

Deno.test({
  name:
    "go-tdx-guest SPR quote with raw PCS collateral: platform NotSupported, TD policy SEPT_VE_DISABLE=0",
  fn: async () => {
    const quote = Deno.readFileSync(new URL("go-tdx-guest-tdx_prod_quote_SPR_E4.dat", FIX));
    const parsed = parseTdxQuote(quote);
    assert.ok(parsed.ok);
    if (!parsed.ok) return;
    const tcbChain = INTEL_TCB_SIGNING_2018_PEM + INTEL_SGX_ROOT_CA_PEM;
    const built = collateralFromPcsResponses({
      tcbInfoBody: Deno.readTextFileSync(new URL("go-tdx-guest-sample_tcbInfo_response", FIX)),
      tcbInfoIssuerChain: tcbChain,
      qeIdentityBody: Deno.readTextFileSync(
        new URL("go-tdx-guest-sample_qeIdentity_response", FIX),
      ),
      qeIdentityIssuerChain: tcbChain,
      pckCrlBody: Deno.readFileSync(new URL("go-tdx-guest-pckcrl", FIX)),
      pckCrlIssuerChain: parsed.quote.pckChainPem.slice(1).join(""),
      rootCaCrlBody: Deno.readFileSync(new URL("go-tdx-guest-rootcrl.der", FIX)),
    });
    assert.ok(built.ok, built.ok ? "" : built.reason);
    if (!built.ok) return;
    const now = at("2023-07-01T01:00:00Z");
    // Its pre-production platform (SGX components 3,3,2,2,2,…) is below every TCB
    // level of the sample TCB Info: NotSupported, which fails before the TD policy.
    const enforced = await verifyTdxQuote(quote, { collateral: built.collateral, now });
    assert.equal(enforced.ok, false);
    if (enforced.ok) return;
    assert.equal(enforced.stage, "tcb");
    assert.match(enforced.reason, /^TCB status NotSupported: no TCB level matches/);
    // The TD policy on its own: SEPT_VE_DISABLE = 0, unless the operator opts in.
    assert.deepEqual(checkTdPolicy(parsed.quote.report), {
      ok: false,
      debug: false,
      septVeDisable: false,
      reason: "TD attributes: SEPT_VE_DISABLE is 0",
    });
    assert.deepEqual(checkTdPolicy(parsed.quote.report, { allowSeptVeEnabled: true }), {
      ok: true,
      debug: false,
      septVeDisable: false,
      septVeWaived: true,
    });
  },
});
