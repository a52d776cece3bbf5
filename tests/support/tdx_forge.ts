/**
 * Test forge for Intel TDX attestation: a throwaway trust root shaped like
 * Intel's (root CA, PCK Platform CA, PCK leaf with the SGX extension, TCB
 * signing cert, CRLs), signed collateral (TCB Info, QE Identity) and TDX v4
 * quotes for any REPORTDATA. Quotes it mints verify with `verifyTdxQuote`
 * only when the forge's root is pinned; under the real Intel root they fail.
 * Test-only: nothing here is evidence of hardware.
 */
import "reflect-metadata";
import {
  BasicConstraintsExtension,
  Extension,
  KeyUsageFlags,
  KeyUsagesExtension,
  type X509Certificate,
  X509CertificateGenerator,
  X509CrlGenerator,
} from "@peculiar/x509";
import { Buffer } from "node:buffer";
import { createHash, createPrivateKey, type KeyObject, sign } from "node:crypto";
import { concatBytes } from "../../src/aci/bytes.ts";
import {
  encodeOid,
  encodeSmallUint,
  encodeTlv,
  TAG_ENUMERATED,
  TAG_OCTET_STRING,
  TAG_SEQUENCE,
} from "../../src/verify/x509/der.ts";
import { derToPem } from "../../src/verify/x509/pem.ts";
import {
  collateralToDcapQvlJson,
  type DcapQvlCollateralJson,
  type TdxCollateral,
} from "../../src/verify/tdx/collateral.ts";
import { LocalCollateralSource } from "../../src/verify/tdx/collateral_source.ts";
import { SGX_EXTENSION_OID } from "../../src/verify/tdx/pck_extension.ts";
import { INTEL_QE_VENDOR_ID } from "../../src/verify/tdx/quote.ts";
import type { TcbStatus } from "../../src/verify/tdx/tcb_level.ts";

/** Intel's production TD_QE MRSIGNER (the forge's QE claims to be Intel's QE). */
const INTEL_TD_QE_MRSIGNER = "dc9e2a7c6f948f17474e34a7fc43ed030f7c1563f1babddf6340c82e0e54a8c5";
const DAY = 86_400_000;

export interface ForgeOptions {
  /** Instant (epoch ms) the collateral and CRLs are valid around. Default: the current time. */
  at?: number;
  /** How long collateral stays valid after `at` (it was issued 1 h before `at`). Default 30. */
  validityDays?: number;
  /** 6 bytes of hex. Default "00906ed50000". */
  fmspc?: string;
  /** PCK leaf SGX TCB components 1..16. */
  sgxTcbComponents?: number[];
  pceSvn?: number;
  /** TEE_TCB_SVN the TCB Info's UpToDate level is written for (and quotes default to). */
  teeTcbSvn?: Uint8Array;
  /** Status of the single platform TCB level. Default "UpToDate". */
  tcbStatus?: Exclude<TcbStatus, "NotSupported">;
  /** Revoke the PCK leaf in the PCK CRL. */
  revokePckLeaf?: boolean;
}

export interface MintOptions {
  mrTd?: Uint8Array;
  mrConfigId?: Uint8Array;
  mrOwner?: Uint8Array;
  mrOwnerConfig?: Uint8Array;
  rtmrs?: [Uint8Array, Uint8Array, Uint8Array, Uint8Array];
  /** 8 bytes, little-endian. Default: SEPT_VE_DISABLE = 1, DEBUG = 0. */
  tdAttributes?: Uint8Array;
  teeTcbSvn?: Uint8Array;
  mrSeam?: Uint8Array;
}

export interface TdxForge {
  rootCertDer: Uint8Array;
  rootPem: string;
  collateral: TdxCollateral;
  /** The same collateral in dcap-qvl's JSON shape. */
  collateralJson: DcapQvlCollateralJson;
  /** A local source holding `collateral` under the forge's FMSPC (platform CA). */
  source: LocalCollateralSource;
  fmspc: string;
  /** PEM chain in every minted quote: PCK leaf, PCK Platform CA, root. */
  pckChainPem: string;
  /** Mints a TDX v4 quote over `reportData` (64 bytes). */
  mintQuote(reportData: Uint8Array, opts?: MintOptions): Uint8Array;
}

const ECDSA = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIGN_ALG = { name: "ECDSA", hash: "SHA-256" } as const;

async function newKeys(): Promise<{ pair: CryptoKeyPair; node: KeyObject }> {
  const pair = await crypto.subtle.generateKey(ECDSA, true, ["sign", "verify"]);
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", pair.privateKey));
  return {
    pair,
    node: createPrivateKey({ key: Buffer.from(pkcs8), format: "der", type: "pkcs8" }),
  };
}

/** Raw r‖s ECDSA P-256/SHA-256, synchronous (node:crypto). */
function signRaw(key: KeyObject, data: Uint8Array): Uint8Array {
  return new Uint8Array(sign("sha256", data, { key, dsaEncoding: "ieee-p1363" }));
}

function seq(...items: Uint8Array[]): Uint8Array {
  return encodeTlv(TAG_SEQUENCE, concatBytes(items));
}

function hexBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** DER of Intel's SGX extension value. */
function sgxExtension(fmspc: string, comps: number[], pceSvn: number): Uint8Array {
  const p = SGX_EXTENSION_OID;
  const tcbItems = comps.map((svn, i) => seq(encodeOid(`${p}.2.${i + 1}`), encodeSmallUint(svn)));
  tcbItems.push(seq(encodeOid(`${p}.2.17`), encodeSmallUint(pceSvn)));
  tcbItems.push(seq(encodeOid(`${p}.2.18`), encodeTlv(TAG_OCTET_STRING, Uint8Array.from(comps))));
  return seq(
    seq(encodeOid(`${p}.1`), encodeTlv(TAG_OCTET_STRING, new Uint8Array(16).fill(0x42))),
    seq(encodeOid(`${p}.2`), seq(...tcbItems)),
    seq(encodeOid(`${p}.3`), encodeTlv(TAG_OCTET_STRING, new Uint8Array(2))),
    seq(encodeOid(`${p}.4`), encodeTlv(TAG_OCTET_STRING, hexBytes(fmspc))),
    seq(encodeOid(`${p}.5`), encodeSmallUint(0, TAG_ENUMERATED)),
  );
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
const svns = (xs: ArrayLike<number>) => Array.from(xs, (svn) => ({ svn }));

/** Builds a forged trust root, collateral and a quote minter. */
export async function forgeTdxEnvironment(opts: ForgeOptions = {}): Promise<TdxForge> {
  const at = opts.at ?? Date.now();
  const fmspc = (opts.fmspc ?? "00906ed50000").toLowerCase();
  const comps = opts.sgxTcbComponents ?? [3, 3, 2, 2, 4, 1, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0];
  const pceSvn = opts.pceSvn ?? 13;
  const defaultTee = opts.teeTcbSvn ??
    Uint8Array.from([5, 1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  const validUntil = at + (opts.validityDays ?? 30) * DAY;
  const issued = at - 3_600_000;

  const [rootK, caK, leafK, tcbK, akK] = await Promise.all([
    newKeys(),
    newKeys(),
    newKeys(),
    newKeys(),
    newKeys(),
  ]);
  const certTimes = { notBefore: new Date(at - 365 * DAY), notAfter: new Date(at + 3650 * DAY) };
  const rootName = "CN=Test Intel SGX Root CA, O=Forged Test Authority, C=US";
  const caName = "CN=Test Intel SGX PCK Platform CA, O=Forged Test Authority, C=US";
  const root = await X509CertificateGenerator.createSelfSigned({
    ...certTimes,
    serialNumber: "01",
    name: rootName,
    keys: rootK.pair,
    signingAlgorithm: SIGN_ALG,
    extensions: [
      new BasicConstraintsExtension(true, 1, true),
      new KeyUsagesExtension(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign, true),
    ],
  });
  const issue = (
    serial: string,
    subject: string,
    issuer: X509Certificate,
    issuerKey: CryptoKey,
    pub: CryptoKey,
    extensions: Extension[],
  ) =>
    X509CertificateGenerator.create({
      ...certTimes,
      serialNumber: serial,
      subject,
      issuer: issuer.subject,
      publicKey: pub,
      signingKey: issuerKey,
      signingAlgorithm: SIGN_ALG,
      extensions,
    });
  const ca = await issue("02", caName, root, rootK.pair.privateKey, caK.pair.publicKey, [
    new BasicConstraintsExtension(true, 0, true),
    new KeyUsagesExtension(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign, true),
  ]);
  const leaf = await issue(
    "03",
    "CN=Test Intel SGX PCK Certificate, O=Forged Test Authority, C=US",
    ca,
    caK.pair.privateKey,
    leafK.pair.publicKey,
    [
      new BasicConstraintsExtension(false, undefined, true),
      new Extension(SGX_EXTENSION_OID, false, concatBytes([sgxExtension(fmspc, comps, pceSvn)])),
    ],
  );
  const tcbSigner = await issue(
    "04",
    "CN=Test Intel SGX TCB Signing, O=Forged Test Authority, C=US",
    root,
    rootK.pair.privateKey,
    tcbK.pair.publicKey,
    [new BasicConstraintsExtension(false, undefined, true)],
  );

  const crlTimes = { thisUpdate: new Date(issued), nextUpdate: new Date(validUntil) };
  const rootCrl = await X509CrlGenerator.create({
    ...crlTimes,
    issuer: root.subject,
    signingKey: rootK.pair.privateKey,
    signingAlgorithm: SIGN_ALG,
    entries: [{ serialNumber: "7f", revocationDate: new Date(issued) }],
  });
  const pckCrl = await X509CrlGenerator.create({
    ...crlTimes,
    issuer: ca.subject,
    signingKey: caK.pair.privateKey,
    signingAlgorithm: SIGN_ALG,
    entries: [{ serialNumber: opts.revokePckLeaf ? "03" : "7e", revocationDate: new Date(issued) }],
  });

  const zeros48 = "00".repeat(48);
  const tcbInfo = JSON.stringify({
    id: "TDX",
    version: 3,
    issueDate: iso(issued),
    nextUpdate: iso(validUntil),
    fmspc: fmspc.toUpperCase(),
    pceId: "0000",
    tcbType: 0,
    tcbEvaluationDataNumber: 17,
    tdxModule: {
      mrsigner: zeros48,
      attributes: "0000000000000000",
      attributesMask: "FFFFFFFFFFFFFFFF",
    },
    tdxModuleIdentities: [{
      id: `TDX_${defaultTee[1].toString(16).toUpperCase().padStart(2, "0")}`,
      mrsigner: zeros48,
      attributes: "0000000000000000",
      attributesMask: "FFFFFFFFFFFFFFFF",
      tcbLevels: [{ tcb: { isvsvn: defaultTee[0] }, tcbDate: iso(issued), tcbStatus: "UpToDate" }],
    }],
    tcbLevels: [{
      tcb: { sgxtcbcomponents: svns(comps), pcesvn: pceSvn, tdxtcbcomponents: svns(defaultTee) },
      tcbDate: iso(issued),
      tcbStatus: opts.tcbStatus ?? "UpToDate",
      ...(opts.tcbStatus && opts.tcbStatus !== "UpToDate"
        ? { advisoryIDs: ["INTEL-SA-00000"] }
        : {}),
    }],
  });
  const qeIdentity = JSON.stringify({
    id: "TD_QE",
    version: 2,
    issueDate: iso(issued),
    nextUpdate: iso(validUntil),
    tcbEvaluationDataNumber: 17,
    miscselect: "00000000",
    miscselectMask: "FFFFFFFF",
    attributes: "11000000000000000000000000000000",
    attributesMask: "FBFFFFFFFFFFFFFF0000000000000000",
    mrsigner: INTEL_TD_QE_MRSIGNER.toUpperCase(),
    isvprodid: 2,
    tcbLevels: [{ tcb: { isvsvn: 4 }, tcbDate: iso(issued), tcbStatus: "UpToDate" }],
  });
  const enc = new TextEncoder();
  const rootPem = derToPem(new Uint8Array(root.rawData));
  const caPem = derToPem(new Uint8Array(ca.rawData));
  const tcbChainPem = derToPem(new Uint8Array(tcbSigner.rawData)) + rootPem;
  const collateral: TdxCollateral = {
    pckCrlIssuerChain: caPem + rootPem,
    rootCaCrl: new Uint8Array(rootCrl.rawData),
    pckCrl: new Uint8Array(pckCrl.rawData),
    tcbInfoIssuerChain: tcbChainPem,
    tcbInfo,
    tcbInfoSignature: signRaw(tcbK.node, enc.encode(tcbInfo)),
    qeIdentityIssuerChain: tcbChainPem,
    qeIdentity,
    qeIdentitySignature: signRaw(tcbK.node, enc.encode(qeIdentity)),
  };

  // The attestation key and the QE report that certifies it never change per forge.
  const akJwk = await crypto.subtle.exportKey("jwk", akK.pair.publicKey);
  const b64u = (s: string | undefined) =>
    Uint8Array.from(atob((s ?? "").replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
  const attestationKey = concatBytes([b64u(akJwk.x), b64u(akJwk.y)]);
  const qeAuthData = new Uint8Array(32).map((_, i) => i);
  const qeReport = new Uint8Array(384);
  const qdv = new DataView(qeReport.buffer);
  qeReport[48] = 0x11; // ATTRIBUTES: INIT | MODE64BIT, no DEBUG
  qeReport.set(hexBytes(INTEL_TD_QE_MRSIGNER), 128);
  qdv.setUint16(256, 2, true); // ISVPRODID
  qdv.setUint16(258, 4, true); // ISVSVN
  qeReport.set(createHash("sha256").update(attestationKey).update(qeAuthData).digest(), 320);
  const qeReportSig = signRaw(leafK.node, qeReport);
  const pckChainPem = derToPem(new Uint8Array(leaf.rawData)) + caPem + rootPem;
  const chainBytes = concatBytes([enc.encode(pckChainPem), Uint8Array.of(0)]);

  const mintQuote = (reportData: Uint8Array, m: MintOptions = {}): Uint8Array => {
    if (reportData.length !== 64) {
      throw new Error(`reportData must be 64 bytes, got ${reportData.length}`);
    }
    const head = new Uint8Array(632);
    const dv = new DataView(head.buffer);
    dv.setUint16(0, 4, true);
    dv.setUint16(2, 2, true);
    dv.setUint32(4, 0x81, true);
    head.set(hexBytes(INTEL_QE_VENDOR_ID), 12);
    const put = (off: number, v: Uint8Array | undefined, len: number, what: string) => {
      if (v === undefined) return;
      if (v.length !== len) throw new Error(`${what} must be ${len} bytes`);
      head.set(v, 48 + off);
    };
    put(0, m.teeTcbSvn ?? defaultTee, 16, "teeTcbSvn");
    put(16, m.mrSeam ?? new Uint8Array(48).fill(0x5e), 48, "mrSeam");
    put(120, m.tdAttributes ?? Uint8Array.of(0, 0, 0, 0x10, 0, 0, 0, 0), 8, "tdAttributes");
    put(128, Uint8Array.of(0xe7, 0x02, 0x06, 0, 0, 0, 0, 0), 8, "xfam");
    put(136, m.mrTd ?? new Uint8Array(48).fill(0x7d), 48, "mrTd");
    put(184, m.mrConfigId, 48, "mrConfigId");
    put(232, m.mrOwner, 48, "mrOwner");
    put(280, m.mrOwnerConfig, 48, "mrOwnerConfig");
    (m.rtmrs ?? []).forEach((r, i) => put(328 + 48 * i, r, 48, `rtmr${i}`));
    put(520, reportData, 64, "reportData");

    const certData = concatBytes([
      qeReport,
      qeReportSig,
      u16(qeAuthData.length),
      qeAuthData,
      u16(5),
      u32(chainBytes.length),
      chainBytes,
    ]);
    const sigData = concatBytes([
      signRaw(akK.node, head),
      attestationKey,
      u16(6),
      u32(certData.length),
      certData,
    ]);
    return concatBytes([head, u32(sigData.length), sigData]);
  };

  return {
    rootCertDer: new Uint8Array(root.rawData),
    rootPem,
    collateral,
    collateralJson: collateralToDcapQvlJson(collateral),
    source: new LocalCollateralSource().set(fmspc, "platform", collateral),
    fmspc,
    pckChainPem,
    mintQuote,
  };
}

function u16(n: number): Uint8Array {
  const b = new Uint8Array(2);
  new DataView(b.buffer).setUint16(0, n, true);
  return b;
}

function u32(n: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n, true);
  return b;
}
