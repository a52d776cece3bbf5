/// <reference lib="dom" />
/**
 * The /verify page's script: the same checks as `deno task verify`, run in
 * the browser with the project's own verify library (bundled by
 * enclave/build_verify_page.ts). It fetches the attestation report with a
 * fresh nonce, verifies it (keyset digest, report data, quote slot; hardware quotes need
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
import { jcs, jcsBytes } from "../../aci/jcs.ts";
import { sha256Hex } from "../../aci/digest.ts";
import { b64, parseCheckpointBody, parseVerifierKey, unb64, verifyNote } from "../../aci/note.ts";
import { leafHash, verifyInclusion } from "../../aci/merkle.ts";
import { receiptEntry } from "../../aci/log_entry.ts";
import { followLog, keysetLogKeys } from "../tlog.ts";

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
const RECEIPT_ID = /^rcpt-[0-9a-f]{32}$/;

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

type Node = "report" | "keyset" | "receipt" | "session" | "log";
/** A node's state: passed, failed, not checked, or passed on development evidence (amber). */
type NodeState = { ok: boolean | null; label: string; dev?: boolean };

/** Why a passing run proves nothing about hardware, if it does not (null: it does). */
function developmentReason(checks: Check[], sessionRefuted: string | null): string | null {
  if (sessionRefuted !== null) {
    return `the upstream session's tee_attested is refuted (${sessionRefuted})`;
  }
  if (checks.some((c) => c.name.endsWith("hardware_evidence") && /development/i.test(c.detail))) {
    return "the attestation is development evidence";
  }
  return null;
}

function render(checks: Check[], chain: Record<Node, NodeState>, sessionRefuted: string | null) {
  const list = $("checks");
  list.replaceChildren(...checks.map((c) => {
    const li = document.createElement("li");
    // A check that passed only because development evidence was allowed is amber too.
    li.className = !c.ok ? "fail" : /development evidence|WARNING/.test(c.detail) ? "dev" : "pass";
    li.dataset.check = c.name;
    li.textContent = `${c.ok ? "PASS" : "FAIL"}  ${c.name}: ${c.detail}`;
    return li;
  }));
  for (const n of ["report", "keyset", "receipt", "session", "log"] as Node[]) {
    const el = $(`node-${n}`);
    const s = chain[n];
    el.className = "node " +
      (s.ok === null ? "unknown" : !s.ok ? "fail" : s.dev ? "dev" : "pass");
    el.querySelector(".sub")!.textContent = s.label;
  }
  const all = checks.length > 0 && checks.every((c) => c.ok);
  const dev = developmentReason(checks, sessionRefuted);
  const verdict = $("verdict");
  // Development evidence is never shown as a green success.
  verdict.className = !all ? "fail" : dev ? "dev" : "pass";
  verdict.textContent = !all
    ? `${checks.filter((c) => !c.ok).length} of ${checks.length} checks failed.`
    : dev
    ? `development: this proves nothing about hardware (${dev}; ${checks.length} checks passed).`
    : `All ${checks.length} checks passed.`;
  document.body.dataset.state = "done";
}

// Long as the /verify page's checks in the order the user sees them, each a few lines.
async function run(): Promise<void> {
  document.body.dataset.state = "running";
  const checks: Check[] = [];
  const key = $<HTMLInputElement>("api-key").value.trim() || undefined;
  const allowDev = $<HTMLInputElement>("allow-dev").checked;
  const requireVerified = $<HTMLInputElement>("require-verified").checked;
  const chain: Record<Node, NodeState> = {
    report: { ok: null, label: "not checked" },
    keyset: { ok: null, label: "not checked" },
    receipt: { ok: null, label: "not checked" },
    session: { ok: null, label: "not checked" },
    log: { ok: null, label: "not checked" },
  };
  let sessionRefuted: string | null = null;
  try {
    // 1. The report, bound to a nonce only this page knows.
    const nonce = bytesToHex(crypto.getRandomValues(new Uint8Array(32)));
    const report = await getJson(`/v1/aci/attestation?nonce=${nonce}`);
    const rc = await verifyReport(report, { nonce, now: Date.now, allowDevEvidence: allowDev });
    checks.push(
      { name: "report.nonce", ok: true, detail: `fetched with fresh nonce ${nonce}` },
      ...rc,
    );
    const devReport = rc.some((c) =>
      c.name.endsWith("hardware_evidence") && /development/i.test(c.detail)
    );
    chain.report = {
      ok: rc.every((c) => c.ok),
      label: `nonce ${nonce.slice(0, 12)}…${devReport ? " (development)" : ""}`,
      dev: devReport,
    };
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
    // A receipt from before a restart or rotation: its archived keyset and report.
    const signing = await signingReport(receipt, report, allowDev, checks, chain);
    const requestBody = await bytesOf("request-file", "request");
    const responseBody = await bytesOf("response-file", "response");
    const rcpt = verifyReceipt(receipt, {
      report: signing,
      requestBody,
      responseBody,
      requireVerifiedUpstream: requireVerified,
    });
    checks.push(...rcpt);
    const r = receipt as Record<string, unknown>;
    const webSig = await webcryptoSignature(r, signing);
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
      const tee = (((session as Record<string, unknown>).claims ?? {}) as Record<string, unknown>)
        .tee_attested as { status?: string; reason?: string } | undefined;
      if (tee?.status === "refuted") sessionRefuted = tee.reason ?? "refuted";
      checks.push({
        name: "session.id",
        ok,
        detail: ok
          ? `session document hashes to its id (${
            String((session as Record<string, unknown>)["verifier_id"] ?? "")
          })`
          : `session document hashes to ${actual}, not ${sid}`,
      });
      chain.session = {
        ok,
        label: `${sid.slice(0, 12)}…${sessionRefuted !== null ? " tee_attested refuted" : ""}`,
        dev: sessionRefuted !== null,
      };
    } else {
      chain.session = {
        ok: null,
        label: typeof sid === "string" ? "give your key to fetch it" : "no attested upstream",
      };
    }

    // 4. The receipt's inclusion in the transparency log, and the checkpoint used.
    // Like the session id: the receipt id leads the user's key to a URL only from a signed
    // receipt, and only as what a receipt id is.
    const rid = String(r["receipt_id"] ?? id);
    if (!signed || !RECEIPT_ID.test(rid)) {
      chain.log = { ok: false, label: "receipt not signed: inclusion not fetched" };
      checks.push({
        name: "log.inclusion",
        ok: false,
        detail: "not fetched: the receipt's signature did not verify or its id is malformed",
      });
    } else if (key) {
      const lc = await inclusion(rid, r, [report, signing], allowDev, key);
      checks.push(...lc.checks);
      chain.log = lc.state;
    } else chain.log = { ok: null, label: "give your key to fetch the proof" };
  } catch (e) {
    checks.push({ name: "page.error", ok: false, detail: (e as Error).message });
  }
  render(checks, chain, sessionRefuted);
}

/** The report of the keyset that signed `receipt`: the current one, or its archived one. */
async function signingReport(
  receipt: unknown,
  report: unknown,
  allowDev: boolean,
  checks: Check[],
  chain: Record<Node, NodeState>,
): Promise<unknown> {
  const wanted = (receipt as Record<string, unknown>)?.["workload_keyset_digest"];
  const current = (report as Record<string, unknown>)["workload_keyset_digest"];
  if (typeof wanted !== "string" || wanted === current) {
    checks.push({ name: "receipt.keyset_used", ok: true, detail: `the current keyset ${current}` });
    return report;
  }
  let archived: unknown;
  try {
    archived = await getJson(
      `/v1/aci/attestation?workload_keyset_digest=${encodeURIComponent(wanted)}`,
    );
  } catch (e) {
    // Not a keyset of this gateway: checked against the current one, which then says why not.
    checks.push({
      name: "receipt.keyset_used",
      ok: false,
      detail: `keyset ${wanted} is not archived here (${(e as Error).message}); ` +
        `checked against the current ${current}`,
    });
    return report;
  }
  const ac = await verifyReport(archived, { nonce: null, allowDevEvidence: allowDev });
  checks.push({
    name: "receipt.keyset_used",
    ok: true,
    detail: `archived keyset ${wanted} (the receipt predates the current ${current}); its ` +
      "archived report, issued without a nonce",
  }, ...ac.map((c) => ({ ...c, name: c.name.replace(/^report\./, "archived_report.") })));
  chain.keyset = {
    ok: ac.every((c) => c.ok),
    label: `archived ${wanted.slice(0, 19)}…`,
    dev: chain.report.dev,
  };
  return archived;
}

/** How long the gateway is asked to hold an inclusion request (its limit is 5 s). */
const INCLUSION_WAIT_MS = 5_000;

/** Fetches and checks the receipt's inclusion proof; shows the checkpoint used. */
async function inclusion(
  id: string,
  receipt: Record<string, unknown>,
  reports: unknown[],
  allowDev: boolean,
  key: string,
): Promise<{ checks: Check[]; state: NodeState }> {
  let answer: Record<string, unknown> | null = null;
  // The gateway holds the request until the receipt is in a signed checkpoint (`?wait=`), so a
  // fresh receipt costs one request; a 503 that comes back early (the gateway's waiters are full,
  // or it is shutting down) is retried after a pause, until the page's own deadline.
  const deadline = Date.now() + 10_000;
  while (answer === null && Date.now() < deadline) {
    const asked = Date.now();
    const res = await fetch(
      `/v1/aci/receipts/${encodeURIComponent(id)}/inclusion?wait=${INCLUSION_WAIT_MS}`,
      { headers: { authorization: `Bearer ${key}` }, cache: "no-store" },
    );
    if (res.status === 503) {
      await res.body?.cancel();
      if (Date.now() - asked < INCLUSION_WAIT_MS) await new Promise((r) => setTimeout(r, 250));
      continue;
    }
    const text = await res.text();
    if (!res.ok) {
      return {
        checks: [{
          name: "log.inclusion",
          ok: false,
          detail: `inclusion answered HTTP ${res.status}`,
        }],
        state: { ok: false, label: "no proof" },
      };
    }
    answer = JSON.parse(text);
  }
  if (answer === null || typeof answer.checkpoint !== "string") {
    return {
      checks: [{
        name: "log.inclusion",
        ok: false,
        detail: "not in a checkpoint yet (log_pending)",
      }],
      state: { ok: false, label: "pending" },
    };
  }
  const note = answer.checkpoint;
  $("checkpoint").textContent = note;
  const origin = String(answer.origin);
  let verified = verifyNote(note, reports.flatMap((r) => keysetLogKeys(extractKeyset(r), origin)));
  let via = "a log key of the report's keyset";
  if (verified === null) {
    const r = await followLog(fetch, location.origin, null, { allowDevEvidence: allowDev }, note);
    const keys = r.state.keysets.flatMap((k) => k.vkeys).map(parseVerifierKey);
    verified = verifyNote(note, keys.filter((k) => k !== null));
    via = "a log key of a keyset the log holds (its archived report verified)";
  }
  const cp = verified ? parseCheckpointBody(verified.note.text) : null;
  const checks: Check[] = [{
    name: "log.checkpoint",
    ok: cp !== null,
    detail: cp
      ? `checkpoint ${cp.origin} size ${cp.size} root ${b64(cp.root)}, signed by ${via}`
      : "the checkpoint's signature does not verify under an attested log key",
  }];
  if (cp === null) return { checks, state: { ok: false, label: "bad checkpoint" } };
  const proof = Array.isArray(answer.inclusion_proof)
    ? answer.inclusion_proof.map((p) => unb64(String(p)) ?? new Uint8Array(0))
    : [];
  const index = Number(answer.leaf_index);
  const ok = Number(answer.tree_size) === cp.size &&
    verifyInclusion(leafHash(receiptEntry(jcs(receipt))), index, cp.size, proof, cp.root);
  checks.push({
    name: "log.inclusion",
    ok,
    detail: ok
      ? `receipt digest is leaf ${index} of the tree of size ${cp.size}`
      : "the inclusion proof does not verify against the checkpoint",
  });
  return { checks, state: { ok, label: `leaf ${index} of ${cp.size}` } };
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
