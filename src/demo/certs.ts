/**
 * Certificate generation for loopback TLS, offline in pure TypeScript
 * (`@peculiar/x509` over WebCrypto): a throwaway CA and server certificates
 * it issues for loopback hosts. `main.ts` uses it to make the development
 * confidential upstream a real TLS server with its own key at start-up, and
 * tests use it through `tests/support/tls_servers.ts`. Nothing issued here
 * is fit for production trust: the CA key lives only in process memory.
 */
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { createHash } from "node:crypto";

x509.cryptoProvider.set(crypto);

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY_MS = 24 * 60 * 60 * 1000;

/** A certificate authority: its certificate (PEM) and the key that signs leaves. */
export interface CertAuthority {
  certPem: string;
  cert: x509.X509Certificate;
  privateKey: CryptoKey;
}

/** A server certificate and key, plus the pin a client would hold for it. */
export interface ServerCert {
  certPem: string;
  /** PKCS#8 PEM ("PRIVATE KEY"). */
  keyPem: string;
  /** Lowercase hex SHA-256 of the certificate's SubjectPublicKeyInfo DER. */
  spkiSha256: string;
}

function randomSerial(): string {
  const b = crypto.getRandomValues(new Uint8Array(12));
  b[0] = (b[0]! & 0x7f) | 0x01; // positive and without a leading zero byte, as DER wants
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function toPem(der: ArrayBuffer, label: string): string {
  const b64 = btoa(String.fromCharCode(...new Uint8Array(der)));
  const lines = b64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}

/** One day back (clock skew) to `validDays` ahead of `now` (epoch ms). */
function validity(now: number, validDays: number): { notBefore: Date; notAfter: Date } {
  if (!Number.isFinite(now)) throw new RangeError("now must be epoch milliseconds");
  if (!Number.isInteger(validDays) || validDays <= 0) {
    throw new RangeError("validDays must be a positive integer");
  }
  return { notBefore: new Date(now - DAY_MS), notAfter: new Date(now + validDays * DAY_MS) };
}

/** Options of {@link makeCa}. */
export interface CaOptions {
  /** Epoch ms the validity window is centred on (the caller's clock). */
  now: number;
  commonName?: string;
  /** Default 30. */
  validDays?: number;
}

/** A fresh self-signed CA (P-256). */
export async function makeCa(opts: CaOptions): Promise<CertAuthority> {
  const keys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `CN=${opts.commonName ?? "Gateway Test CA"}`,
    ...validity(opts.now, opts.validDays ?? 30),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString("pem") + "\n", cert, privateKey: keys.privateKey };
}

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

/** Options of {@link issueServerCert}. */
export interface ServerCertOptions {
  /** Epoch ms the validity window is centred on (the caller's clock). */
  now: number;
  /** DNS names or IPv4 literals; default `localhost` and `127.0.0.1`. */
  hosts?: string[];
  /** Default 30. */
  validDays?: number;
}

/** Issues a server certificate (fresh P-256 key) for `hosts`, signed by `ca`. */
export async function issueServerCert(
  ca: CertAuthority,
  opts: ServerCertOptions,
): Promise<ServerCert> {
  const hosts = opts.hosts ?? ["localhost", "127.0.0.1"];
  if (hosts.length === 0) throw new RangeError("hosts must not be empty");
  const keys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: `CN=${hosts[0]}`,
    issuer: ca.cert.subject,
    ...validity(opts.now, opts.validDays ?? 30),
    signingKey: ca.privateKey,
    publicKey: keys.publicKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(
        hosts.map((h): x509.JsonGeneralName => ({ type: IPV4.test(h) ? "ip" : "dns", value: h })),
      ),
      await x509.AuthorityKeyIdentifierExtension.create(ca.cert),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  const certPem = cert.toString("pem") + "\n";
  // Taken from the WebCrypto key, independently of src/upstream/spki.ts, so tests cross-check it.
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", keys.publicKey));
  return {
    certPem,
    keyPem: toPem(pkcs8, "PRIVATE KEY"),
    spkiSha256: createHash("sha256").update(spki).digest("hex"),
  };
}
