/**
 * Anthropic-style ids derived from upstream ids. Hashing (rather than prefixing)
 * gives a stable, URL-safe shape whatever the upstream id looks like, and the
 * same chat id always maps to the same `msg_…` id.
 */

import { createHash, randomUUID } from "node:crypto";

export function messageIdFor(chatId: string | undefined): string {
  const seed = chatId !== undefined && chatId !== "" ? chatId : randomUUID();
  return "msg_" + createHash("sha256").update(seed).digest("base64url").slice(0, 24);
}

/** A `toolu_…` id for an upstream tool call that arrived without one. */
export function toolUseIdFor(messageId: string, index: number): string {
  return "toolu_" +
    createHash("sha256").update(`${messageId}:${index}`).digest("base64url").slice(0, 24);
}
