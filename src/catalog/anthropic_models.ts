/**
 * The model catalog in Anthropic's shape, for Anthropic-style requests (an
 * `anthropic-version` header, as the Anthropic SDK sends): `{type: "model", id,
 * display_name, created_at}` objects in a page `{data, has_more, first_id,
 * last_id}` with Anthropic's `limit` / `after_id` / `before_id` cursor.
 * Pure: the catalog's OpenAI-shaped objects in, Anthropic's out.
 */
import { badParam } from "../http/mod.ts";

export interface AnthropicModel {
  type: "model";
  id: string;
  display_name: string;
  created_at: string;
}

export interface AnthropicModelPage {
  data: AnthropicModel[];
  has_more: boolean;
  first_id: string | null;
  last_id: string | null;
}

/** Is this an Anthropic-style request (the version header every Anthropic client sends)? */
export function isAnthropicStyle(headers: Headers): boolean {
  return headers.has("anthropic-version");
}

export function toAnthropicModel(o: Record<string, unknown>): AnthropicModel {
  const created = typeof o.created === "number" ? o.created : 0;
  return {
    type: "model",
    id: String(o.id),
    display_name: typeof o.name === "string" ? o.name : String(o.id),
    created_at: new Date(created * 1000).toISOString().replace(".000Z", "Z"),
  };
}

const MAX_LIMIT = 1000;

/** One page of the listing, following Anthropic's cursor parameters (unknown cursors: 400). */
export function anthropicModelPage(
  objects: Record<string, unknown>[],
  params: URLSearchParams,
): AnthropicModelPage {
  const all = objects.map(toAnthropicModel);
  const rawLimit = params.get("limit");
  let limit = 20;
  if (rawLimit !== null) {
    limit = Number(rawLimit);
    if (!/^\d+$/.test(rawLimit) || limit < 1 || limit > MAX_LIMIT) {
      throw badParam("limit", `limit must be an integer from 1 to ${MAX_LIMIT}`);
    }
  }
  const after = params.get("after_id");
  const before = params.get("before_id");
  if (after !== null && before !== null) {
    throw badParam("before_id", "give either after_id or before_id");
  }
  const indexOf = (id: string, name: string) => {
    const i = all.findIndex((m) => m.id === id);
    if (i < 0) throw badParam(name, `${name} names no listed model`);
    return i;
  };
  let start = 0;
  let end = all.length;
  if (after !== null) start = indexOf(after, "after_id") + 1;
  if (before !== null) {
    end = indexOf(before, "before_id");
    start = Math.max(0, end - limit);
  }
  const data = all.slice(start, Math.min(end, start + limit));
  const hasMore = before !== null ? start > 0 : start + data.length < end;
  return {
    data,
    has_more: hasMore,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
  };
}
