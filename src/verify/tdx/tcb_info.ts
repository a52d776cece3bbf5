/**
 * Intel TCB Info (TDX, version 3) and QE Identity (TD_QE) documents: schema
 * validation of the signed JSON. Signatures are checked by `collateral_check.ts`
 * over the raw bytes before these parsed values are trusted.
 */
import { z } from "zod";
import { type Checked, fail } from "../x509/verify_result.ts";

const HEX = /^[0-9a-fA-F]*$/;
const hexOf = (bytes: number) => z.string().length(bytes * 2).regex(HEX);
const svnComponent = z.object({ svn: z.number().int().min(0).max(255) });

const statusLevel = z.object({
  tcb: z.object({ isvsvn: z.number().int().min(0).max(65535) }),
  tcbDate: z.string(),
  tcbStatus: z.string(),
  advisoryIDs: z.array(z.string()).optional(),
});

const tcbInfoSchema = z.object({
  id: z.string(),
  version: z.number().int(),
  issueDate: z.string(),
  nextUpdate: z.string(),
  fmspc: hexOf(6),
  pceId: hexOf(2),
  tcbType: z.number().int(),
  tcbEvaluationDataNumber: z.number().int(),
  tdxModule: z.object({
    mrsigner: hexOf(48),
    attributes: hexOf(8),
    attributesMask: hexOf(8),
  }).optional(),
  tdxModuleIdentities: z.array(z.object({
    id: z.string(),
    mrsigner: hexOf(48),
    attributes: hexOf(8),
    attributesMask: hexOf(8),
    tcbLevels: z.array(statusLevel),
  })).optional(),
  tcbLevels: z.array(z.object({
    tcb: z.object({
      sgxtcbcomponents: z.array(svnComponent).length(16),
      pcesvn: z.number().int().min(0).max(65535),
      tdxtcbcomponents: z.array(svnComponent).length(16).optional(),
    }),
    tcbDate: z.string(),
    tcbStatus: z.string(),
    advisoryIDs: z.array(z.string()).optional(),
  })).min(1),
});

const qeIdentitySchema = z.object({
  id: z.string(),
  version: z.number().int(),
  issueDate: z.string(),
  nextUpdate: z.string(),
  tcbEvaluationDataNumber: z.number().int(),
  miscselect: hexOf(4),
  miscselectMask: hexOf(4),
  attributes: hexOf(16),
  attributesMask: hexOf(16),
  mrsigner: hexOf(32),
  isvprodid: z.number().int().min(0).max(65535),
  tcbLevels: z.array(statusLevel).min(1),
});

export type TcbInfo = z.infer<typeof tcbInfoSchema>;
export type QeIdentity = z.infer<typeof qeIdentitySchema>;
export type StatusLevel = z.infer<typeof statusLevel>;

function firstIssue(e: z.ZodError): string {
  const i = e.issues[0];
  return i ? `${i.path.join(".") || "(root)"}: ${i.message}` : "invalid";
}

function parseJson(raw: string, what: string): Checked<{ value: unknown }> {
  try {
    return { ok: true, value: JSON.parse(raw) };
  } catch {
    return fail(`${what} is not valid JSON`);
  }
}

/** Parses and validates a TDX TCB Info document (the raw signed `tcbInfo` text). */
export function parseTcbInfo(raw: string): Checked<{ tcbInfo: TcbInfo }> {
  const j = parseJson(raw, "TCB Info");
  if (!j.ok) return j;
  const r = tcbInfoSchema.safeParse(j.value);
  if (!r.success) return fail(`TCB Info malformed: ${firstIssue(r.error)}`);
  if (r.data.id !== "TDX" || r.data.version < 3) {
    return fail(`TCB Info is not for TDX (id ${r.data.id}, version ${r.data.version})`);
  }
  if (r.data.tcbLevels.some((l) => !l.tcb.tdxtcbcomponents)) {
    return fail("TCB Info malformed: a TDX TCB level lacks tdxtcbcomponents");
  }
  return { ok: true, tcbInfo: r.data };
}

/** Parses and validates a QE Identity document (the raw signed `enclaveIdentity` text). */
export function parseQeIdentity(raw: string): Checked<{ qeIdentity: QeIdentity }> {
  const j = parseJson(raw, "QE Identity");
  if (!j.ok) return j;
  const r = qeIdentitySchema.safeParse(j.value);
  if (!r.success) return fail(`QE Identity malformed: ${firstIssue(r.error)}`);
  if (r.data.id !== "TD_QE") return fail(`QE Identity id is ${r.data.id}, expected TD_QE`);
  return { ok: true, qeIdentity: r.data };
}

/** Epoch ms of an ISO date from a collateral document, or null when unparsable. */
export function isoToMs(iso: string): number | null {
  const t = Date.parse(iso);
  return Number.isFinite(t) ? t : null;
}
