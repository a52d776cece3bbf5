/**
 * Offline re-verification of the GPU evidence inside a stored session
 * record (`GET /v1/aci/sessions/{id}`): the evidence bytes must hash to the
 * recorded digest, the report's `nvidia_payload` is verified against the
 * report's own `request_nonce` (the nonce of that round), with the given
 * collateral and times, and the result is compared with the session's
 * `gpu_attested` claim. One named check per step, never an exception.
 */
import { createHash } from "node:crypto";
import { bytesToHex } from "../aci/mod.ts";
import { type Check, check } from "./checks.ts";
import { isRecord } from "./json_shape.ts";
import type { GpuDeps } from "./nvidia/deps.ts";
import { parseGpuPayload } from "./nvidia/payload.ts";
import { verifyGpuEvidence } from "./nvidia/verify.ts";

function evidenceBytes(doc: Record<string, unknown>): Uint8Array | string {
  const ev = doc["evidence"];
  if (!isRecord(ev) || typeof ev["data"] !== "string" || typeof ev["digest"] !== "string") {
    return "session has no evidence data (the list endpoint drops it; fetch the session by id)";
  }
  const m = /^data:[^;,]+;base64,(.*)$/.exec(ev["data"]);
  if (!m) return "session evidence is not a base64 data URL";
  let bytes: Uint8Array;
  try {
    bytes = Uint8Array.from(atob(m[1]), (c) => c.charCodeAt(0));
  } catch {
    return "session evidence is not base64";
  }
  const digest = "sha256:" + createHash("sha256").update(bytes).digest("hex");
  return digest === ev["digest"]
    ? bytes
    : `evidence digest ${ev["digest"]} does not match its data`;
}

/** Checks the GPU evidence of a session document. */
export async function verifySessionGpu(
  doc: unknown,
  deps: GpuDeps,
  nowMs: number,
): Promise<Check[]> {
  if (!isRecord(doc)) return [check("session.shape", false, "session is not a JSON object")];
  const bytes = evidenceBytes(doc);
  if (typeof bytes === "string") return [check("session.evidence", false, bytes)];
  const checks = [check("session.evidence", true, "evidence data hashes to its recorded digest")];
  let report: unknown;
  try {
    report = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return [...checks, check("gpu.payload", false, "session evidence is not a JSON report")];
  }
  const r = isRecord(report) ? report : {};
  const attestation = isRecord(r["attestation"]) ? r["attestation"] : {};
  const evidence = isRecord(attestation["evidence"]) ? attestation["evidence"] : {};
  const payload = r["nvidia_payload"] ?? evidence["nvidia_payload"] ??
    attestation["nvidia_payload"];
  if (payload === undefined || payload === null || payload === "") {
    return [...checks, check("gpu.payload", false, "the session's report carries no GPU evidence")];
  }
  const nonceHex = r["request_nonce"] ?? attestation["nonce"];
  if (typeof nonceHex !== "string" || !/^[0-9a-fA-F]{64}$/.test(nonceHex)) {
    return [...checks, check("gpu.nonce", false, "the report records no 32-byte request nonce")];
  }
  const parsed = parseGpuPayload(payload);
  if (!parsed.ok) return [...checks, check("gpu.payload", false, parsed.reason)];
  checks.push(check("gpu.payload", true, `${parsed.payload.gpus.length} GPU evidence item(s)`));
  const nonce = Uint8Array.from(nonceHex.match(/../g)!, (h) => parseInt(h, 16));
  const verdict = await verifyGpuEvidence({
    gpus: parsed.payload.gpus,
    nonce,
    deviceRootDer: deps.deviceRootDer,
    rimRootDer: deps.rimRootDer,
    collateral: deps.collateral,
    times: deps.times(nowMs),
  });
  verdict.gpus.forEach((g, i) => {
    for (const c of g.checks) {
      checks.push(check(`gpu[${i}].${c.name}`, c.status === "pass", `${c.status}: ${c.detail}`));
    }
  });
  const claims = isRecord(doc["claims"]) ? doc["claims"] : {};
  const claim = isRecord(claims["gpu_attested"]) ? claims["gpu_attested"] : {};
  const derived = verdict.status === "pass"
    ? "asserted"
    : verdict.status === "fail"
    ? "refuted"
    : "unknown";
  checks.push(
    check(
      "gpu.claim",
      verdict.status === "pass",
      `evidence verdict ${verdict.status} (${derived}) for nonce ${
        bytesToHex(nonce).slice(0, 16)
      }…; ` +
        `the session claimed ${JSON.stringify(claim["status"] ?? "nothing")}`,
    ),
  );
  return checks;
}
