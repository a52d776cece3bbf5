/** The Anthropic Messages (`/v1/messages`) adapter: request, response and stream translation. */

export { type ParsedMessagesRequest, parseMessagesRequest } from "./request.ts";
export { chatToMessagesResponse } from "./response.ts";
export { createMessagesStreamTranslator, type MessagesStreamOptions } from "./stream.ts";
export type { MessagesContentBlock, MessagesResponse, MessagesUsage } from "./types.ts";
