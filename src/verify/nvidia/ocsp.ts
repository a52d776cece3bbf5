/**
 * OCSP for NVIDIA certificate chains (RFC 6960): SHA-384 CertIDs, requests
 * without a nonce (responses are cached until `nextUpdate` and offline
 * collateral carries none), and response checks: SUCCESSFUL, a single
 * response for exactly this certificate, signed (ecdsa-with-SHA384) by the
 * issuer itself or by a delegated responder the issuer certified for
 * OCSPSigning, and fresh at the artefact's own verification time.
 */
import "reflect-metadata";
import { Buffer } from "node:buffer";
import { createHash, createPublicKey, verify as nodeVerify } from "node:crypto";
import {
  BasicOCSPResponse,
  CertID,
  id_kp_OCSPSigning,
  id_pkix_ocsp_basic,
  OCSPRequest,
  OCSPResponse,
  OCSPResponseStatus,
  Request,
  TBSRequest,
} from "@peculiar/asn1-ocsp";
import { AsnConvert, OctetString } from "@peculiar/asn1-schema";
import { AlgorithmIdentifier, Certificate } from "@peculiar/asn1-x509";
import { ExtendedKeyUsageExtension, X509Certificate } from "@peculiar/x509";
import { bytesToHex } from "../../aci/mod.ts";
import { type Checked, errorText, fail } from "../x509/verify_result.ts";
import { commonName } from "./device.ts";

const SHA384_OID = "2.16.840.1.101.3.4.2.2";
const ECDSA_SHA384 = "1.2.840.10045.4.3.3";

/** What a verified OCSP response says about one certificate. */
export interface OcspVerdict {
  status: "good" | "revoked" | "unknown";
  /** RFC 5280 reason name when revoked (e.g. `certificateHold`). */
  revocationReason?: string;
  thisUpdateMs: number;
  nextUpdateMs: number;
}

const REASONS = [
  "unspecified",
  "keyCompromise",
  "cACompromise",
  "affiliationChanged",
  "superseded",
  "cessationOfOperation",
  "certificateHold",
  "",
  "removeFromCRL",
  "privilegeWithdrawn",
  "aACompromise",
];

function sha384(b: ArrayBuffer | Uint8Array): Uint8Array {
  return new Uint8Array(createHash("sha384").update(new Uint8Array(b)).digest());
}

/** The SHA-384 CertID of `cert` issued by `issuer`. */
export function certIdOf(cert: X509Certificate, issuer: X509Certificate): CertID {
  const iss = AsnConvert.parse(issuer.rawData, Certificate).tbsCertificate;
  return new CertID({
    hashAlgorithm: new AlgorithmIdentifier({ algorithm: SHA384_OID, parameters: null }),
    issuerNameHash: new OctetString(sha384(AsnConvert.serialize(iss.subject))),
    issuerKeyHash: new OctetString(sha384(iss.subjectPublicKeyInfo.subjectPublicKey)),
    serialNumber: AsnConvert.parse(cert.rawData, Certificate).tbsCertificate.serialNumber,
  });
}

/** A stable cache key for a CertID (hash algorithm, name and key hashes, serial). */
export function certIdKey(id: CertID): string {
  return [
    id.hashAlgorithm.algorithm,
    bytesToHex(new Uint8Array(id.issuerNameHash.buffer)),
    bytesToHex(new Uint8Array(id.issuerKeyHash.buffer)),
    bytesToHex(new Uint8Array(id.serialNumber)),
  ].join(":");
}

/** DER OCSPRequest for one certificate, without a nonce. */
export function buildOcspRequest(cert: X509Certificate, issuer: X509Certificate): Uint8Array {
  const req = new OCSPRequest({
    tbsRequest: new TBSRequest({ requestList: [new Request({ reqCert: certIdOf(cert, issuer) })] }),
  });
  return new Uint8Array(AsnConvert.serialize(req));
}

/** The CertID keys a DER OCSPResponse answers for (empty when it does not parse). */
export function responseCertIdKeys(der: Uint8Array): string[] {
  try {
    const basic = basicOf(der);
    return basic ? basic.tbsResponseData.responses.map((r) => certIdKey(r.certID)) : [];
  } catch {
    return [];
  }
}

function basicOf(der: Uint8Array): BasicOCSPResponse | null {
  const resp = AsnConvert.parse(der, OCSPResponse);
  if (resp.responseStatus !== OCSPResponseStatus.successful || !resp.responseBytes) return null;
  if (resp.responseBytes.responseType !== id_pkix_ocsp_basic) return null;
  return AsnConvert.parse(resp.responseBytes.response, BasicOCSPResponse);
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** Checks a DER OCSPResponse for `cert` at `nowMs`; never throws. */
export async function checkOcspResponse(
  der: Uint8Array,
  cert: X509Certificate,
  issuer: X509Certificate,
  nowMs: number,
): Promise<Checked<{ verdict: OcspVerdict }>> {
  const what = `OCSP for "${commonName(cert)}"`;
  try {
    const resp = AsnConvert.parse(der, OCSPResponse);
    if (resp.responseStatus !== OCSPResponseStatus.successful) {
      return fail(`${what}: responder status ${OCSPResponseStatus[resp.responseStatus]}`);
    }
    const basic = basicOf(der);
    if (!basic || !basic.tbsResponseDataRaw) return fail(`${what}: not a basic OCSP response`);
    const wanted = certIdKey(certIdOf(cert, issuer));
    const single = basic.tbsResponseData.responses.filter((r) => certIdKey(r.certID) === wanted);
    if (single.length !== 1) {
      return fail(`${what}: the response does not answer for this certificate`);
    }

    // Signer: the issuer itself, or a delegated responder it certified for OCSP signing.
    const signer = await responderOf(basic, issuer);
    if (!signer.ok) return fail(`${what}: ${signer.reason}`);
    const rs = signer.cert;
    if (rs.notBefore.getTime() > nowMs || rs.notAfter.getTime() < nowMs) {
      return fail(
        `${what}: responder certificate "${commonName(rs)}" is not valid at ${iso(nowMs)} ` +
          `(${rs.notBefore.toISOString()}..${rs.notAfter.toISOString()})`,
      );
    }
    if (basic.signatureAlgorithm.algorithm !== ECDSA_SHA384) {
      return fail(`${what}: response is not signed with ecdsa-with-SHA384`);
    }
    const key = createPublicKey({
      key: Buffer.from(rs.publicKey.rawData),
      format: "der",
      type: "spki",
    });
    const sigOk = nodeVerify(
      "sha384",
      new Uint8Array(basic.tbsResponseDataRaw),
      { key, dsaEncoding: "der" },
      new Uint8Array(basic.signature),
    );
    if (!sigOk) return fail(`${what}: response signature does not verify`);

    const s = single[0];
    const thisUpdateMs = s.thisUpdate.getTime();
    if (!s.nextUpdate) return fail(`${what}: response has no nextUpdate`);
    const nextUpdateMs = s.nextUpdate.getTime();
    if (thisUpdateMs > nowMs) {
      return fail(`${what}: thisUpdate ${iso(thisUpdateMs)} is in the future`);
    }
    if (nextUpdateMs < nowMs) return fail(`${what}: stale (nextUpdate ${iso(nextUpdateMs)})`);
    if (s.certStatus.revoked) {
      const code = s.certStatus.revoked.revocationReason;
      const reason = code === undefined
        ? "unspecified"
        : (REASONS[code.reason] || String(code.reason));
      return {
        ok: true,
        verdict: { status: "revoked", revocationReason: reason, thisUpdateMs, nextUpdateMs },
      };
    }
    const status = s.certStatus.good !== undefined ? "good" : "unknown";
    return { ok: true, verdict: { status, thisUpdateMs, nextUpdateMs } };
  } catch (e) {
    return fail(`${what}: response does not parse: ${errorText(e)}`);
  }
}

async function responderOf(
  basic: BasicOCSPResponse,
  issuer: X509Certificate,
): Promise<Checked<{ cert: X509Certificate }>> {
  const certs = (basic.certs ?? []).map((c) => new X509Certificate(AsnConvert.serialize(c)));
  const rid = basic.tbsResponseData.responderID;
  const named = certs.find((c) => {
    if (rid.byKey) {
      const keyHash = createHash("sha1").update(
        new Uint8Array(
          AsnConvert.parse(c.rawData, Certificate).tbsCertificate.subjectPublicKeyInfo
            .subjectPublicKey,
        ),
      ).digest("hex");
      return keyHash === bytesToHex(new Uint8Array(rid.byKey.buffer));
    }
    return true;
  }) ?? issuer;
  if (bytesToHex(new Uint8Array(named.rawData)) === bytesToHex(new Uint8Array(issuer.rawData))) {
    return { ok: true, cert: issuer };
  }
  if (named.issuer !== issuer.subject) {
    return fail(`responder "${commonName(named)}" is not issued by "${commonName(issuer)}"`);
  }
  const eku = named.getExtension(ExtendedKeyUsageExtension);
  if (!eku || !eku.usages.map(String).includes(id_kp_OCSPSigning)) {
    return fail(`responder "${commonName(named)}" is not certified for OCSP signing`);
  }
  let ok = false;
  try {
    ok = await named.verify({ publicKey: issuer, signatureOnly: true });
  } catch {
    ok = false;
  }
  if (!ok) return fail(`responder "${commonName(named)}" is not signed by "${commonName(issuer)}"`);
  return { ok: true, cert: named };
}
