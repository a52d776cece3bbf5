/**
 * An evidence kind of the offline auditor's entry (`task verify --evidence
 * FILE --kind K`): how one provider's recorded evidence is read and checked,
 * one named check per step. The kinds are listed in `table.ts`; adding a
 * provider is a module here and one row there.
 */
import type { Check } from "../checks.ts";
import type { GpuDeps } from "../nvidia/deps.ts";
import type { SnpRoot } from "../sev_snp/trust.ts";
import type { VcekSource } from "../sev_snp/vcek_source.ts";
import type { CollateralSource } from "../tdx/collateral_source.ts";
import type { TdxTcbPolicy } from "../tdx/tcb_policy.ts";

/** The trust material and the instant a check runs at. */
export interface EvidenceContext {
  /** The instant to judge at (epoch ms): `--at`, or now. */
  at: number;
  /** TDX collateral, the pinned Intel root (default the real one) and the TDX policy. */
  tdx: {
    source: CollateralSource;
    rootCaDer?: Uint8Array;
    tcbPolicy?: TdxTcbPolicy;
    allowSeptVeEnabled?: boolean;
  };
  /** AMD roots and where VCEKs come from (a VCEK embedded in the evidence is tried first). */
  snp: { roots: readonly SnpRoot[]; vcek?: VcekSource };
  /** NVIDIA roots and collateral. */
  gpu: GpuDeps;
  /** The nonce the evidence was requested with, when the auditor knows it (hex). */
  nonce?: string;
}

/** One kind of recorded evidence. */
export interface EvidenceKind {
  /** One line for the usage text: what file this kind reads. */
  reads: string;
  /** Checks the evidence; never throws. */
  verify(input: Uint8Array, ctx: EvidenceContext): Promise<Check[]>;
}

/** The trust material an auditor's command line assembles once (main.ts). */
export interface AuditTrust {
  tdxSource: CollateralSource;
  tdxRootCaDer?: Uint8Array;
  snpRoots: readonly SnpRoot[];
  snpVcek?: VcekSource;
  gpu: GpuDeps;
}

/** The per-run choices: the instant, the nonce, and the TDX policy to judge under. */
export interface AuditChoices {
  at: number;
  nonce?: string;
  tcbPolicy?: TdxTcbPolicy;
  allowSeptVeEnabled?: boolean;
}

/** The context one run checks evidence in. */
export function evidenceContext(trust: AuditTrust, c: AuditChoices): EvidenceContext {
  return {
    at: c.at,
    tdx: {
      source: trust.tdxSource,
      rootCaDer: trust.tdxRootCaDer,
      tcbPolicy: c.tcbPolicy,
      allowSeptVeEnabled: c.allowSeptVeEnabled,
    },
    snp: { roots: trust.snpRoots, ...(trust.snpVcek ? { vcek: trust.snpVcek } : {}) },
    gpu: trust.gpu,
    ...(c.nonce !== undefined ? { nonce: c.nonce } : {}),
  };
}
