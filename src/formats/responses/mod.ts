/** The OpenAI Responses (`/v1/responses`) adapter: request, response and stream translation. */

export { type ParsedResponsesRequest, parseResponsesRequest } from "./request.ts";
export { chatToResponsesResponse, type ResponsesResponseOptions } from "./response.ts";
export { createResponsesStreamTranslator, type ResponsesStreamOptions } from "./stream.ts";
export type {
  ResponsesEcho,
  ResponsesOutputItem,
  ResponsesResponse,
  ResponsesUsage,
} from "./types.ts";
