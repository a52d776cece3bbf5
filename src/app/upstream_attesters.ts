/**
 * The upstream attesters `serve` runs with: the verifier each provider names
 * and the trust material of the configuration's `trust` block (TDX collateral
 * and root, SEV-SNP roots, GPU roots and collateral), read with main.ts's I/O.
 */
import type { GatewayConfig } from "../config/mod.ts";
import { productionAttesters } from "../sessions/mod.ts";
import type { TlsConnect } from "../upstream/mod.ts";
import { pemCertificatesToDer } from "../verify/mod.ts";
import { collateralSource, gpuDeps, snpTrust, type TrustIo } from "./trust_sources.ts";
import { StartupError } from "./startup_checks.ts";

/** Builds the verifiers; prints where local GPU collateral came from. */
export async function upstreamAttesters(
  config: GatewayConfig,
  io: TrustIo & {
    randomBytes: (n: number) => Uint8Array;
    tlsConnect: TlsConnect;
    print: (line: string) => void;
  },
): Promise<ReturnType<typeof productionAttesters>> {
  const collateral = await collateralSource(config, io);
  const rootCaDer = config.trust.intel_root_ca_pem
    ? pemCertificatesToDer(config.trust.intel_root_ca_pem)[0]
    : undefined;
  const sevSnp = await snpTrust(config, io);
  const gpu = await gpuDeps(config.trust.nvidia ?? {}, io);
  if (gpu.note) io.print(gpu.note);
  const attesters = productionAttesters(config, {
    now: io.now,
    randomBytes: io.randomBytes,
    tlsConnect: io.tlsConnect,
    collateral,
    rootCaDer,
    sevSnp,
    gpu: gpu.deps,
  });
  // Each provider's signed policy file, verified before serving; later versions come by the admin API.
  for (const p of config.providers) {
    const file = p.confidential?.measurement_policy?.file;
    if (!file) continue;
    let signed: unknown;
    try {
      signed = JSON.parse(await io.readTextFile(file));
    } catch (e) {
      throw new StartupError(`${p.name}: measurement_policy.file ${file}: ${String(e)}`);
    }
    const r = attesters.policies.install(p.name, signed);
    if (!r.ok) throw new StartupError(`${p.name}: measurement_policy.file ${file}: ${r.reason}`);
    io.print(
      `measurement policy v${r.installed.policy.version} for ${p.name} (${r.installed.digest})`,
    );
  }
  return attesters;
}
