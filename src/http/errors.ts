/**
 * The gateway's one error type and its one status map. Every failure is a
 * `GatewayError` carrying a `kind`; the kind decides the HTTP status and the
 * `type`/`code` written in the envelope of the request's format.
 */

/** Envelopes the gateway renders errors in. */
export type ErrorFormat = "openai" | "anthropic";

interface KindInfo {
  status: number;
  type: string;
  code?: string;
  /** Anthropic SDK error type for the same condition. */
  anthropic: string;
}

/** The single status map. Keys are the kinds callers raise. */
export const ERROR_KINDS = {
  invalid_request: {
    status: 400,
    type: "invalid_request_error",
    anthropic: "invalid_request_error",
  },
  invalid_api_key: {
    status: 401,
    type: "invalid_request_error",
    code: "invalid_api_key",
    anthropic: "authentication_error",
  },
  // Another credential (the operator token, a receipt reader's key): the spec's one 401
  // envelope all the same (docs/decisions/one-401-code.md).
  unauthorized: {
    status: 401,
    type: "invalid_request_error",
    code: "invalid_api_key",
    anthropic: "authentication_error",
  },
  insufficient_credits: {
    status: 403,
    type: "insufficient_credits",
    code: "insufficient_credits",
    anthropic: "permission_error",
  },
  not_found: { status: 404, type: "not_found", code: "not_found", anthropic: "not_found_error" },
  receipt_not_found: {
    status: 404,
    type: "not_found",
    code: "receipt_not_found",
    anthropic: "not_found_error",
  },
  /** The transparency log has not yet put the receipt in a served checkpoint (Retry-After). */
  log_pending: {
    status: 503,
    type: "service_unavailable",
    code: "log_pending",
    anthropic: "overloaded_error",
  },
  model_not_found: {
    status: 404,
    type: "invalid_request_error",
    code: "model_not_found",
    anthropic: "not_found_error",
  },
  no_zdr_provider: {
    status: 404,
    type: "invalid_request_error",
    code: "no_zdr_provider",
    anthropic: "not_found_error",
  },
  method_not_allowed: {
    status: 405,
    type: "invalid_request_error",
    code: "method_not_allowed",
    anthropic: "invalid_request_error",
  },
  request_timeout: {
    status: 408,
    type: "invalid_request_error",
    code: "request_timeout",
    anthropic: "timeout_error",
  },
  payload_too_large: {
    status: 413,
    type: "invalid_request_error",
    code: "payload_too_large",
    anthropic: "request_too_large",
  },
  unsupported_media_type: {
    status: 415,
    type: "invalid_request_error",
    code: "unsupported_media_type",
    anthropic: "invalid_request_error",
  },
  rate_limited: {
    status: 429,
    type: "rate_limit_error",
    code: "rate_limit_exceeded",
    anthropic: "rate_limit_error",
  },
  internal: { status: 500, type: "server_error", code: "internal_error", anthropic: "api_error" },
  upstream_error: {
    status: 502,
    type: "upstream_error",
    code: "upstream_error",
    anthropic: "api_error",
  },
  unavailable: {
    status: 503,
    type: "service_unavailable",
    code: "service_unavailable",
    anthropic: "overloaded_error",
  },
  upstream_verification_failed: {
    status: 503,
    type: "upstream_verification_failed",
    code: "upstream_verification_failed",
    anthropic: "api_error",
  },
  session_not_accepted: {
    status: 503,
    type: "session_not_accepted",
    code: "session_not_accepted",
    anthropic: "api_error",
  },
  upstream_timeout: {
    status: 504,
    type: "upstream_error",
    code: "upstream_timeout",
    anthropic: "api_error",
  },
  // E2EE v2 (spec/e2ee-v2.md §9): 400, `type` and `code` the spec's name in every envelope.
  e2ee_header_missing: {
    status: 400,
    type: "e2ee_header_missing",
    code: "e2ee_header_missing",
    anthropic: "e2ee_header_missing",
  },
  e2ee_invalid_version: {
    status: 400,
    type: "e2ee_invalid_version",
    code: "e2ee_invalid_version",
    anthropic: "e2ee_invalid_version",
  },
  e2ee_invalid_public_key: {
    status: 400,
    type: "e2ee_invalid_public_key",
    code: "e2ee_invalid_public_key",
    anthropic: "e2ee_invalid_public_key",
  },
  e2ee_model_key_mismatch: {
    status: 400,
    type: "e2ee_model_key_mismatch",
    code: "e2ee_model_key_mismatch",
    anthropic: "e2ee_model_key_mismatch",
  },
  e2ee_invalid_nonce: {
    status: 400,
    type: "e2ee_invalid_nonce",
    code: "e2ee_invalid_nonce",
    anthropic: "e2ee_invalid_nonce",
  },
  e2ee_replay_detected: {
    status: 400,
    type: "e2ee_replay_detected",
    code: "e2ee_replay_detected",
    anthropic: "e2ee_replay_detected",
  },
  e2ee_invalid_timestamp: {
    status: 400,
    type: "e2ee_invalid_timestamp",
    code: "e2ee_invalid_timestamp",
    anthropic: "e2ee_invalid_timestamp",
  },
  e2ee_invalid_payload_model: {
    status: 400,
    type: "e2ee_invalid_payload_model",
    code: "e2ee_invalid_payload_model",
    anthropic: "e2ee_invalid_payload_model",
  },
  e2ee_decryption_failed: {
    status: 400,
    type: "e2ee_decryption_failed",
    code: "e2ee_decryption_failed",
    anthropic: "e2ee_decryption_failed",
  },
  e2ee_unsupported_endpoint: {
    status: 400,
    type: "e2ee_unsupported_endpoint",
    code: "e2ee_unsupported_endpoint",
    anthropic: "e2ee_unsupported_endpoint",
  },
} as const satisfies Record<string, KindInfo>;

export type ErrorKind = keyof typeof ERROR_KINDS;

export class GatewayError extends Error {
  readonly kind: ErrorKind;
  /** The request parameter at fault, when there is one (e.g. `temperature`, `messages[0].role`). */
  readonly param: string | null;
  /** Extra response headers (e.g. `Retry-After`). */
  readonly headers: Record<string, string>;
  /**
   * The envelope this error must be rendered in, when it was fixed before the
   * renderer saw it (a refusal whose receipt already binds its bytes).
   */
  readonly envelope: ErrorFormat | null;

  constructor(
    kind: ErrorKind,
    message: string,
    opts: {
      param?: string | null;
      headers?: Record<string, string>;
      envelope?: ErrorFormat;
      cause?: unknown;
    } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "GatewayError";
    this.kind = kind;
    this.param = opts.param ?? null;
    this.headers = opts.headers ?? {};
    this.envelope = opts.envelope ?? null;
  }

  get status(): number {
    return ERROR_KINDS[this.kind].status;
  }

  /**
   * The same error, answered: rendered in `envelope` with exactly `headers`
   * (the refusal's, its receipt id among them); `cause` is what was thrown.
   */
  answered(envelope: ErrorFormat, headers: Record<string, string>, cause: unknown): GatewayError {
    return new GatewayError(this.kind, this.message, {
      param: this.param,
      headers,
      envelope,
      cause,
    });
  }
}

/** Shorthand for the most common error: a bad parameter, named. */
export function badParam(param: string, message: string): GatewayError {
  return new GatewayError("invalid_request", message, { param });
}

/** The JSON body of an error in the given format (also used inside SSE error events). */
export function errorBody(err: GatewayError, format: ErrorFormat): Record<string, unknown> {
  const info: KindInfo = ERROR_KINDS[err.kind];
  if (format === "anthropic") {
    // The Anthropic SDK reads `type`; a bad key also carries the spec's `code:
    // "invalid_api_key"` here, as on every surface. Other errors keep Anthropic's exact shape.
    const code = info.status === 401 ? { code: "invalid_api_key" } : {};
    return { type: "error", error: { type: info.anthropic, message: err.message, ...code } };
  }
  return {
    error: { message: err.message, type: info.type, code: info.code ?? null, param: err.param },
  };
}

const encoder = new TextEncoder();

/**
 * An error's body bytes in `format`: what the client receives and what a
 * refusal receipt binds, so both come from this one function.
 */
export function errorBytes(err: GatewayError, format: ErrorFormat): Uint8Array<ArrayBuffer> {
  return encoder.encode(JSON.stringify(errorBody(err, format)));
}

/**
 * The one response made of an error: its envelope's bytes (the error's own
 * envelope when it has one, else `format`), its status, its headers, JSON.
 */
export function errorResponse(err: GatewayError, format: ErrorFormat): Response {
  const headers = new Headers(err.headers);
  headers.set("content-type", "application/json");
  return new Response(errorBytes(err, err.envelope ?? format), { status: err.status, headers });
}

/** Anything thrown that is not a GatewayError becomes an opaque 500: never a stack trace. */
export function asGatewayError(e: unknown): GatewayError {
  if (e instanceof GatewayError) return e;
  return new GatewayError("internal", "internal server error");
}

/** The `code` a refusal is logged and rendered under (its type when the kind has no code). */
export function errorCodeOf(err: GatewayError): string {
  const info: KindInfo = ERROR_KINDS[err.kind];
  return info.code ?? info.type;
}
