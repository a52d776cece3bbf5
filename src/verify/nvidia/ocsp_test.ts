/**
 * OCSP response checks on responses this test signs itself (a throwaway
 * P-384 CA, a delegated responder), for the cases NVIDIA's stored answers
 * do not cover: revoked / certificate_hold, unknown, a responder without
 * the OCSPSigning purpose, a forged signature, stale answers.
 */
import assert from "node:assert/strict";
import "reflect-metadata";
import { createHash, KeyObject, sign as nodeSign } from "node:crypto";
import {
  BasicOCSPResponse,
  CertStatus,
  id_pkix_ocsp_basic,
  KeyHash,
  OCSPResponse,
  OCSPResponseStatus,
  ResponderID,
  ResponseBytes,
  ResponseData,
  RevokedInfo,
  SingleResponse,
} from "@peculiar/asn1-ocsp";
import { AsnConvert, OctetString } from "@peculiar/asn1-schema";
import { AlgorithmIdentifier, Certificate, CRLReason, CRLReasons } from "@peculiar/asn1-x509";
import {
  BasicConstraintsExtension,
  ExtendedKeyUsage,
  ExtendedKeyUsageExtension,
  type X509Certificate,
  X509CertificateGenerator,
} from "@peculiar/x509";
import { certIdOf, checkOcspResponse } from "./ocsp.ts";

const ALG = { name: "ECDSA", namedCurve: "P-384", hash: "SHA-384" };
const T0 = Date.parse("2025-08-21T00:00:00Z");
const DAY = 86_400_000;

async function keys() {
  return await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]) as CryptoKeyPair;
}

async function pki() {
  const caKeys = await keys();
  const validity = { notBefore: new Date(T0 - 365 * DAY), notAfter: new Date(T0 + 365 * DAY) };
  const ca = await X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "CN=Test Identity CA",
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [new BasicConstraintsExtension(true, undefined, true)],
    ...validity,
  });
  const issue = async (serial: string, cn: string, eku: boolean) => {
    const k = await keys();
    const cert = await X509CertificateGenerator.create({
      serialNumber: serial,
      subject: `CN=${cn}`,
      issuer: ca.subject,
      publicKey: k.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: ALG,
      extensions: eku ? [new ExtendedKeyUsageExtension([ExtendedKeyUsage.ocspSigning])] : [],
      ...validity,
    });
    return { cert, key: k.privateKey };
  };
  return {
    ca,
    leaf: await issue("0a", "Test BROM", false),
    responder: await issue("0b", "Test OCSP Responder", true),
    plain: await issue("0c", "Not A Responder", false),
  };
}

function respond(
  target: X509Certificate,
  issuer: X509Certificate,
  signer: { cert: X509Certificate; key: CryptoKey },
  status: CertStatus,
  opts: { thisUpdate?: number; forge?: boolean } = {},
): Uint8Array {
  const thisUpdate = opts.thisUpdate ?? T0;
  const spki = AsnConvert.parse(signer.cert.rawData, Certificate).tbsCertificate
    .subjectPublicKeyInfo.subjectPublicKey;
  const tbs = new ResponseData({
    responderID: new ResponderID({
      byKey: new KeyHash(createHash("sha1").update(new Uint8Array(spki)).digest()),
    }),
    producedAt: new Date(thisUpdate),
    responses: [
      new SingleResponse({
        certID: certIdOf(target, issuer),
        certStatus: status,
        thisUpdate: new Date(thisUpdate),
        nextUpdate: new Date(thisUpdate + DAY),
      }),
    ],
  });
  const tbsDer = new Uint8Array(AsnConvert.serialize(tbs));
  if (opts.forge) tbsDer[tbsDer.length - 1] ^= 1; // signs other bytes than it carries
  const signature = nodeSign("sha384", tbsDer, {
    key: KeyObject.from(signer.key),
    dsaEncoding: "der",
  });
  const basic = new BasicOCSPResponse({
    tbsResponseData: tbs,
    signatureAlgorithm: new AlgorithmIdentifier({ algorithm: "1.2.840.10045.4.3.3" }),
    signature: new Uint8Array(signature).buffer,
    certs: [AsnConvert.parse(signer.cert.rawData, Certificate)],
  });
  return new Uint8Array(AsnConvert.serialize(
    new OCSPResponse({
      responseStatus: OCSPResponseStatus.successful,
      responseBytes: new ResponseBytes({
        responseType: id_pkix_ocsp_basic,
        response: new OctetString(AsnConvert.serialize(basic)),
      }),
    }),
  ));
}

const good = () => new CertStatus({ good: null });
const hold = () =>
  new CertStatus({
    revoked: new RevokedInfo({
      revocationTime: new Date(T0 - DAY),
      revocationReason: new CRLReason(CRLReasons.certificateHold),
    }),
  });

Deno.test("ocsp: good, revoked (certificateHold) and freshness at the artefact's own time", async () => {
  const p = await pki();
  const ok = await checkOcspResponse(
    respond(p.leaf.cert, p.ca, p.responder, good()),
    p.leaf.cert,
    p.ca,
    T0 + 3600_000,
  );
  assert.ok(ok.ok && ok.verdict.status === "good", JSON.stringify(ok));
  const held = await checkOcspResponse(
    respond(p.leaf.cert, p.ca, p.responder, hold()),
    p.leaf.cert,
    p.ca,
    T0 + 3600_000,
  );
  assert.ok(held.ok);
  assert.deepEqual([held.verdict.status, held.verdict.revocationReason], [
    "revoked",
    "certificateHold",
  ]);
  const stale = await checkOcspResponse(
    respond(p.leaf.cert, p.ca, p.responder, good()),
    p.leaf.cert,
    p.ca,
    T0 + 2 * DAY,
  );
  assert.ok(!stale.ok && /stale \(nextUpdate/.test(stale.reason));
  const early = await checkOcspResponse(
    respond(p.leaf.cert, p.ca, p.responder, good()),
    p.leaf.cert,
    p.ca,
    T0 - 1000,
  );
  assert.ok(!early.ok && /thisUpdate .* is in the future/.test(early.reason));
});

Deno.test("ocsp: an unauthorised responder, a forged signature, or another certificate's answer fail", async () => {
  const p = await pki();
  const at = T0 + 3600_000;
  const noEku = await checkOcspResponse(
    respond(p.leaf.cert, p.ca, p.plain, good()),
    p.leaf.cert,
    p.ca,
    at,
  );
  assert.ok(!noEku.ok && /not certified for OCSP signing/.test(noEku.reason));
  const forged = await checkOcspResponse(
    respond(p.leaf.cert, p.ca, p.responder, good(), { forge: true }),
    p.leaf.cert,
    p.ca,
    at,
  );
  assert.ok(!forged.ok && /signature does not verify/.test(forged.reason), JSON.stringify(forged));
  const other = await checkOcspResponse(
    respond(p.plain.cert, p.ca, p.responder, good()),
    p.leaf.cert,
    p.ca,
    at,
  );
  assert.ok(!other.ok && /does not answer for this certificate/.test(other.reason));
  const junk = await checkOcspResponse(
    new Uint8Array([0x30, 0x03, 0x0a, 0x01, 0x01]),
    p.leaf.cert,
    p.ca,
    at,
  );
  assert.ok(
    !junk.ok && /responder status malformedRequest/.test(junk.reason),
    JSON.stringify(junk),
  );
});
