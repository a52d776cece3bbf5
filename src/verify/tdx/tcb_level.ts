/**
 * TCB evaluation for TDX (Intel QVL semantics): QE Identity policy and QE
 * TCB level, the platform TCB level (SGX components + PCESVN from the PCK
 * certificate, TDX components from TEE_TCB_SVN), the TDX module identity, and
 * the convergence of the three statuses into one.
 */
import { bytesEqual, bytesToHex, parseHex } from "../../aci/hex.ts";
import { type Checked, fail } from "../x509/verify_result.ts";
import type { PckExtension } from "./pck_extension.ts";
import type { QeReport, TdReport } from "./quote.ts";
import type { QeIdentity, StatusLevel, TcbInfo } from "./tcb_info.ts";
import {
  ACCEPTABLE_TCB_STATUSES,
  type AcceptableTcbStatus,
} from "../../config/attestation_names.ts";

/**
 * TCB statuses Intel publishes, plus `NotSupported` (Intel QVL's
 * STATUS_TCB_NOT_SUPPORTED: the platform is below every level the TCB Info
 * lists, or its TDX module identity or SVN is unknown). `NotSupported` and
 * `Revoked` always fail verification; the rest is the TCB policy's
 * (`tcb_policy.ts`).
 */
export type TcbStatus = "NotSupported" | AcceptableTcbStatus | "Revoked";

/** The statuses a TCB Info level may carry (the configuration's list, plus `Revoked`). */
const KNOWN: readonly string[] = [...ACCEPTABLE_TCB_STATUSES, "Revoked"];

function asStatus(s: string): TcbStatus | null {
  return KNOWN.includes(s) ? s as TcbStatus : null;
}

/** Result of the QE Identity check: the QE's own TCB status. */
export interface QeTcb {
  status: "UpToDate" | "OutOfDate" | "Revoked";
  advisoryIds: string[];
}

/** Step 6: MRSIGNER, ISVPRODID, masked MISCSELECT/ATTRIBUTES, then the QE TCB level. */
export function checkQeIdentity(qe: QeReport, id: QeIdentity): Checked<{ qeTcb: QeTcb }> {
  const mrsigner = parseHex(id.mrsigner);
  if (!mrsigner || !bytesEqual(mrsigner, qe.mrSigner)) {
    return fail(
      `QE identity: MRSIGNER ${bytesToHex(qe.mrSigner)} is not ${id.mrsigner.toLowerCase()}`,
    );
  }
  if (qe.isvProdId !== id.isvprodid) {
    return fail(`QE identity: ISVPRODID ${qe.isvProdId} is not ${id.isvprodid}`);
  }
  const misc = parseInt(id.miscselect, 16) >>> 0;
  const miscMask = parseInt(id.miscselectMask, 16) >>> 0;
  // Intel writes MISCSELECT in the JSON as a big-endian u32 hex string.
  if (((qe.miscSelect & miscMask) >>> 0) !== ((misc & miscMask) >>> 0)) {
    return fail("QE identity: masked MISCSELECT does not match");
  }
  const attrs = parseHex(id.attributes);
  const mask = parseHex(id.attributesMask);
  if (!attrs || !mask) return fail("QE identity: attributes are not hex");
  for (let i = 0; i < 16; i++) {
    if ((qe.attributes[i] & mask[i]) !== (attrs[i] & mask[i])) {
      return fail(`QE identity: masked ATTRIBUTES differ at byte ${i}`);
    }
  }
  const level = id.tcbLevels.find((l) => qe.isvSvn >= l.tcb.isvsvn);
  if (!level) return fail(`QE identity: QE ISVSVN ${qe.isvSvn} is below every TCB level`);
  if (
    level.tcbStatus !== "UpToDate" && level.tcbStatus !== "OutOfDate" &&
    level.tcbStatus !== "Revoked"
  ) {
    return fail(`QE identity: unrecognized QE TCB status ${level.tcbStatus}`);
  }
  return { ok: true, qeTcb: { status: level.tcbStatus, advisoryIds: level.advisoryIDs ?? [] } };
}

/** The outcome of TCB matching. */
export interface TdxTcb {
  tcbStatus: TcbStatus;
  advisoryIds: string[];
  /** Index of the matched entry in `tcbInfo.tcbLevels`. */
  levelIndex: number;
  /** `TDX_%02X` of the module identity used, or null for TDX module major version 0. */
  tdxModuleId: string | null;
  /** Why the status is `NotSupported`, when it is. */
  detail?: string;
}

function convergeWithModule(status: TcbStatus, module: StatusLevel["tcbStatus"]): TcbStatus {
  if (module === "Revoked") return "Revoked";
  if (module === "OutOfDate") {
    if (status === "UpToDate" || status === "SWHardeningNeeded") return "OutOfDate";
    if (status === "ConfigurationNeeded" || status === "ConfigurationAndSWHardeningNeeded") {
      return "OutOfDateConfigurationNeeded";
    }
  }
  return status;
}

function convergeWithQe(status: TcbStatus, qe: QeTcb["status"]): TcbStatus {
  if (qe === "Revoked") return "Revoked";
  if (qe === "OutOfDate") {
    if (status === "UpToDate" || status === "SWHardeningNeeded") return "OutOfDate";
    if (status === "ConfigurationNeeded" || status === "ConfigurationAndSWHardeningNeeded") {
      return "OutOfDateConfigurationNeeded";
    }
  }
  return status;
}

function maskedEqual(actual: Uint8Array, expectedHex: string, maskHex: string): boolean {
  const e = parseHex(expectedHex);
  const m = parseHex(maskHex);
  if (!e || !m || e.length !== actual.length || m.length !== actual.length) return false;
  for (let i = 0; i < actual.length; i++) if ((actual[i] & m[i]) !== (e[i] & m[i])) return false;
  return true;
}

/** Step 7: platform TCB level, TDX module identity, convergence with the QE TCB. */
// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
export function matchTdxTcb(
  tcbInfo: TcbInfo,
  pck: PckExtension,
  report: TdReport,
  qeTcb: QeTcb,
): Checked<{ tcb: TdxTcb }> {
  const tee = report.teeTcbSvn;
  // Intel QVL: with a TDX module major version (byte 1) > 0, components 0 and 1
  // are graded by the module identity instead of the TCB level.
  const tdxStart = tee[1] > 0 ? 2 : 0;
  let sgxMatched = false;
  let levelIndex = -1;
  for (let i = 0; i < tcbInfo.tcbLevels.length; i++) {
    const l = tcbInfo.tcbLevels[i];
    const sgxOk = l.tcb.sgxtcbcomponents.every((c, k) => pck.sgxTcbComponents[k] >= c.svn) &&
      pck.pceSvn >= l.tcb.pcesvn;
    if (!sgxOk) continue;
    sgxMatched = true;
    const tdx = l.tcb.tdxtcbcomponents ?? [];
    let tdxOk = tdx.length === 16;
    for (let k = tdxStart; tdxOk && k < 16; k++) tdxOk = tee[k] >= tdx[k].svn;
    if (tdxOk) {
      levelIndex = i;
      break;
    }
  }
  const notSupported = (detail: string, tdxModuleId: string | null = null) => ({
    ok: true as const,
    tcb: {
      tcbStatus: "NotSupported" as const,
      advisoryIds: qeTcb.advisoryIds,
      levelIndex: -1,
      tdxModuleId,
      detail,
    },
  });
  if (!sgxMatched) {
    return notSupported(
      `no TCB level matches the PCK certificate's SGX components ${
        pck.sgxTcbComponents.join(",")
      } / PCESVN ${pck.pceSvn}`,
    );
  }
  if (levelIndex < 0) return notSupported(`no TCB level matches TEE_TCB_SVN ${bytesToHex(tee)}`);
  const level = tcbInfo.tcbLevels[levelIndex];
  const levelStatus = asStatus(level.tcbStatus);
  if (!levelStatus) return fail(`TCB level: unrecognized TCB status ${level.tcbStatus}`);
  const advisories = new Set(level.advisoryIDs ?? []);

  let status = levelStatus;
  let tdxModuleId: string | null = null;
  if (tee[1] === 0) {
    const m = tcbInfo.tdxModule;
    if (m && !bytesEqual(parseHex(m.mrsigner) ?? new Uint8Array(), report.mrSignerSeam)) {
      return fail("TDX module mismatch: MRSIGNERSEAM differs from the TCB Info tdxModule");
    }
    if (m && !maskedEqual(report.seamAttributes, m.attributes, m.attributesMask)) {
      return fail("TDX module mismatch: SEAMATTRIBUTES differ from the TCB Info tdxModule");
    }
  } else {
    tdxModuleId = `TDX_${tee[1].toString(16).toUpperCase().padStart(2, "0")}`;
    const ident = (tcbInfo.tdxModuleIdentities ?? []).find((m) =>
      m.id.toUpperCase() === tdxModuleId
    );
    if (!ident) {
      return notSupported(`TDX module identity ${tdxModuleId} is not in the TCB Info`, tdxModuleId);
    }
    if (!bytesEqual(parseHex(ident.mrsigner) ?? new Uint8Array(), report.mrSignerSeam)) {
      return fail(`TDX module mismatch: MRSIGNERSEAM differs from ${tdxModuleId}`);
    }
    if (!maskedEqual(report.seamAttributes, ident.attributes, ident.attributesMask)) {
      return fail(`TDX module mismatch: SEAMATTRIBUTES differ from ${tdxModuleId}`);
    }
    const ml = ident.tcbLevels.find((l) => tee[0] >= l.tcb.isvsvn);
    if (!ml) {
      return notSupported(
        `TDX module SVN ${tee[0]} is below every ${tdxModuleId} level`,
        tdxModuleId,
      );
    }
    if (!asStatus(ml.tcbStatus)) return fail(`TDX module: unrecognized TCB status ${ml.tcbStatus}`);
    for (const a of ml.advisoryIDs ?? []) advisories.add(a);
    status = convergeWithModule(status, ml.tcbStatus);
  }
  for (const a of qeTcb.advisoryIds) advisories.add(a);
  status = convergeWithQe(status, qeTcb.status);
  return {
    ok: true,
    tcb: { tcbStatus: status, advisoryIds: [...advisories], levelIndex, tdxModuleId },
  };
}
