/**
 * The verifying client on hardware-shaped evidence: the real gateway quoting
 * with a TDX v4 quote or an SEV-SNP report minted by the test forges (a
 * throwaway root shaped like Intel's / AMD's, pinned by the client as it would
 * pin the real ones), checked with the code `task verify` uses; the
 * measurement policy accepts the listed MRTD / MEASUREMENT and refuses any
 * other, and a quote under an unpinned root is refused.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { forgeTdxEnvironment } from "./support/tdx_forge.ts";
import { forgeSnpEnvironment } from "./support/snp_forge.ts";
import { bytesToHex } from "../src/aci/hex.ts";
import { localVcekSource } from "../src/verify/sev_snp/vcek_source.ts";
import {
  AciVerificationError,
  verifyingFetch,
  type VerifyingFetchOptions,
} from "../src/client/node.ts";
import type { QuoteProvider } from "../src/attestation/quote_provider.ts";

const MRTD = new Uint8Array(48).fill(0x3c);
const MEASUREMENT = new Uint8Array(48).fill(0x5e);

async function ask(gwBaseURL: string, apiKey: string, o: Omit<VerifyingFetchOptions, "baseURL">) {
  const f = verifyingFetch({ baseURL: gwBaseURL, ...o });
  try {
    const client = new OpenAI({ baseURL: gwBaseURL, apiKey, fetch: f, maxRetries: 0 });
    const r = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "hardware" }],
    }).withResponse();
    return r.response.headers.get("x-aci-verified") ?? "";
  } catch (e) {
    for (let x: unknown = e; x instanceof Error; x = x.cause) {
      if (x instanceof AciVerificationError) return `refused:${x.code}`;
    }
    throw e;
  } finally {
    f.close();
  }
}

Deno.test("verifying client: TDX quote verified (DCAP, pinned root, collateral supplied) and the MRTD policy applied", async () => {
  const forge = await forgeTdxEnvironment();
  const quotes: QuoteProvider = {
    name: "forged-tdx",
    hardware: true,
    getQuote: (rd) =>
      Promise.resolve({
        tee_type: "tdx",
        provider: "test",
        quote: forge.mintQuote(rd, { mrTd: MRTD }),
      }),
  };
  const gw = await startTestGateway({ quotes });
  try {
    const quoteTrust = { tdxCollateral: forge.source, tdxRootCaDer: forge.rootCertDer };
    const listed = await ask(gw.baseURL, gw.apiKey, {
      quoteTrust,
      policy: { measurements: [{ tee_type: "tdx", mrtd: bytesToHex(MRTD) }] },
    });
    assert.match(listed, /hardware-quote/);
    assert.doesNotMatch(listed, /dev-evidence/);
    const other = await ask(gw.baseURL, gw.apiKey, {
      quoteTrust,
      policy: { measurements: [{ tee_type: "tdx", mrtd: "ab".repeat(48) }] },
    });
    assert.equal(other, "refused:policy_refused");
    // The same quote under Intel's real root (the default) does not verify.
    const unpinned = await ask(gw.baseURL, gw.apiKey, {
      quoteTrust: { tdxCollateral: forge.source },
      policy: { accept_any_measurement: true },
    });
    assert.equal(unpinned, "refused:attestation_failed");
  } finally {
    await gw.close();
  }
});

Deno.test("verifying client: SEV-SNP report verified under pinned AMD roots and the MEASUREMENT policy applied", async () => {
  const forge = await forgeSnpEnvironment();
  const quotes: QuoteProvider = {
    name: "forged-snp",
    hardware: true,
    getQuote: (rd) =>
      Promise.resolve({
        tee_type: "sev_snp",
        provider: "test",
        quote: forge.mintReport(rd, { measurement: MEASUREMENT }),
      }),
  };
  const gw = await startTestGateway({ quotes });
  try {
    const quoteTrust = {
      snp: {
        roots: [{ product: "Milan" as const, askDer: forge.askDer, arkDer: forge.arkDer }],
        vcek: localVcekSource([forge.vcekDer]),
      },
    };
    const ok = await ask(gw.baseURL, gw.apiKey, {
      quoteTrust,
      policy: { measurements: [{ tee_type: "sev_snp", measurement: bytesToHex(MEASUREMENT) }] },
    });
    assert.match(ok, /hardware-quote/);
    const other = await ask(gw.baseURL, gw.apiKey, {
      quoteTrust,
      policy: { measurements: [{ tee_type: "sev_snp", measurement: "00".repeat(48) }] },
    });
    assert.equal(other, "refused:policy_refused");
    const noRoots = await ask(gw.baseURL, gw.apiKey, { policy: { accept_any_measurement: true } });
    assert.equal(noRoots, "refused:attestation_failed");
  } finally {
    await gw.close();
  }
});
