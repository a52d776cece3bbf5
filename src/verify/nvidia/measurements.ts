/**
 * Reference measurements against runtime ones: the golden set is the
 * active driver entries plus the active VBIOS entries (an index active in
 * both is an error); RIM index i is SPDM block i+1; an entry matches when
 * one alternative equals the runtime value and the sizes agree. Index 35
 * is skipped when the report says NVDEC0 is disabled (0x55), as NVIDIA's
 * C++ SDK does.
 */
import { bytesEqual, bytesToHex } from "../../aci/mod.ts";
import { type Checked, fail } from "../x509/verify_result.ts";
import type { ReferenceMeasurement } from "./rim.ts";
import { OPAQUE, type SpdmEvidence } from "./spdm.ts";

const NVDEC0_INDEX = 35;
const NVDEC0_DISABLED = 0x55;

/** Compares; `compared` counts the entries actually checked. */
export function compareMeasurements(
  evidence: SpdmEvidence,
  driver: readonly ReferenceMeasurement[],
  vbios: readonly ReferenceMeasurement[],
): Checked<{ compared: number; skipped: number[] }> {
  const golden = new Map<number, ReferenceMeasurement>();
  for (const m of [...driver, ...vbios]) {
    if (golden.has(m.index)) {
      return fail(`index ${m.index} is active in both the driver and VBIOS RIM`);
    }
    golden.set(m.index, m);
  }
  const nvdec = evidence.opaque.get(OPAQUE.NVDEC0_STATUS);
  const nvdecOff = nvdec?.length === 1 && nvdec[0] === NVDEC0_DISABLED;
  const mismatches: string[] = [];
  const skipped: number[] = [];
  let compared = 0;
  for (const [index, ref] of [...golden].sort((a, b) => a[0] - b[0])) {
    if (index === NVDEC0_INDEX && nvdecOff) {
      skipped.push(index);
      continue;
    }
    const block = evidence.blocks.find((b) => b.index === index + 1);
    compared++;
    if (!block) {
      mismatches.push(`${index} (no runtime block)`);
      continue;
    }
    const ok = block.value.length === ref.size &&
      ref.alternatives.some((alt) => bytesEqual(alt, block.value));
    if (!ok) mismatches.push(`${index} (runtime ${bytesToHex(block.value).slice(0, 12)}…)`);
  }
  if (mismatches.length) {
    return fail(
      `${mismatches.length} of ${compared} measurements differ: index ${mismatches.join(", ")}`,
    );
  }
  return { ok: true, compared, skipped };
}
