/**
 * GPU verification dependencies from the `trust.nvidia` settings: pinned
 * roots (built in unless overridden), and collateral from a directory
 * (offline) or from NVIDIA's RIM service and OCSP responder. The caller
 * (main.ts) passes the file-system and network access in.
 */
import type { GatewayConfig } from "../../config/mod.ts";
import { type Checked, fail } from "../x509/verify_result.ts";
import {
  gpuCollateralFromFiles,
  type GpuCollateralSource,
  RemoteGpuCollateral,
} from "./collateral.ts";
import { defaultGpuDeps, type GpuDeps, pemRootDer } from "./deps.ts";

export type NvidiaTrust = NonNullable<GatewayConfig["trust"]["nvidia"]>;

/** File-system and network access, from main.ts. */
export interface GpuSetupIo {
  readDir: (path: string) => AsyncIterable<{ name: string; isFile: boolean; isDirectory: boolean }>;
  readFile: (path: string) => Promise<Uint8Array>;
  fetch: typeof fetch;
  now: () => number;
}

/** Reads every file of `dir` and of its direct subdirectories (e.g. `rims/`, `ocsp/`). */
async function readCollateralDir(
  dir: string,
  io: Pick<GpuSetupIo, "readDir" | "readFile">,
): Promise<{ name: string; bytes: Uint8Array }[]> {
  const out: { name: string; bytes: Uint8Array }[] = [];
  for await (const e of io.readDir(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isFile) out.push({ name: e.name, bytes: await io.readFile(path) });
    else if (e.isDirectory) {
      for await (const f of io.readDir(path)) {
        if (f.isFile) {
          out.push({ name: `${e.name}/${f.name}`, bytes: await io.readFile(`${path}/${f.name}`) });
        }
      }
    }
  }
  return out;
}

/** The dependencies, and a line describing where collateral comes from. */
export async function gpuDepsFromConfig(
  c: NvidiaTrust,
  io: GpuSetupIo,
): Promise<Checked<{ deps: GpuDeps; note: string }>> {
  const roots: Partial<Record<"device_root_pem" | "rim_root_pem", Uint8Array>> = {};
  for (const what of ["device_root_pem", "rim_root_pem"] as const) {
    const pem = c[what];
    if (pem === undefined) continue;
    const der = pemRootDer(pem);
    if (!der) return fail(`trust.nvidia.${what}: no PEM certificate`);
    roots[what] = der;
  }
  let collateral: GpuCollateralSource;
  let note: string;
  if (c.collateral_dir) {
    let files;
    try {
      files = await readCollateralDir(c.collateral_dir, io);
    } catch {
      return fail(`trust.nvidia.collateral_dir: cannot read ${c.collateral_dir}`);
    }
    const loaded = gpuCollateralFromFiles(files);
    collateral = loaded.source;
    note =
      `GPU collateral: ${loaded.rims} RIMs, ${loaded.ocsp} OCSP responses from ${c.collateral_dir}`;
  } else {
    collateral = new RemoteGpuCollateral({
      fetch: io.fetch,
      now: io.now,
      rimServiceUrl: c.rim_service_url,
      ocspUrl: c.ocsp_url,
    });
    note = "GPU collateral: NVIDIA RIM service and OCSP responder";
  }
  return {
    ok: true,
    deps: defaultGpuDeps({
      deviceRootDer: roots.device_root_pem,
      rimRootDer: roots.rim_root_pem,
      collateral,
    }),
    note,
  };
}
