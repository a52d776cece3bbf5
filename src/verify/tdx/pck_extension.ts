/**
 * Intel's SGX extension of a PCK certificate (OID 1.2.840.113741.1.13.1):
 * the platform's TCB components, PCESVN, PCE-ID, FMSPC and PPID, which TCB
 * level matching compares against the signed TCB Info.
 */
import "reflect-metadata";
import type { X509Certificate } from "@peculiar/x509";
import {
  children,
  decodeOid,
  decodeSmallUint,
  readTlv,
  TAG_OCTET_STRING,
  TAG_SEQUENCE,
  type Tlv,
} from "../x509/der.ts";
import { bytesToHex } from "../../aci/hex.ts";
import { type Checked, fail } from "../x509/verify_result.ts";

export const SGX_EXTENSION_OID = "1.2.840.113741.1.13.1";

/** The fields of the SGX extension that verification uses. */
export interface PckExtension {
  /** SGX TCB components 1..16 (OIDs .2.1–.2.16). */
  sgxTcbComponents: number[];
  pceSvn: number;
  /** Lowercase hex. */
  cpuSvn: string;
  fmspc: string;
  pceId: string;
  ppid: string;
}

function octets(bytes: Uint8Array, t: Tlv): Uint8Array | null {
  return t.tag === TAG_OCTET_STRING ? bytes.subarray(t.start, t.end) : null;
}

/** Pairs of (oid, value element) in a SEQUENCE OF SEQUENCE { OID, value }. */
function oidPairs(bytes: Uint8Array, seq: Tlv): Map<string, Tlv> | null {
  if (seq.tag !== TAG_SEQUENCE) return null;
  const items = children(bytes, seq);
  if (!items) return null;
  const out = new Map<string, Tlv>();
  for (const item of items) {
    if (item.tag !== TAG_SEQUENCE) return null;
    const kv = children(bytes, item);
    if (!kv || kv.length !== 2) return null;
    const oid = decodeOid(bytes, kv[0]);
    if (!oid) return null;
    out.set(oid, kv[1]);
  }
  return out;
}

/** Decodes the extension's DER value (the OCTET STRING contents). */
export function parsePckExtensionValue(value: Uint8Array): Checked<{ ext: PckExtension }> {
  const bad = (what: string) => fail(`PCK certificate SGX extension: ${what}`);
  const top = readTlv(value, 0);
  if (!top || top.end !== value.length) return bad("malformed DER");
  const fields = oidPairs(value, top);
  if (!fields) return bad("malformed DER");
  const p = SGX_EXTENSION_OID;
  const tcb = fields.get(`${p}.2`);
  const fmspcT = fields.get(`${p}.4`);
  const pceIdT = fields.get(`${p}.3`);
  const ppidT = fields.get(`${p}.1`);
  if (!tcb || !fmspcT || !pceIdT || !ppidT) return bad("missing TCB, FMSPC, PCE-ID or PPID");
  const tcbFields = oidPairs(value, tcb);
  if (!tcbFields) return bad("malformed TCB");
  const comps: number[] = [];
  for (let i = 1; i <= 16; i++) {
    const t = tcbFields.get(`${p}.2.${i}`);
    const v = t ? decodeSmallUint(value, t) : null;
    if (v === null) return bad(`missing TCB component ${i}`);
    comps.push(v);
  }
  const pceT = tcbFields.get(`${p}.2.17`);
  const pceSvn = pceT ? decodeSmallUint(value, pceT) : null;
  if (pceSvn === null) return bad("missing PCESVN");
  const cpuT = tcbFields.get(`${p}.2.18`);
  const cpuSvn = cpuT ? octets(value, cpuT) : null;
  const fmspc = octets(value, fmspcT);
  const pceId = octets(value, pceIdT);
  const ppid = octets(value, ppidT);
  if (!cpuSvn || !fmspc || fmspc.length !== 6 || !pceId || !ppid) {
    return bad("CPUSVN, FMSPC, PCE-ID or PPID has the wrong type or size");
  }
  return {
    ok: true,
    ext: {
      sgxTcbComponents: comps,
      pceSvn,
      cpuSvn: bytesToHex(cpuSvn),
      fmspc: bytesToHex(fmspc),
      pceId: bytesToHex(pceId),
      ppid: bytesToHex(ppid),
    },
  };
}

/** Reads the SGX extension from a PCK leaf certificate. */
export function parsePckExtension(cert: X509Certificate): Checked<{ ext: PckExtension }> {
  const ext = cert.getExtension(SGX_EXTENSION_OID);
  if (!ext) return fail("PCK certificate has no SGX extension (OID 1.2.840.113741.1.13.1)");
  return parsePckExtensionValue(new Uint8Array(ext.value));
}
