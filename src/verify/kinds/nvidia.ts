/**
 * `--kind nvidia`: NVIDIA GPU evidence as served in an attestation report's
 * `nvidia_payload` (the NRAS request JSON: nonce, arch, evidence list), or a
 * report carrying one. Verified against the payload's own nonce (or
 * `--nonce`), with the configured roots and collateral, at the given instant.
 */
import { parseHex } from "../../aci/mod.ts";
import { type Check, check } from "../checks.ts";
import { isRecord } from "../json_shape.ts";
import { parseGpuPayload } from "../nvidia/payload.ts";
import { verifyGpuEvidence } from "../nvidia/verify.ts";
import { asJson } from "./decode.ts";
import type { EvidenceKind } from "./types.ts";

export const nvidiaKind: EvidenceKind = {
  reads: "NVIDIA GPU evidence: an nvidia_payload (NRAS request JSON) or a report holding one",
  verify: async (input, ctx) => {
    const doc = asJson(input);
    if (doc === undefined) return [check("gpu.input", false, "not JSON")];
    const payload = isRecord(doc) && doc["nvidia_payload"] !== undefined
      ? doc["nvidia_payload"]
      : doc;
    const parsed = parseGpuPayload(payload);
    if (!parsed.ok) return [check("gpu.payload", false, parsed.reason)];
    const nonceHex = ctx.nonce ?? parsed.payload.nonce;
    const nonce = typeof nonceHex === "string" && /^[0-9a-fA-F]{64}$/.test(nonceHex)
      ? parseHex(nonceHex)
      : null;
    if (!nonce) return [check("gpu.nonce", false, "no 32-byte nonce (payload nonce or --nonce)")];
    const out: Check[] = [
      check("gpu.payload", true, `${parsed.payload.gpus.length} GPU evidence item(s)`),
    ];
    const verdict = await verifyGpuEvidence({
      gpus: parsed.payload.gpus,
      nonce,
      deviceRootDer: ctx.gpu.deviceRootDer,
      rimRootDer: ctx.gpu.rimRootDer,
      collateral: ctx.gpu.collateral,
      times: ctx.gpu.times(ctx.at),
    });
    verdict.gpus.forEach((g, i) => {
      for (const c of g.checks) {
        out.push(check(`gpu[${i}].${c.name}`, c.status === "pass", `${c.status}: ${c.detail}`));
      }
    });
    out.push(check("gpu.verdict", verdict.status === "pass", verdict.status));
    return out;
  },
};
