/**
 * Offline E2EE v2 checks for `task verify`: with the client's private key and
 * the request's E2EE context, every generated field of the received wire
 * bytes (a JSON body, or each SSE event) must decrypt, which checks its tag
 * and its AAD (suite, model, field path, response id, nonce, timestamp). The
 * body hashes themselves are the receipt's ordinary checks, run on the
 * restored request and the wire response.
 */
import { hexToBytes } from "../aci/mod.ts";
import { type Check, check, isRecord } from "../verify/mod.ts";
import { type AadContext, decryptField, isE2eeAlgo, responseAad } from "./crypto.ts";
import { E2EE_ENDPOINTS, responseIdFor, responseSlots } from "./fields.ts";

/** What the client module's `E2eeExchange.context` holds (and `--e2ee-context` reads). */
export interface E2eeContextFile {
  algo: string;
  model?: string;
  nonce: string;
  timestamp: number;
  client_private_key: string;
}

/** `e2ee.context` and `e2ee.response_fields` for one response. */
export function verifyE2eeResponse(
  response: Uint8Array,
  context: unknown,
  receipt: { endpoint?: unknown; model?: unknown },
): Check[] {
  const c = context as Partial<E2eeContextFile>;
  const model = typeof c?.model === "string" ? c.model : receipt.model;
  const kind = typeof receipt.endpoint === "string" ? E2EE_ENDPOINTS[receipt.endpoint] : undefined;
  let secret: Uint8Array | null = null;
  try {
    secret = typeof c?.client_private_key === "string" ? hexToBytes(c.client_private_key) : null;
  } catch {
    secret = null;
  }
  const problems = [
    !isRecord(context) && "the E2EE context is not a JSON object",
    !isE2eeAlgo(c?.algo) && "unknown or missing algo",
    !(typeof c?.nonce === "string" && /^[0-9a-fA-F]{64}$/.test(c.nonce)) && "nonce is not 64 hex",
    !Number.isSafeInteger(c?.timestamp) && "timestamp is not an integer",
    (secret === null || secret.length !== 32) && "client_private_key is not 32 bytes of hex",
    typeof model !== "string" && "no request model (context or receipt)",
    kind === undefined && `receipt endpoint ${String(receipt.endpoint)} has no E2EE v2 fields`,
  ].filter((p): p is string => typeof p === "string");
  if (problems.length > 0) {
    return [
      check("e2ee.context", false, problems.join("; ")),
      check("e2ee.response_fields", false, "not checked without a usable E2EE context"),
    ];
  }
  const ctx: AadContext = {
    algo: c.algo as AadContext["algo"],
    model: model as string,
    nonce: c.nonce as string,
    ts: c.timestamp as number,
  };
  const checks = [check("e2ee.context", true, `${ctx.algo}, model ${JSON.stringify(ctx.model)}`)];
  const text = new TextDecoder().decode(response);
  const streamed = /^(data|event|id|:)/.test(text.trimStart());
  let docs: unknown[];
  try {
    docs = streamed ? sseDocuments(text) : [JSON.parse(text)];
  } catch {
    return [...checks, check("e2ee.response_fields", false, "the response is not JSON or SSE")];
  }
  let fields = 0;
  for (const d of docs) {
    if (!isRecord(d) || "error" in d) continue;
    const id = responseIdFor(d);
    for (const s of responseSlots(kind!, d, streamed)) {
      const v = s.get();
      const ok = typeof v === "string" &&
        decryptField(ctx.algo, secret!, v, responseAad(ctx, id, s.path)) !== null;
      if (!ok) {
        return [
          ...checks,
          check("e2ee.response_fields", false, `${s.path} (id ${id}) did not authenticate`),
        ];
      }
      fields++;
    }
  }
  return [
    ...checks,
    check(
      "e2ee.response_fields",
      fields > 0,
      fields > 0
        ? `${fields} encrypted field(s) authenticated (tag and AAD)`
        : "no encrypted generated field in the response",
    ),
  ];
}

/** The JSON data of every SSE event (`[DONE]` skipped). */
function sseDocuments(text: string): unknown[] {
  const out: unknown[] = [];
  for (const event of text.split(/\r?\n\r?\n/)) {
    const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
    if (data === "" || data === "[DONE]") continue;
    out.push(JSON.parse(data));
  }
  return out;
}
