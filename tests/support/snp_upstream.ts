/**
 * A loopback HTTPS upstream shaped like an SEV-SNP confidential VM, for
 * end-to-end tests of the `sev-snp` verifier: the demo chat API plus
 * `GET /v1/attestation/sev-snp?nonce=…` answering with the raw SNP report
 * (from the test forge) whose REPORT_DATA is sha256(its own SPKI) ‖ nonce.
 * Knobs produce the negative cases. Also a loopback KDS serving the VCEK.
 * Test-only: nothing here is evidence of hardware.
 */
import { createHash } from "node:crypto";
import { type DemoUpstream, startDemoUpstream } from "../../src/demo/upstream.ts";
import { SEV_SNP_REPORT_PATH, snpReportData } from "../../src/sessions/attesters/sev_snp.ts";
import type { SnpForge, SnpMintOptions } from "./snp_forge.ts";
import { issueServerCert, type TestCa } from "./tls_servers.ts";

export interface SnpUpstreamOptions {
  forge: SnpForge;
  ca: TestCa;
  /** Bind the upstream's own SPKI (default true); false binds another key. */
  bindSpki?: boolean;
  /** Serve this report instead of minting one (e.g. a real fixture). */
  fixedReport?: Uint8Array;
  mint?: SnpMintOptions;
  models?: string[];
}

export interface SnpUpstream {
  url: string;
  spkiSha256: string;
  caPem: string;
  demo: DemoUpstream;
  attestationRequests(): number;
  close(): Promise<void>;
}

/** Starts the upstream on loopback. */
export async function startSnpUpstream(o: SnpUpstreamOptions): Promise<SnpUpstream> {
  const cert = await issueServerCert(o.ca);
  const bound = (o.bindSpki ?? true)
    ? cert.spkiSha256
    : createHash("sha256").update("some other TLS key").digest("hex");
  let served = 0;
  const demo = await startDemoUpstream({
    name: "snp",
    models: o.models,
    tls: { cert: cert.certPem, key: cert.keyPem },
    extraRoutes: (req) => {
      const url = new URL(req.url);
      if (url.pathname !== `/v1${SEV_SNP_REPORT_PATH}`) return null;
      served++;
      const nonce = url.searchParams.get("nonce") ?? "";
      if (!/^[0-9a-f]{64}$/.test(nonce)) return new Response("bad nonce", { status: 400 });
      const report = o.fixedReport ?? o.forge.mintReport(snpReportData(bound, nonce), o.mint);
      return new Response(report.slice(), {
        headers: { "content-type": "application/octet-stream" },
      });
    },
  });
  return {
    url: demo.url,
    spkiSha256: cert.spkiSha256,
    caPem: o.ca.certPem,
    demo,
    attestationRequests: () => served,
    close: () => demo.close(),
  };
}

/** A loopback plain-HTTP KDS answering every `/vcek/v1/…` with `vcekDer`, counting requests. */
export function startFakeKds(vcekDer: Uint8Array): {
  url: string;
  requests: string[];
  close(): Promise<void>;
} {
  const requests: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const u = new URL(req.url);
    requests.push(u.pathname + u.search);
    if (!u.pathname.startsWith("/vcek/v1/")) return new Response("no", { status: 404 });
    return new Response(vcekDer.slice(), { headers: { "content-type": "application/pkix-cert" } });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    requests,
    close: () => server.shutdown(),
  };
}
