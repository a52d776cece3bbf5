/// <reference lib="dom" />
/**
 * The /verify page's script: the same checks as `deno task verify`, run in
 * the browser with the project's own verify library (bundled by
 * build_page.ts). It fetches the attestation report with a fresh nonce,
 * verifies it (keyset digest, report data, quote slot; hardware quotes need
 * collateral and are for `task verify`), then the receipt against it (keyset
 * digest, Ed25519 signature over the JCS form, body hashes, upstream
 * verification), re-checks hashes and the signature with WebCrypto, and
 * follows the receipt's upstream session. Nothing leaves the browser but the
 * report, receipt and session requests to this gateway.
 */
import { verifyReport } from "../report.ts";
import { findEvent, verifyReceipt } from "../receipt.ts";
import { extractKeyset } from "../report.ts";
import type { Check } from "../checks.ts";
import { bytesToHex, hexToBytes } from "../../aci/hex.ts";
import { jcsBytes } from "../../aci/jcs.ts";
import { sha256Hex } from "../../aci/digest.ts";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

async function bytesOf(fileId: string, textId: string): Promise<Uint8Array | undefined> {
  const f = $<HTMLInputElement>(fileId).files?.[0];
  if (f) return new Uint8Array(await f.arrayBuffer());
  const t = $<HTMLTextAreaElement>(textId).value;
  return t === "" ? undefined : new TextEncoder().encode(t);
}

async function getJson(path: string, key?: string): Promise<unknown> {
  const res = await fetch(path, {
    headers: key ? { authorization: `Bearer ${key}` } : {},
    cache: "no-store",
  });
  const text = await res.text();
  if (!res.ok) {
    throw new Error(`${path.split("?")[0]} answered HTTP ${res.status}: ${text.slice(0, 200)}`);
  }
  return JSON.parse(text);
}

const toBuf = (b: Uint8Array) => b.slice().buffer;

/** WebCrypto's own SHA-256 of the bytes, compared with the receipt (the platform's implementation). */
async function webcryptoHash(
  receipt: Record<string, unknown>,
  type: string,
  bytes: Uint8Array | undefined,
): Promise<Check | null> {
  if (!bytes) return null;
  const ev = findEvent(receipt, type);
  const h = "sha256:" +
    bytesToHex(new Uint8Array(await crypto.subtle.digest("SHA-256", toBuf(bytes))));
  const name = `webcrypto.${type === "request.received" ? "request" : "response"}_body_hash`;
  const ok = ev?.["body_hash"] === h;
  return { name, ok, detail: ok ? `WebCrypto SHA-256 agrees: ${h}` : `WebCrypto SHA-256 is ${h}` };
}

/** WebCrypto's Ed25519 over the JCS form of the receipt minus its signature. */
const SESSION_ID = /^[0-9a-f]{64}$/;

async function webcryptoSignature(
  receipt: Record<string, unknown>,
  report: unknown,
): Promise<Check> {
  const name = "webcrypto.ed25519_signature";
  const keyset = extractKeyset(report);
  const entry = keyset?.receipt_signing_keys.find((k) => k.key_id === receipt["key_id"]);
  if (!entry || typeof receipt["signature"] !== "string") {
    return { name, ok: false, detail: "no key in the attested keyset for this receipt's key_id" };
  }
  try {
    const key = await crypto.subtle.importKey(
      "raw",
      toBuf(hexToBytes(entry.public_key)),
      { name: "Ed25519" },
      false,
      ["verify"],
    );
    const { signature: _s, ...unsigned } = receipt;
    const ok = await crypto.subtle.verify(
      { name: "Ed25519" },
      key,
      toBuf(hexToBytes(receipt["signature"] as string)),
      toBuf(jcsBytes(unsigned)),
    );
    return { name, ok, detail: ok ? "WebCrypto Ed25519 agrees" : "WebCrypto Ed25519: INVALID" };
  } catch (e) {
    return {
      name,
      ok: false,
      detail: `WebCrypto Ed25519 unavailable here: ${(e as Error).message}`,
    };
  }
}

type Node = "report" | "keyset" | "receipt" | "session";

function render(checks: Check[], chain: Record<Node, { ok: boolean | null; label: string }>) {
  const list = $("checks");
  list.replaceChildren(...checks.map((c) => {
    const li = document.createElement("li");
    li.className = c.ok ? "pass" : "fail";
    li.dataset.check = c.name;
    li.textContent = `${c.ok ? "PASS" : "FAIL"}  ${c.name}: ${c.detail}`;
    return li;
  }));
  for (const n of ["report", "keyset", "receipt", "session"] as Node[]) {
    const el = $(`node-${n}`);
    el.className = "node " + (chain[n].ok === null ? "unknown" : chain[n].ok ? "pass" : "fail");
    el.querySelector(".sub")!.textContent = chain[n].label;
  }
  const all = checks.length > 0 && checks.every((c) => c.ok);
  const verdict = $("verdict");
  verdict.className = all ? "pass" : "fail";
  verdict.textContent = all
    ? `All ${checks.length} checks passed.`
    : `${checks.filter((c) => !c.ok).length} of ${checks.length} checks failed.`;
  document.body.dataset.state = "done";
}

// Long as the /verify page's checks in the order the user sees them, each a few lines.
async function run(): Promise<void> {
  document.body.dataset.state = "running";
  const checks: Check[] = [];
  const key = $<HTMLInputElement>("api-key").value.trim() || undefined;
  const allowDev = $<HTMLInputElement>("allow-dev").checked;
  const requireVerified = $<HTMLInputElement>("require-verified").checked;
  const chain: Record<Node, { ok: boolean | null; label: string }> = {
    report: { ok: null, label: "not checked" },
    keyset: { ok: null, label: "not checked" },
    receipt: { ok: null, label: "not checked" },
    session: { ok: null, label: "not checked" },
  };
  try {
    // 1. The report, bound to a nonce only this page knows.
    const nonce = bytesToHex(crypto.getRandomValues(new Uint8Array(32)));
    const report = await getJson(`/v1/aci/attestation?nonce=${nonce}`);
    const rc = await verifyReport(report, { nonce, now: Date.now, allowDevEvidence: allowDev });
    checks.push(
      { name: "report.nonce", ok: true, detail: `fetched with fresh nonce ${nonce}` },
      ...rc,
    );
    chain.report = { ok: rc.every((c) => c.ok), label: `nonce ${nonce.slice(0, 12)}…` };
    const digest = (report as Record<string, unknown>)["workload_keyset_digest"];
    const kd = rc.find((c) => c.name === "report.workload_keyset_digest");
    chain.keyset = { ok: kd?.ok ?? false, label: String(digest).slice(0, 19) + "…" };

    // 2. The receipt: pasted, dropped, or fetched by id with the key that made it.
    let receiptText = $<HTMLTextAreaElement>("receipt").value.trim();
    const file = $<HTMLInputElement>("receipt-file").files?.[0];
    if (file) receiptText = await file.text();
    const id = $<HTMLInputElement>("receipt-id").value.trim();
    let receipt: unknown;
    if (receiptText !== "") receipt = JSON.parse(receiptText);
    else if (id !== "") {
      receipt = await getJson(`/v1/aci/receipts/${encodeURIComponent(id)}`, key);
    } else throw new Error("give a receipt (paste, drop a file) or a receipt id and your key");
    const requestBody = await bytesOf("request-file", "request");
    const responseBody = await bytesOf("response-file", "response");
    const rcpt = verifyReceipt(receipt, {
      report,
      requestBody,
      responseBody,
      requireVerifiedUpstream: requireVerified,
    });
    checks.push(...rcpt);
    const r = receipt as Record<string, unknown>;
    const webSig = await webcryptoSignature(r, report);
    checks.push(webSig);
    // Only a receipt the attested key signed may lead the page (and the user's key) anywhere.
    const signed = webSig.ok && rcpt.some((c) => c.name === "receipt.signature" && c.ok);
    for (
      const c of [
        await webcryptoHash(r, "request.received", requestBody),
        await webcryptoHash(r, "response.returned", responseBody),
      ]
    ) if (c) checks.push(c);
    chain.receipt = {
      ok: rcpt.every((c) => c.ok),
      label: `${String(r["receipt_id"] ?? id).slice(0, 18)}…`,
    };

    // 3. The upstream session the receipt names (its id is the SHA-256 of its JCS form).
    const up = findEvent(r, "upstream.verified");
    const sid = up?.["session_id"];
    // Followed only as what a session id is (64 lowercase hex) and from a signed receipt: a
    // pasted receipt's text must not choose which of the user's endpoints the page calls.
    const followable = typeof sid === "string" && SESSION_ID.test(sid) && signed;
    if (typeof sid === "string" && !followable) {
      chain.session = {
        ok: false,
        label: signed ? "malformed session id" : "receipt not signed: not followed",
      };
      checks.push({
        name: "session.id",
        ok: false,
        detail: signed
          ? "the receipt's session_id is not 64 lowercase hex characters; not fetched"
          : "the receipt's signature does not verify; its session is not fetched",
      });
    } else if (typeof sid === "string" && key) {
      const session = await getJson(`/v1/aci/sessions/${sid}`, key);
      const actual = sha256Hex(jcsBytes(session));
      const ok = actual === sid;
      checks.push({
        name: "session.id",
        ok,
        detail: ok
          ? `session document hashes to its id (${
            String((session as Record<string, unknown>)["verifier_id"] ?? "")
          })`
          : `session document hashes to ${actual}, not ${sid}`,
      });
      chain.session = { ok, label: `${sid.slice(0, 12)}…` };
    } else {
      chain.session = {
        ok: null,
        label: typeof sid === "string" ? "give your key to fetch it" : "no attested upstream",
      };
    }
  } catch (e) {
    checks.push({ name: "page.error", ok: false, detail: (e as Error).message });
  }
  render(checks, chain);
}

$("verify").addEventListener("click", () => {
  run();
});
// Dropping files onto a box fills its file input.
for (const box of document.querySelectorAll<HTMLElement>("[data-drop]")) {
  box.addEventListener("dragover", (e) => e.preventDefault());
  box.addEventListener("drop", (e) => {
    e.preventDefault();
    const input = $<HTMLInputElement>(box.dataset.drop!);
    if (e.dataTransfer?.files.length) input.files = e.dataTransfer.files;
  });
}
document.body.dataset.state = "ready";
