/**
 * A loopback HTTPS upstream shaped like a Tinfoil enclave: the demo chat API
 * plus `GET /.well-known/tinfoil-attestation` answering Tinfoil's attestation
 * bundle shape — `enclaveAttestationReport` (`sev-snp-guest/v2`: base64 of a
 * gzip'd SEV-SNP report whose REPORT_DATA is `sha256(its TLS SPKI) ‖ HPKE key`),
 * `vcek`, `enclaveCert`, `digest` and `sigstoreBundle`. The report is minted by
 * the SEV-SNP test forge (forged AMD root); the Sigstore bundle is Tinfoil's
 * real release bundle (tinfoil-conformance `sigstore/001`), so the enclave's
 * MEASUREMENT defaults to that release's. Test-only.
 */
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { bytesToHex, hexToBytes } from "../../src/aci/hex.ts";
import { type DemoUpstream, startDemoUpstream } from "../../src/demo/upstream.ts";
import type { SnpForge } from "./snp_forge.ts";
import type { TdxForge } from "./tdx_forge.ts";
import { issueServerCert, type TestCa } from "./tls_servers.ts";

const FIXTURE = new URL("../fixtures/tinfoil-conformance/", import.meta.url);
const BUNDLE = JSON.parse(
  Deno.readTextFileSync(new URL("attestation-sev/_assets/real_genoa_bundle.json", FIXTURE)),
);
const SIGSTORE_001 = JSON.parse(
  Deno.readTextFileSync(
    new URL("sigstore/001-happy-path-snp-tdx-multiplatform/input.json", FIXTURE),
  ),
);

/** The real release's repository, digest, SEV-SNP register and Sigstore trusted root (JSON text). */
export const TINFOIL_RELEASE = {
  repo: "tinfoilsh/confidential-model-router",
  digest: BUNDLE.digest as string,
  snpMeasurement:
    "09ef32acf90fcfeb6206d1a46c13145cef736ebbb83f18eaff680b686232031546ff5fd39c44599699ee8734cbbeb519",
  /** The release's TDX RTMR1 and RTMR2. */
  rtmr1:
    "a7ed1bcbe696222ecf956f2c78a3b29fcc8ca24831a4751b58f5858d537fbf29666e7949e8402599c96f41a80f7fe253",
  rtmr2:
    "ddce36c7bebf841b3a4ff0c8c2df63869f102b74904063efc24244bf5b983b44e87f610c73f963bd3e859014903508c3",
  trustedRootJson: new TextDecoder().decode(
    Uint8Array.from(atob(SIGSTORE_001.trust_root_b64), (c) => c.charCodeAt(0)),
  ),
};

export interface TinfoilUpstreamOptions {
  forge: SnpForge;
  ca: TestCa;
  /** Serve a TDX enclave instead (`tdx-guest/v2`, quote from this forge; no VCEK). */
  tdx?: TdxForge;
  /** The TDX quote's RTMR2 (default: the release's). */
  rtmr2?: string;
  /** MEASUREMENT of the minted report (default: the release's). */
  measurement?: string;
  /** Bind this upstream's TLS key (default) or another one. */
  bindSpki?: boolean;
}

export interface TinfoilUpstream {
  url: string;
  spkiSha256: string;
  caPem: string;
  hpkePublicKey: string;
  demo: DemoUpstream;
  attestationRequests(): number;
  close(): Promise<void>;
}

export async function startTinfoilUpstream(o: TinfoilUpstreamOptions): Promise<TinfoilUpstream> {
  const cert = await issueServerCert(o.ca, {});
  const hpke = crypto.getRandomValues(new Uint8Array(32));
  const fp = (o.bindSpki ?? true)
    ? hexToBytes(cert.spkiSha256)
    : new Uint8Array(createHash("sha256").update("another TLS key").digest());
  const reportData = new Uint8Array(64);
  reportData.set(fp);
  reportData.set(hpke, 32);
  const report = o.tdx
    ? o.tdx.mintQuote(reportData, {
      rtmrs: [
        new Uint8Array(48),
        hexToBytes(TINFOIL_RELEASE.rtmr1),
        hexToBytes(o.rtmr2 ?? TINFOIL_RELEASE.rtmr2),
        new Uint8Array(48),
      ],
    })
    : o.forge.mintReport(reportData, {
      measurement: hexToBytes(o.measurement ?? TINFOIL_RELEASE.snpMeasurement),
    });
  const b64 = (b: Uint8Array) => btoa(String.fromCharCode(...b));
  const body = JSON.stringify({
    domain: "localhost",
    enclaveAttestationReport: {
      format: `https://tinfoil.sh/predicate/${o.tdx ? "tdx" : "sev-snp"}-guest/v2`,
      body: b64(gzipSync(report)),
    },
    digest: TINFOIL_RELEASE.digest,
    sigstoreBundle: BUNDLE.sigstoreBundle,
    ...(o.tdx ? {} : { vcek: b64(o.forge.vcekDer) }),
    enclaveCert: cert.certPem,
  });
  let served = 0;
  const demo = await startDemoUpstream({
    name: "tinfoil",
    tls: { cert: cert.certPem, key: cert.keyPem },
    extraRoutes: (req) => {
      if (new URL(req.url).pathname !== "/.well-known/tinfoil-attestation") return null;
      served++;
      return new Response(body, { headers: { "content-type": "application/json" } });
    },
  });
  return {
    url: demo.url,
    spkiSha256: cert.spkiSha256,
    caPem: o.ca.certPem,
    hpkePublicKey: bytesToHex(hpke),
    demo,
    attestationRequests: () => served,
    close: () => demo.close(),
  };
}
