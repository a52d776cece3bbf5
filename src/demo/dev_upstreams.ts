/**
 * The two demo upstreams of the development configuration: a plain HTTP one,
 * and a confidential one that is a real TLS server with its own key (issued by
 * a throwaway CA) and a development attestation endpoint binding its signing
 * address and that TLS key. Used by `deno task dev` and by the tests, so both
 * run the same thing.
 */
import { type DemoUpstream, startDemoUpstream } from "./upstream.ts";
import { issueServerCert, makeCa } from "./certs.ts";
import { devAttestationRoutes } from "./dev_attestation.ts";
import { generateWorkloadKeys } from "../aci/mod.ts";

export interface DevUpstreamSet {
  plain: DemoUpstream;
  secure: DemoUpstream;
  /** PEM of the CA that issued the confidential upstream's certificate. */
  caPem: string;
  secureSpkiSha256: string;
  close(): Promise<void>;
}

export async function startDevUpstreams(
  opts: { now: () => number; randomBytes: (n: number) => Uint8Array; demoNow?: () => number },
): Promise<DevUpstreamSet> {
  const ca = await makeCa({ now: opts.now(), commonName: "gateway development CA" });
  const leaf = await issueServerCert(ca, { now: opts.now(), hosts: ["127.0.0.1", "localhost"] });
  // The upstream's own signing identity, as a TEE inference server would have.
  const keys = generateWorkloadKeys();
  // The plain demo upstream's own default is demo/embed-small's catalog dimension (384),
  // as a fixed-dimension embedding model's upstream would be.
  const plain = await startDemoUpstream({
    name: "plain",
    now: opts.demoNow,
    embeddingDefaultDims: 384,
  });
  const secure = await startDemoUpstream({
    name: "secure",
    now: opts.demoNow,
    tls: { cert: leaf.certPem, key: leaf.keyPem },
    extraRoutes: devAttestationRoutes({
      signingAddress: keys.ethereumAddress,
      addressBytes: keys.ethereumAddressBytes,
      spkiSha256: leaf.spkiSha256,
      randomBytes: opts.randomBytes,
    }),
  });
  return {
    plain,
    secure,
    caPem: ca.certPem,
    secureSpkiSha256: leaf.spkiSha256,
    async close() {
      await plain.close();
      await secure.close();
    },
  };
}
