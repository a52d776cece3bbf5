/**
 * Test forge for AMD SEV-SNP attestation: a throwaway chain shaped like
 * AMD's (ARK and ASK with RSA-PSS/SHA-384 signatures, a P-384 VCEK carrying
 * the hwID and TCB SPL extensions) and SNP reports (1184 bytes) signed by that
 * VCEK for any REPORT_DATA: ABI v2 by default (no CPUID), or a product's shape —
 * Genoa v3, Turin v5 (8-byte hwID, FMC SPL, Turin TCB_VERSION layout). Reports verify only when the
 * forge's ARK is pinned. Test-only: nothing here is evidence of hardware.
 */
import "reflect-metadata";
import {
  BasicConstraintsExtension,
  Extension,
  KeyUsageFlags,
  KeyUsagesExtension,
  X509CertificateGenerator,
} from "@peculiar/x509";
import { Buffer } from "node:buffer";
import { createPrivateKey, type KeyObject, sign } from "node:crypto";
import { concatBytes } from "../../src/aci/bytes.ts";
import { encodeSmallUint } from "../../src/verify/x509/der.ts";
import { derToPem } from "../../src/verify/x509/pem.ts";
import {
  SNP_REPORT_LEN,
  SNP_SIGNED_LEN,
  type SnpProduct,
  type SnpTcb,
} from "../../src/verify/sev_snp/report.ts";

const AMD_OID = "1.3.6.1.4.1.3704.1";
const DAY = 86_400_000;
const RSA_PSS = { name: "RSA-PSS", hash: "SHA-384", saltLength: 48 } as const;

export interface SnpForgeOptions {
  /** The chain's validity is centred on this instant (epoch ms). Default: now. */
  at?: number;
  /** The VCEK's TCB (and the default REPORTED_TCB of minted reports). */
  tcb?: SnpTcb;
  /** 64-byte CHIP_ID the VCEK's hwID names. Default 0x5a repeated. */
  chipId?: Uint8Array;
  /** VCEK validity in days after `at`. Default 365. */
  vcekDays?: number;
  /**
   * Shape the report as this product's (version, CPUID, TCB layout, hwID length).
   * Default: a version-2 report naming no product (Milan/Genoa layout).
   */
  product?: SnpProduct;
}

export interface SnpMintOptions {
  /** POLICY (u64). Default 0x30000 (SMT allowed, reserved bit 17; debug off). */
  policy?: bigint;
  measurement?: Uint8Array;
  hostData?: Uint8Array;
  reportedTcb?: SnpTcb;
  vmpl?: number;
}

export interface SnpForge {
  /** AMD's `ask_ark_<product>.pem` shape: ASK then ARK. */
  askArkPem: string;
  askDer: Uint8Array;
  arkDer: Uint8Array;
  vcekDer: Uint8Array;
  chipId: Uint8Array;
  tcb: SnpTcb;
  /** A signed SNP report over `reportData` (64 bytes). */
  mintReport(reportData: Uint8Array, opts?: SnpMintOptions): Uint8Array;
}

function tcbBytes(t: SnpTcb, turin: boolean): Uint8Array {
  if (turin) return Uint8Array.from([t.fmc ?? 0, t.bootloader, t.tee, t.snp, 0, 0, 0, t.microcode]);
  return Uint8Array.from([t.bootloader, t.tee, 0, 0, 0, 0, t.snp, t.microcode]);
}

/** Version and CPUID (family, model, stepping) a product's reports carry. */
const SHAPES: Record<SnpProduct, { version: number; cpuid: number[] }> = {
  Milan: { version: 3, cpuid: [0x19, 0x01, 0x01] },
  Genoa: { version: 3, cpuid: [0x19, 0x11, 0x01] },
  Turin: { version: 5, cpuid: [0x1a, 0x02, 0x01] },
};

async function rsaKeys(): Promise<CryptoKeyPair> {
  return await crypto.subtle.generateKey(
    { ...RSA_PSS, modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]) },
    true,
    ["sign", "verify"],
  ) as CryptoKeyPair;
}

/** Builds a forged ARK → ASK → VCEK chain and a report minter. */
export async function forgeSnpEnvironment(o: SnpForgeOptions = {}): Promise<SnpForge> {
  const at = o.at ?? Date.now();
  const turin = o.product === "Turin";
  const tcb = o.tcb ??
    (turin
      ? { fmc: 1, bootloader: 1, tee: 1, snp: 4, microcode: 82 }
      : { bootloader: 3, tee: 0, snp: 8, microcode: 115 });
  // Turin's hwID is 8 bytes; its report's CHIP_ID is those 8 followed by zeros.
  const chipId = o.chipId ??
    (turin
      ? Uint8Array.from([...new Uint8Array(8).fill(0x6b), ...new Uint8Array(56)])
      : new Uint8Array(64).fill(0x5a));
  const hwId = turin ? chipId.subarray(0, 8) : chipId;
  const [arkK, askK] = await Promise.all([rsaKeys(), rsaKeys()]);
  const vcekK = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-384" }, true, [
    "sign",
    "verify",
  ]) as CryptoKeyPair;
  const caTimes = { notBefore: new Date(at - 365 * DAY), notAfter: new Date(at + 3650 * DAY) };
  const caExts = [
    new BasicConstraintsExtension(true, undefined, true),
    new KeyUsagesExtension(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign, true),
  ];
  const ark = await X509CertificateGenerator.createSelfSigned({
    ...caTimes,
    serialNumber: "01",
    name: "CN=ARK-Forged, OU=Engineering, O=Forged Test Authority, C=US",
    keys: arkK,
    signingAlgorithm: RSA_PSS,
    extensions: caExts,
  });
  const ask = await X509CertificateGenerator.create({
    ...caTimes,
    serialNumber: "02",
    subject: "CN=SEV-Forged, OU=Engineering, O=Forged Test Authority, C=US",
    issuer: ark.subject,
    publicKey: askK.publicKey,
    signingKey: arkK.privateKey,
    signingAlgorithm: RSA_PSS,
    extensions: caExts,
  });
  const spl = (sub: string, v: number) =>
    new Extension(`${AMD_OID}.${sub}`, false, concatBytes([encodeSmallUint(v)]));
  const vcek = await X509CertificateGenerator.create({
    notBefore: new Date(at - DAY),
    notAfter: new Date(at + (o.vcekDays ?? 365) * DAY),
    serialNumber: "03",
    subject: "CN=SEV-VCEK, OU=Engineering, O=Forged Test Authority, C=US",
    issuer: ask.subject,
    publicKey: vcekK.publicKey,
    signingKey: askK.privateKey,
    signingAlgorithm: RSA_PSS,
    extensions: [
      spl("3.1", tcb.bootloader),
      spl("3.2", tcb.tee),
      spl("3.3", tcb.snp),
      spl("3.8", tcb.microcode),
      ...(turin ? [spl("3.9", tcb.fmc ?? 0)] : []),
      new Extension(`${AMD_OID}.4`, false, concatBytes([hwId])),
    ],
  });
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", vcekK.privateKey));
  const signer: KeyObject = createPrivateKey({
    key: Buffer.from(pkcs8),
    format: "der",
    type: "pkcs8",
  });
  const askDer = new Uint8Array(ask.rawData);
  const arkDer = new Uint8Array(ark.rawData);

  const mintReport = (reportData: Uint8Array, m: SnpMintOptions = {}): Uint8Array => {
    if (reportData.length !== 64) throw new Error("REPORT_DATA is 64 bytes");
    const b = new Uint8Array(SNP_REPORT_LEN);
    const dv = new DataView(b.buffer);
    const shape = o.product ? SHAPES[o.product] : null;
    dv.setUint32(0x00, shape?.version ?? 2, true); // version
    dv.setUint32(0x04, 1, true); // guest SVN
    dv.setBigUint64(0x08, m.policy ?? 0x30000n, true);
    dv.setUint32(0x30, m.vmpl ?? 0, true);
    dv.setUint32(0x34, 1, true); // ECDSA P-384 with SHA-384
    const reported = m.reportedTcb ?? tcb;
    b.set(tcbBytes(reported, turin), 0x38); // CURRENT_TCB
    b.set(reportData, 0x50);
    b.set(m.measurement ?? new Uint8Array(48).fill(0x11), 0x90);
    b.set(m.hostData ?? new Uint8Array(32), 0xc0);
    b.set(new Uint8Array(32).fill(0x77), 0x140); // REPORT_ID
    b.set(tcbBytes(reported, turin), 0x180);
    if (shape) b.set(shape.cpuid, 0x188);
    b.set(chipId, 0x1a0);
    const sig = new Uint8Array(
      sign("sha384", b.subarray(0, SNP_SIGNED_LEN), { key: signer, dsaEncoding: "ieee-p1363" }),
    );
    // AMD stores R and S little-endian in 72-byte fields.
    b.set(sig.slice(0, 48).reverse(), 0x2a0);
    b.set(sig.slice(48, 96).reverse(), 0x2a0 + 72);
    return b;
  };

  return {
    askArkPem: derToPem(askDer) + derToPem(arkDer),
    askDer,
    arkDer,
    vcekDer: new Uint8Array(vcek.rawData),
    chipId,
    tcb,
    mintReport,
  };
}
