/**
 * `TdxCollateral`: the verification collateral for one FMSPC (TCB Info, QE
 * Identity, CRLs and their issuer chains), with loaders from the dcap-qvl JSON
 * shape and from raw Intel PCS / PCCS responses.
 */
import { parseHex } from "../../aci/hex.ts";
import { type Checked, fail } from "../x509/verify_result.ts";
import { rawJsonMember } from "./json_member.ts";

/** Collateral as served; nothing in it is trusted until `verifyTdxQuote` checks it. */
export interface TdxCollateral {
  /** PEM chain of the PCK CRL issuer (informational: the CRL is checked against the quote's own chain). */
  pckCrlIssuerChain: string;
  /** DER of the Intel SGX Root CA CRL. */
  rootCaCrl: Uint8Array;
  /** DER of the PCK Platform/Processor CA CRL. */
  pckCrl: Uint8Array;
  /** PEM chain: TCB signing cert → root. */
  tcbInfoIssuerChain: string;
  /** The exact served text of the `tcbInfo` JSON value (the signed bytes). */
  tcbInfo: string;
  /** Raw r‖s (64 bytes). */
  tcbInfoSignature: Uint8Array;
  qeIdentityIssuerChain: string;
  /** The exact served text of the `enclaveIdentity` JSON value. */
  qeIdentity: string;
  qeIdentitySignature: Uint8Array;
}

/** The JSON shape of dcap-qvl's `QuoteCollateralV3` (hex for binary fields). */
export interface DcapQvlCollateralJson {
  pck_crl_issuer_chain: string;
  root_ca_crl: string;
  pck_crl: string;
  tcb_info_issuer_chain: string;
  tcb_info: string;
  tcb_info_signature: string;
  qe_identity_issuer_chain: string;
  qe_identity: string;
  qe_identity_signature: string;
}

const STRING_FIELDS = [
  "pck_crl_issuer_chain",
  "root_ca_crl",
  "pck_crl",
  "tcb_info_issuer_chain",
  "tcb_info",
  "tcb_info_signature",
  "qe_identity_issuer_chain",
  "qe_identity",
  "qe_identity_signature",
] as const;

/** Loads collateral in dcap-qvl's JSON shape (object or its JSON text). */
export function collateralFromDcapQvlJson(input: unknown): Checked<{ collateral: TdxCollateral }> {
  let value = input;
  if (typeof input === "string") {
    try {
      value = JSON.parse(input);
    } catch {
      return fail("collateral JSON does not parse");
    }
  }
  if (typeof value !== "object" || value === null) return fail("collateral is not an object");
  const rec = value as Record<string, unknown>;
  const s: Partial<Record<(typeof STRING_FIELDS)[number], string>> = {};
  for (const k of STRING_FIELDS) {
    const v = rec[k];
    if (typeof v !== "string") return fail(`collateral field ${k} missing or not a string`);
    s[k] = v;
  }
  const j = s as DcapQvlCollateralJson;
  const rootCaCrl = parseHex(j.root_ca_crl);
  const pckCrl = parseHex(j.pck_crl);
  const tcbSig = parseHex(j.tcb_info_signature);
  const qeSig = parseHex(j.qe_identity_signature);
  if (!rootCaCrl || !pckCrl) return fail("collateral CRL fields are not hex");
  if (!tcbSig || tcbSig.length !== 64) {
    return fail("collateral tcb_info_signature is not 64 bytes of hex");
  }
  if (!qeSig || qeSig.length !== 64) {
    return fail("collateral qe_identity_signature is not 64 bytes of hex");
  }
  return {
    ok: true,
    collateral: {
      pckCrlIssuerChain: j.pck_crl_issuer_chain,
      rootCaCrl,
      pckCrl,
      tcbInfoIssuerChain: j.tcb_info_issuer_chain,
      tcbInfo: j.tcb_info,
      tcbInfoSignature: tcbSig,
      qeIdentityIssuerChain: j.qe_identity_issuer_chain,
      qeIdentity: j.qe_identity,
      qeIdentitySignature: qeSig,
    },
  };
}

/** Converts back to dcap-qvl's JSON shape (for oracles and for serving test PCS data). */
export function collateralToDcapQvlJson(c: TdxCollateral): DcapQvlCollateralJson {
  const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return {
    pck_crl_issuer_chain: c.pckCrlIssuerChain,
    root_ca_crl: hex(c.rootCaCrl),
    pck_crl: hex(c.pckCrl),
    tcb_info_issuer_chain: c.tcbInfoIssuerChain,
    tcb_info: c.tcbInfo,
    tcb_info_signature: hex(c.tcbInfoSignature),
    qe_identity_issuer_chain: c.qeIdentityIssuerChain,
    qe_identity: c.qeIdentity,
    qe_identity_signature: hex(c.qeIdentitySignature),
  };
}

/** Splits a PCS signed-document body `{"<member>": {...}, "signature": "<hex>"}`. */
function splitSignedPcsBody(
  body: string,
  member: "tcbInfo" | "enclaveIdentity",
): Checked<{ raw: string; signature: Uint8Array }> {
  const raw = rawJsonMember(body, member);
  if (raw === null) return fail(`PCS response has no ${member} member`);
  const sigText = rawJsonMember(body, "signature");
  let sigHex: unknown = null;
  try {
    sigHex = sigText === null ? null : JSON.parse(sigText);
  } catch {
    sigHex = null;
  }
  const sig = typeof sigHex === "string" ? parseHex(sigHex) : null;
  if (!sig || sig.length !== 64) {
    return fail(`PCS ${member} response signature is not 64 bytes of hex`);
  }
  return { ok: true, raw, signature: sig };
}

/**
 * A CRL as PCS/PCCS may serve it: DER, PEM (`X509 CRL`), or hex text of the
 * DER (PCCS `rootcacrl`). Returns the DER or null.
 */
function decodeCrlBody(body: Uint8Array): Uint8Array | null {
  if (body.length > 0 && body[0] === 0x30) return body;
  const text = new TextDecoder().decode(body).trim();
  const pem = /-----BEGIN X509 CRL-----([A-Za-z0-9+/=\s]+)-----END X509 CRL-----/.exec(text);
  if (pem) {
    const bin = atob(pem[1].replace(/\s+/g, ""));
    return Uint8Array.from(bin, (ch) => ch.charCodeAt(0));
  }
  const hex = parseHex(text);
  return hex && hex.length > 0 && hex[0] === 0x30 ? hex : null;
}

/** Raw PCS responses (bodies plus issuer-chain headers, already URL-decoded). */
export interface PcsResponses {
  tcbInfoBody: string;
  tcbInfoIssuerChain: string;
  qeIdentityBody: string;
  qeIdentityIssuerChain: string;
  pckCrlBody: Uint8Array;
  pckCrlIssuerChain: string;
  rootCaCrlBody: Uint8Array;
}

/** Builds collateral from raw PCS/PCCS responses. */
export function collateralFromPcsResponses(
  r: PcsResponses,
): Checked<{ collateral: TdxCollateral }> {
  const tcb = splitSignedPcsBody(r.tcbInfoBody, "tcbInfo");
  if (!tcb.ok) return tcb;
  const qe = splitSignedPcsBody(r.qeIdentityBody, "enclaveIdentity");
  if (!qe.ok) return qe;
  const pckCrl = decodeCrlBody(r.pckCrlBody);
  if (!pckCrl) return fail("PCS PCK CRL response is not DER, PEM or hex");
  const rootCaCrl = decodeCrlBody(r.rootCaCrlBody);
  if (!rootCaCrl) return fail("PCS root CA CRL response is not DER, PEM or hex");
  return {
    ok: true,
    collateral: {
      pckCrlIssuerChain: r.pckCrlIssuerChain,
      rootCaCrl,
      pckCrl,
      tcbInfoIssuerChain: r.tcbInfoIssuerChain,
      tcbInfo: tcb.raw,
      tcbInfoSignature: tcb.signature,
      qeIdentityIssuerChain: r.qeIdentityIssuerChain,
      qeIdentity: qe.raw,
      qeIdentitySignature: qe.signature,
    },
  };
}
