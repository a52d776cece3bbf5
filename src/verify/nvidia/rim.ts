/**
 * NVIDIA Reference Integrity Manifests (ISO SWID tags with an enveloped
 * XML-DSig): the signature is verified with xmldsigjs on WebCrypto (the
 * Reference digest over the document without its signature, then
 * SignedInfo with the leaf key), the embedded chain is verified to the
 * pinned CoRIM root (the last embedded certificate is replaced by it), and
 * the active reference measurements and colloquial version are read out.
 * XML 1.1 canonicalisation is mapped to C14N 1.0, which gives the same
 * bytes for documents without `xml:*` attributes (RIMs have none; a RIM
 * carrying one is refused rather than canonicalised differently).
 */
import "reflect-metadata";
import { DOMImplementation, DOMParser, XMLSerializer } from "@xmldom/xmldom";
import { X509Certificate } from "@peculiar/x509";
import * as xmlcore from "xml-core";
import * as xmldsig from "xmldsigjs";
import { verifyCertChain } from "../x509/cert_chain.ts";
import { type Checked, errorText, fail } from "../x509/verify_result.ts";

const DSIG_NS = "http://www.w3.org/2000/09/xmldsig#";
const SWID_NS = "http://standards.iso.org/iso/19770/-2/2015/schema.xsd";
const SHA384_HASH_NS = "http://www.w3.org/2001/04/xmlenc#sha384";
const C14N11 = "http://www.w3.org/2006/12/xml-c14n11";
const ECDSA_SHA384 = "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384";
const SHA384_DIGEST = "http://www.w3.org/2001/04/xmldsig-more#sha384";
const ENVELOPED = "http://www.w3.org/2000/09/xmldsig#enveloped-signature";

let configured = false;
function configure(): void {
  if (configured) return;
  // xml-core needs a DOM outside browsers; xmldsigjs needs WebCrypto.
  xmlcore.setNodeDependencies({ DOMParser, XMLSerializer, DOMImplementation });
  xmldsig.Application.setEngine("WebCrypto", globalThis.crypto);
  xmldsig.CryptoConfig.RegisterTransform(C14N11, xmldsig.XmlDsigC14NTransform);
  configured = true;
}

/** One golden measurement: RIM index (0-based) and its allowed values. */
export interface ReferenceMeasurement {
  index: number;
  size: number;
  alternatives: Uint8Array[];
}

export interface VerifiedRim {
  /** `colloquialVersion` (driver `550.90.07`, VBIOS `96.00.9F.00.01`). */
  version: string;
  /** Active measurements only. */
  measurements: ReferenceMeasurement[];
  /** Leaf first, ending with the pinned root. */
  chain: X509Certificate[];
  /** Leaf certificate's notAfter, epoch ms. */
  leafNotAfterMs: number;
}

type El = {
  getAttribute(n: string): string | null;
  getAttributeNS(ns: string, n: string): string | null;
  getElementsByTagNameNS(ns: string, n: string): ArrayLike<El>;
  textContent: string | null;
  childNodes: ArrayLike<El & { nodeType: number; namespaceURI: string | null; localName: string }>;
};

function all(root: El, ns: string, name: string): El[] {
  return Array.from(root.getElementsByTagNameNS(ns, name));
}

/**
 * Element children of `parent` with this name. The signed content is read
 * only along this path (SoftwareIdentity → Meta / Payload → Resource): an
 * element smuggled into ds:Signature is outside the digest (the enveloped
 * transform removes it) and must never be read as a measurement.
 */
function kids(parent: El, ns: string, name: string): El[] {
  return Array.from(parent.childNodes).filter((n) =>
    n.nodeType === 1 && n.namespaceURI === ns && n.localName === name
  );
}

function base64Der(text: string): Uint8Array {
  const bin = atob(text.replace(/\s+/g, ""));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function hexBytes(hex: string): Uint8Array | null {
  if (!/^([0-9a-fA-F]{2})*$/.test(hex)) return null;
  return Uint8Array.from(hex.match(/../g) ?? [], (h) => parseInt(h, 16));
}

/**
 * Verifies a RIM's signature and chain at `nowMs` and reads its active
 * measurements. `label` names the RIM in reasons ("driver RIM"). Never throws.
 */
// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
export async function verifyRim(
  xml: string,
  rimRootDer: Uint8Array,
  nowMs: number,
  label: string,
): Promise<Checked<VerifiedRim>> {
  try {
    configure();
    if (/<!DOCTYPE|<!ENTITY/i.test(xml)) {
      return fail(`${label}: document type declarations are refused`);
    }
    const errors: string[] = [];
    let doc: ReturnType<DOMParser["parseFromString"]>;
    try {
      doc = new DOMParser({
        onError: (level, msg) => void (level !== "warning" && errors.push(msg)),
      }).parseFromString(xml, "text/xml");
    } catch (e) {
      return fail(`${label}: XML does not parse: ${errorText(e).slice(0, 120)}`);
    }
    if (errors.length || !doc.documentElement) {
      return fail(`${label}: XML does not parse: ${(errors[0] ?? "no root").slice(0, 120)}`);
    }
    const root = doc.documentElement as unknown as El & { localName: string; namespaceURI: string };
    if (root.localName !== "SoftwareIdentity" || root.namespaceURI !== SWID_NS) {
      return fail(`${label}: the document is not a SWID SoftwareIdentity`);
    }
    if (/\bxml:[a-zA-Z]/.test(xml)) return fail(`${label}: xml:* attributes are not supported`);

    const sigs = all(root, DSIG_NS, "Signature");
    if (sigs.length !== 1) return fail(`${label}: expected one ds:Signature, found ${sigs.length}`);
    const sig = sigs[0];
    const alg = (name: string) => all(sig, DSIG_NS, name).map((e) => e.getAttribute("Algorithm"));
    const refs = all(sig, DSIG_NS, "Reference");
    if (
      refs.length !== 1 || refs[0].getAttribute("URI") !== "" ||
      alg("SignatureMethod").join() !== ECDSA_SHA384 ||
      alg("DigestMethod").join() !== SHA384_DIGEST ||
      alg("CanonicalizationMethod").join() !== C14N11 ||
      alg("Transform").join() !== [ENVELOPED, C14N11].join()
    ) {
      return fail(
        `${label}: signature is not the expected enveloped ecdsa-sha384 / sha384 / c14n11 form`,
      );
    }

    const ders = all(sig, DSIG_NS, "X509Certificate").map((e) => base64Der(e.textContent ?? ""));
    if (ders.length < 2) return fail(`${label}: signature carries no certificate chain`);
    const chain = await verifyCertChain({
      label: `${label} chain`,
      chain: ders.slice(0, -1),
      rootDer: rimRootDer,
      rootName: "NVIDIA CoRIM signing Root CA",
      nowMs,
    });
    if (!chain.ok) return chain;
    const leaf = chain.certs[0];

    const key = await crypto.subtle.importKey(
      "spki",
      leaf.publicKey.rawData,
      { name: "ECDSA", namedCurve: "P-384" },
      true,
      ["verify"],
    );
    const signed = new xmldsig.SignedXml(
      doc as unknown as ConstructorParameters<typeof xmldsig.SignedXml>[0],
    );
    signed.LoadXml(sig as unknown as Parameters<typeof signed.LoadXml>[0]);
    // LoadXml sets {ECDSA, SHA-384}; re-importing the given key also needs the curve.
    signed.Algorithm = {
      name: "ECDSA",
      namedCurve: "P-384",
      hash: { name: "SHA-384" },
    } as Algorithm;
    let valid: boolean;
    try {
      valid = await signed.Verify(key);
    } catch (e) {
      // xml-core's XmlError is not an Error subclass but carries a message.
      const text = typeof e === "object" && e !== null && "message" in e
        ? String(e.message)
        : errorText(e);
      return fail(
        /digest/i.test(text)
          ? `${label}: Reference digest does not match (the document was changed after signing)`
          : `${label}: signature check failed: ${text.slice(0, 200)}`,
      );
    }
    if (!valid) return fail(`${label}: SignatureValue does not verify with the RIM leaf key`);

    const metas = kids(root, SWID_NS, "Meta");
    const payloads = kids(root, SWID_NS, "Payload");
    if (metas.length !== 1 || payloads.length !== 1) {
      return fail(`${label}: expected one Meta and one Payload under SoftwareIdentity`);
    }
    const meta = metas[0];
    const version = meta?.getAttribute("colloquialVersion");
    if (!version) return fail(`${label}: no colloquialVersion`);
    const measurements: ReferenceMeasurement[] = [];
    for (const r of kids(payloads[0], SWID_NS, "Resource")) {
      if (r.getAttribute("type") !== "Measurement") continue;
      if (r.getAttribute("active")?.toLowerCase() !== "true") continue;
      const index = Number(r.getAttribute("index"));
      const size = Number(r.getAttribute("size"));
      const n = Number(r.getAttribute("alternatives"));
      if (!Number.isInteger(index) || !Number.isInteger(size) || !Number.isInteger(n) || n < 1) {
        return fail(`${label}: measurement has a bad index, size or alternatives count`);
      }
      const alternatives: Uint8Array[] = [];
      for (let i = 0; i < n; i++) {
        const h = hexBytes(r.getAttributeNS(SHA384_HASH_NS, `Hash${i}`) ?? "");
        if (!h) return fail(`${label}: measurement ${index} lacks Hash${i}`);
        alternatives.push(h);
      }
      measurements.push({ index, size, alternatives });
    }
    return {
      ok: true,
      version,
      measurements,
      chain: chain.certs,
      leafNotAfterMs: leaf.notAfter.getTime(),
    };
  } catch (e) {
    return fail(`${label}: ${errorText(e).slice(0, 200)}`);
  }
}
