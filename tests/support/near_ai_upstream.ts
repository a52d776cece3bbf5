/**
 * A loopback HTTPS upstream shaped like NEAR AI Cloud: the demo chat API
 * plus `GET /v1/attestation/report?model&nonce&signing_algo&include_tls_fingerprint`
 * answering NEAR's exact shape — `gateway_attestation` (TDX quote whose
 * REPORTDATA is `sha256(address ‖ TLS SPKI sha256) ‖ nonce`, `tls_cert_fingerprint`,
 * the event log as JSON text, `info`) and `model_attestations[]` (quote binding
 * `address padded to 32 ‖ nonce`, the 64-byte raw `signing_public_key`,
 * the event log as an array, `info`, `nvidia_payload`). Quotes are minted by
 * the test forge (forged Intel root). Knobs give the negative cases.
 * Test-only: nothing here is evidence of hardware.
 */
import { createHash } from "node:crypto";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { generateWorkloadKeys } from "../../src/aci/signer.ts";
import { signEip191 } from "../../src/aci/ethereum.ts";
import { bytesToHex, hexToBytes } from "../../src/aci/hex.ts";
import { type DemoUpstream, startDemoUpstream } from "../../src/demo/upstream.ts";
import {
  DSTACK_RUNTIME_EVENT_TYPE,
  type DstackEvent,
  replayRtmrs,
  runtimeEventDigest,
} from "../../src/verify/dstack/event_log.ts";
import { expectedReportData } from "../../src/verify/dstack/report_data.ts";
import type { TdxForge } from "./tdx_forge.ts";
import { issueServerCert, type TestCa } from "./tls_servers.ts";

export const NEAR_GATEWAY_MRTD = "a1".repeat(48);
export const NEAR_MODEL_MRTD = "b2".repeat(48);

export interface NearAiUpstreamOptions {
  forge: TdxForge;
  ca: TestCa;
  /** The model the report attests (its `model_name`); default "openai/gpt-oss-120b". */
  model?: string;
  /** "bound" (default): fingerprint and report data bind this TLS key; "other": another key; "absent": no fingerprint. */
  tls?: "bound" | "other" | "absent";
  /** MRTD of the model CVM (default NEAR_MODEL_MRTD); changes at runtime with `setModelMrtd`. */
  modelMrtd?: string;
  /**
   * Non-streamed chat answers are signed like NEAR's (`/v1/signature/{id}`): "good" (default,
   * by the attested model key), "wrong-key" (by a key no quote attests), "tampered" (text of
   * other bytes).
   */
  signatures?: "good" | "wrong-key" | "tampered";
}

export interface NearAiUpstream {
  url: string;
  spkiSha256: string;
  caPem: string;
  gatewayAddress: string;
  modelAddress: string;
  demo: DemoUpstream;
  attestationRequests(): number;
  /** Chat requests answered (and signed) by the NEAR shim, and signature lookups served. */
  chats(): number;
  signatureRequests(): number;
  setModelMrtd(hex: string): void;
  close(): Promise<void>;
}

const enc = new TextEncoder();

function cvmLog(app: string, compose: string): { events: DstackEvent[]; json: unknown[] } {
  const runtime = (event: string, payload: Uint8Array): DstackEvent => {
    const e = { imr: 3, eventType: DSTACK_RUNTIME_EVENT_TYPE, event, eventPayload: payload };
    return { ...e, digest: runtimeEventDigest(e) };
  };
  const events: DstackEvent[] = [
    {
      imr: 0,
      eventType: 0x8000000b,
      digest: new Uint8Array(createHash("sha384").update(`td-hob ${app}`).digest()),
      event: "",
      eventPayload: new Uint8Array(0),
    },
    runtime("system-preparing", new Uint8Array(0)),
    runtime("app-id", hexToBytes(createHash("sha1").update(app).digest("hex"))),
    runtime("compose-hash", hexToBytes(compose)),
  ];
  const json = events.map((e) => ({
    imr: e.imr,
    event_type: e.eventType,
    digest: bytesToHex(e.digest),
    event: e.event,
    event_payload: bytesToHex(e.eventPayload),
  }));
  return { events, json };
}

/** Starts the upstream on loopback. */
export async function startNearAiUpstream(o: NearAiUpstreamOptions): Promise<NearAiUpstream> {
  const cert = await issueServerCert(o.ca, {});
  const gwKeys = generateWorkloadKeys();
  const modelSecret = secp256k1.utils.randomSecretKey();
  const modelKeys = generateWorkloadKeys({ secp256k1SecretKey: modelSecret });
  const signatures = new Map<string, Record<string, string>>();
  let chats = 0;
  let signatureRequests = 0;
  const model = o.model ?? "openai/gpt-oss-120b";
  let modelMrtd = o.modelMrtd ?? NEAR_MODEL_MRTD;
  const gwCompose = JSON.stringify({ name: "cloud-api", runner: "docker-compose" });
  const modelCompose = JSON.stringify({ name: "vllm", runner: "docker-compose" });
  const sha = (s: string) => createHash("sha256").update(enc.encode(s)).digest("hex");
  const gwLog = cvmLog("cloud-api", sha(gwCompose));
  const modelLog = cvmLog("vllm", sha(modelCompose));
  const tlsMode = o.tls ?? "bound";
  const fp = tlsMode === "other" ? sha("another TLS key") : cert.spkiSha256;
  let attestations = 0;

  const report = (nonceHex: string) => {
    const nonce = hexToBytes(nonceHex);
    const gwRd = tlsMode === "absent"
      ? expectedReportData({ version: "v1", address: gwKeys.ethereumAddressBytes, nonce })
      : expectedReportData({
        version: "v2",
        address: gwKeys.ethereumAddressBytes,
        spkiSha256: hexToBytes(fp),
        nonce,
      });
    const mRd = expectedReportData({
      version: "v1",
      address: modelKeys.ethereumAddressBytes,
      nonce,
    });
    if (!gwRd.ok || !mRd.ok) throw new Error("report data");
    const gwQuote = o.forge.mintQuote(gwRd.reportData, {
      rtmrs: replayRtmrs(gwLog.events),
      mrTd: hexToBytes(NEAR_GATEWAY_MRTD),
    });
    const mQuote = o.forge.mintQuote(mRd.reportData, {
      rtmrs: replayRtmrs(modelLog.events),
      mrTd: hexToBytes(modelMrtd),
    });
    return {
      gateway_attestation: {
        signing_address: gwKeys.ethereumAddress,
        signing_algo: "ecdsa",
        intel_quote: bytesToHex(gwQuote),
        event_log: JSON.stringify(gwLog.json),
        report_data: bytesToHex(gwRd.reportData),
        request_nonce: nonceHex,
        ...(tlsMode === "absent" ? {} : { tls_cert_fingerprint: fp }),
        info: {
          app_id: createHash("sha1").update("cloud-api").digest("hex"),
          compose_hash: sha(gwCompose),
          tcb_info: { app_compose: gwCompose },
        },
      },
      model_attestations: [{
        model_name: model,
        signing_address: modelKeys.ethereumAddress,
        signing_algo: "ecdsa",
        // NEAR's encoding: the uncompressed key without its 04 tag.
        signing_public_key: modelKeys.secp256k1PublicKeyHex.slice(2),
        request_nonce: nonceHex,
        intel_quote: bytesToHex(mQuote),
        nvidia_payload: null,
        event_log: modelLog.json,
        info: {
          app_id: createHash("sha1").update("vllm").digest("hex"),
          compose_hash: sha(modelCompose),
          tcb_info: JSON.stringify({ app_compose: modelCompose }),
        },
      }],
    };
  };

  const demo = await startDemoUpstream({
    name: "near",
    tls: { cert: cert.certPem, key: cert.keyPem },
    extraRoutes: async (req) => {
      const url = new URL(req.url);
      if (url.pathname === "/v1/chat/completions" && req.method === "POST") {
        const requestBytes = new Uint8Array(await req.arrayBuffer());
        const body = JSON.parse(new TextDecoder().decode(requestBytes));
        if (body.stream) return new Response("streams are not signed here", { status: 400 });
        const id = `chatcmpl-near-${++chats}`;
        const responseBytes = enc.encode(JSON.stringify({
          id,
          object: "chat.completion",
          created: 1_764_000_000,
          model: body.model,
          choices: [{
            index: 0,
            message: { role: "assistant", content: "an attested answer" },
            finish_reason: "stop",
          }],
          usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
        }));
        const hash = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
        const mode = o.signatures ?? "good";
        const text = mode === "tampered"
          ? `${hash(requestBytes)}:${hash(enc.encode("other bytes"))}`
          : `${hash(requestBytes)}:${hash(responseBytes)}`;
        const signer = mode === "wrong-key" ? secp256k1.utils.randomSecretKey() : modelSecret;
        const wrong = generateWorkloadKeys({ secp256k1SecretKey: signer });
        signatures.set(id, {
          text,
          signature: "0x" + bytesToHex(signEip191(signer, text)),
          signing_address: wrong.ethereumAddress,
          signing_algo: "ecdsa",
        });
        return new Response(responseBytes, { headers: { "content-type": "application/json" } });
      }
      const sig = /^\/v1\/signature\/([^/]+)$/.exec(url.pathname);
      if (sig && req.method === "GET") {
        signatureRequests++;
        const env = signatures.get(decodeURIComponent(sig[1]));
        return env
          ? new Response(JSON.stringify(env), { headers: { "content-type": "application/json" } })
          : new Response(JSON.stringify({ detail: "not found" }), { status: 404 });
      }
      if (url.pathname !== "/v1/attestation/report") return null;
      attestations++;
      const nonce = url.searchParams.get("nonce") ?? "";
      if (
        !/^[0-9a-f]{64}$/.test(nonce) || url.searchParams.get("signing_algo") !== "ecdsa" ||
        url.searchParams.get("model") !== model
      ) {
        return new Response(JSON.stringify({ detail: "bad query" }), { status: 400 });
      }
      return new Response(JSON.stringify(report(nonce)), {
        headers: { "content-type": "application/json" },
      });
    },
  });
  return {
    url: demo.url,
    spkiSha256: cert.spkiSha256,
    caPem: o.ca.certPem,
    gatewayAddress: gwKeys.ethereumAddress,
    modelAddress: modelKeys.ethereumAddress,
    demo,
    attestationRequests: () => attestations,
    chats: () => chats,
    signatureRequests: () => signatureRequests,
    setModelMrtd: (hex) => {
      modelMrtd = hex;
    },
    close: () => demo.close(),
  };
}
