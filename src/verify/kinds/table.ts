/**
 * The evidence kinds `task verify --evidence FILE --kind K` knows, by name.
 * One row per kind; a provider's kind is a module beside this one.
 */
import { dstackKind } from "./dstack.ts";
import { nvidiaKind } from "./nvidia.ts";
import { sevSnpKind } from "./sev_snp.ts";
import { tdxKind } from "./tdx.ts";
import type { EvidenceKind } from "./types.ts";

export const EVIDENCE_KINDS: Readonly<Record<string, EvidenceKind>> = {
  "dstack": dstackKind,
  "sev-snp": sevSnpKind,
  "tdx": tdxKind,
  "nvidia": nvidiaKind,
};

/** The kind for a name, or null. */
export function evidenceKind(name: string): EvidenceKind | null {
  return Object.hasOwn(EVIDENCE_KINDS, name) ? EVIDENCE_KINDS[name] : null;
}
