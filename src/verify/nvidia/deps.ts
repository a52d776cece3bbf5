/**
 * What GPU verification needs from its caller: the pinned roots (DER), the
 * collateral source, and the time each artefact is judged at (production:
 * the clock for all; tests and offline re-verification pin each artefact's
 * own time).
 */
import type { GpuCollateralSource } from "./collateral.ts";
import { StaticGpuCollateral } from "./collateral.ts";
import { NVIDIA_DEVICE_ROOT_PEM, NVIDIA_RIM_ROOT_PEM } from "./roots.ts";
import type { GpuTimes } from "./verify.ts";
import { pemCertificatesToDer } from "../x509/pem.ts";

export interface GpuDeps {
  deviceRootDer: Uint8Array;
  rimRootDer: Uint8Array;
  collateral: GpuCollateralSource;
  /** The times to verify at, given the verification's clock reading (epoch ms). */
  times: (nowMs: number) => GpuTimes;
}

/** Every artefact at the same instant. */
export function sameTime(nowMs: number): GpuTimes {
  return { device: nowMs, deviceOcsp: nowMs, rim: nowMs, rimOcsp: nowMs };
}

/** The DER of the first certificate in a PEM text, or null. */
export function pemRootDer(pem: string): Uint8Array | null {
  return pemCertificatesToDer(pem)[0] ?? null;
}

/** Built-in roots, the given collateral (default: none), artefacts at the clock's time. */
export function defaultGpuDeps(o: Partial<GpuDeps> = {}): GpuDeps {
  return {
    deviceRootDer: o.deviceRootDer ?? pemRootDer(NVIDIA_DEVICE_ROOT_PEM)!,
    rimRootDer: o.rimRootDer ?? pemRootDer(NVIDIA_RIM_ROOT_PEM)!,
    collateral: o.collateral ?? new StaticGpuCollateral(),
    times: o.times ?? sameTime,
  };
}
