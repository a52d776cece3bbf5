/**
 * The evidence kinds `task verify --evidence FILE --kind K` knows, by name.
 * One row per kind; a provider's kind is a module beside this one.
 */
import { dstackKind } from "./dstack.ts";
import { nvidiaKind } from "./nvidia.ts";
import { sevSnpKind } from "./sev_snp.ts";
import { tdxKind } from "./tdx.ts";
import type { EvidenceKind } from "./types.ts";
import { check } from "../checks.ts";

export const EVIDENCE_KINDS: Readonly<Record<string, EvidenceKind>> = {
  "dstack": dstackKind,
  "sev-snp": sevSnpKind,
  "tdx": tdxKind,
  "nvidia": nvidiaKind,
};

/**
 * The kind for a name, or null. Its `verify` never throws: a kind's bug on
 * hostile input becomes a failed `<name>.internal` check, never a pass.
 */
export function evidenceKind(name: string): EvidenceKind | null {
  if (!Object.hasOwn(EVIDENCE_KINDS, name)) return null;
  const kind = EVIDENCE_KINDS[name];
  return {
    reads: kind.reads,
    verify: async (input, ctx) => {
      try {
        return await kind.verify(input, ctx);
      } catch (e) {
        return [check(`${name}.internal`, false, e instanceof Error ? e.message : String(e))];
      }
    },
  };
}
