/**
 * The trust material upstream verification needs, built from the
 * configuration's `trust` block with the file reads and fetch main.ts passes
 * in: TDX collateral (a directory of `<fmspc>.json` files or Intel PCS / a
 * PCCS), the SEV-SNP roots and VCEKs, and the NVIDIA GPU roots and collateral.
 * Failures are `StartupError`s naming the field.
 */
import type { GatewayConfig } from "../config/mod.ts";
import {
  collateralFromDcapQvlJson,
  type CollateralSource,
  type GpuDeps,
  gpuDepsFromConfig,
  type GpuSetupIo,
  INTEL_PCS_BASE_URL,
  type NvidiaTrust,
  PcsCollateralSource,
  type SnpTrust,
  snpTrustFromConfig,
} from "../verify/mod.ts";
import { readFailure, StartupError } from "./startup_checks.ts";

/** File reads and a fetch with a deadline (main.ts's). */
export interface TrustIo extends GpuSetupIo {
  readTextFile(path: string): Promise<string>;
}

/** TDX collateral: a local directory of `<fmspc>.json` files (offline), or Intel PCS / a PCCS. */
export async function collateralSource(
  config: GatewayConfig,
  io: TrustIo,
): Promise<CollateralSource> {
  const dir = config.trust.collateral_dir;
  if (!dir) return pcsSource(config.trust.pcs_url, io);
  const byFmspc = new Map<string, Awaited<ReturnType<CollateralSource["get"]>>>();
  for await (const e of io.readDir(dir)) {
    const m = e.name.match(/^([0-9a-fA-F]{12})\.json$/);
    if (!m) continue;
    const c = collateralFromDcapQvlJson(await io.readTextFile(`${dir}/${e.name}`));
    if (!c.ok) throw new StartupError(`trust.collateral_dir: ${e.name}: ${c.reason}`);
    byFmspc.set(m[1].toLowerCase(), c.collateral);
  }
  return {
    get: (fmspc) => {
      const c = byFmspc.get(fmspc.toLowerCase());
      return c
        ? Promise.resolve(c)
        : Promise.reject(new Error(`no collateral for FMSPC ${fmspc} in ${dir}`));
    },
  };
}

/** Intel PCS, or the PCCS at `url`. */
export function pcsSource(url: string | undefined, io: Pick<TrustIo, "fetch" | "now">) {
  return new PcsCollateralSource({
    baseUrl: url ?? INTEL_PCS_BASE_URL,
    fetch: io.fetch,
    now: io.now,
  });
}

/** SEV-SNP trust from `trust.sev_snp`: the pinned AMD roots; VCEKs from a directory or the KDS. */
export async function snpTrust(
  config: GatewayConfig,
  io: TrustIo,
): Promise<SnpTrust | undefined> {
  const c = config.trust.sev_snp;
  if (!c) return undefined;
  let vcekFiles: Uint8Array[] | undefined;
  if (c.vcek_dir !== undefined) {
    vcekFiles = [];
    try {
      for await (const e of io.readDir(c.vcek_dir)) {
        if (e.isFile && e.name.endsWith(".der")) {
          vcekFiles.push(await io.readFile(`${c.vcek_dir}/${e.name}`));
        }
      }
    } catch (e) {
      throw new StartupError(
        `trust.sev_snp.vcek_dir: cannot read ${c.vcek_dir}: ${readFailure(e)}`,
      );
    }
  }
  const t = snpTrustFromConfig(c, { vcekFiles, fetch: (url) => io.fetch(url) });
  if (!t.ok) throw new StartupError(`trust.sev_snp.${t.reason}`);
  return t.trust;
}

/**
 * GPU evidence roots and collateral (`trust.nvidia`; `--collateral DIR` of
 * `verify` overrides), with the note to print when collateral is local.
 */
export async function gpuDeps(
  c: NvidiaTrust,
  io: GpuSetupIo,
): Promise<{ deps: GpuDeps; note?: string }> {
  const r = await gpuDepsFromConfig(c, io);
  if (!r.ok) throw new StartupError(r.reason);
  return { deps: r.deps, note: c.collateral_dir ? r.note : undefined };
}

/**
 * The collateral of `verify --collateral PATH [--pccs-url URL]`: a directory is
 * GPU collateral (RIMs and OCSP responses), a file is TDX collateral (a DCAP
 * QVL JSON); without one, TDX collateral comes from Intel PCS or the PCCS.
 */
export async function verifyCollateral(
  path: string | undefined,
  pccsUrl: string | undefined,
  io: TrustIo & { isDirectory(path: string): Promise<boolean> },
): Promise<{ source: CollateralSource; gpu: GpuDeps; note?: string }> {
  let gpuDir = false;
  if (path) {
    try {
      gpuDir = await io.isDirectory(path);
    } catch (e) {
      throw new StartupError(`--collateral: cannot read ${path}: ${readFailure(e)}`);
    }
  }
  const { deps: gpu, note } = await gpuDeps(gpuDir && path ? { collateral_dir: path } : {}, io);
  if (!path || gpuDir) return { source: pcsSource(pccsUrl, io), gpu, note };
  let text: string;
  try {
    text = await io.readTextFile(path);
  } catch (e) {
    throw new StartupError(`--collateral: cannot read ${path}: ${readFailure(e)}`);
  }
  const c = collateralFromDcapQvlJson(text);
  if (!c.ok) throw new StartupError(`--collateral ${path}: ${c.reason}`);
  const collateral = c.collateral;
  return { source: { get: () => Promise.resolve(collateral) }, gpu, note };
}
