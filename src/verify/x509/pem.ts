/**
 * PEM certificate bundles as DCAP and AMD ship them: concatenated
 * `CERTIFICATE` blocks, sometimes URL-encoded (PCS headers) or followed by a
 * NUL terminator (the quote's certification data).
 */

const PEM_RE = /-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+?)-----END CERTIFICATE-----/g;

/** The DER of each certificate block, in order. Text outside the blocks is ignored. */
export function pemCertificatesToDer(text: string): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (const m of text.matchAll(PEM_RE)) {
    const b64 = m[1].replace(/\s+/g, "");
    const bin = atob(b64);
    const der = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) der[i] = bin.charCodeAt(i);
    out.push(der);
  }
  return out;
}

/** One certificate as a PEM block (64-column base64, trailing newline). */
export function derToPem(der: Uint8Array, label = "CERTIFICATE"): string {
  let bin = "";
  for (const b of der) bin += String.fromCharCode(b);
  const b64 = btoa(bin);
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 64) lines.push(b64.slice(i, i + 64));
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}
