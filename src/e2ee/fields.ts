/**
 * Where E2EE v2 encrypted values live (spec/e2ee-v2.md §5): the field paths
 * of each endpoint's request and response bodies, as slots a caller can read
 * and replace in place. One table for both directions and both sides, so the
 * gateway, the client module and the verifier agree on every path.
 */

/** The endpoints E2EE v2 defines field shapes for. */
export type E2eeEndpoint = "chat" | "completions" | "embeddings";

export const E2EE_ENDPOINTS: Readonly<Record<string, E2eeEndpoint>> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completions",
  "/v1/embeddings": "embeddings",
};

/** One encrypted location: its path (bound into the AAD) and access to its value. */
export interface Slot {
  path: string;
  /** `messages.{m}.content` as a whole: a plaintext that parses as a JSON array is structured content. */
  wholeContent?: boolean;
  /** `data.{i}.embedding`: the plaintext is the compact JSON of the value. */
  json?: boolean;
  get(): unknown;
  set(value: unknown): void;
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function slot(container: Obj, key: string, path: string, extra: Partial<Slot> = {}): Slot {
  return {
    path,
    ...extra,
    get: () => container[key],
    set: (v) => {
      container[key] = v;
    },
  };
}

/**
 * Request locations holding a string (non-string elements, e.g. token ids,
 * pass through unencrypted). Array content yields its parts' locations.
 */
export function requestSlots(kind: E2eeEndpoint, body: Obj): Slot[] {
  const out: Slot[] = [];
  const listed = (key: string) => {
    const v = body[key];
    if (typeof v === "string") out.push(slot(body, key, key));
    else if (Array.isArray(v)) {
      v.forEach((item, i) => {
        if (typeof item === "string") out.push(indexSlot(v, i, `${key}.${i}`));
      });
    }
  };
  if (kind === "completions") listed("prompt");
  else if (kind === "embeddings") listed("input");
  else {
    const messages = body["messages"];
    if (!Array.isArray(messages)) return out;
    messages.forEach((m, mi) => {
      if (!isObj(m)) return;
      const content = m["content"];
      if (typeof content === "string") {
        out.push(slot(m, "content", `messages.${mi}.content`, { wholeContent: true }));
      } else if (Array.isArray(content)) {
        content.forEach((part, ci) => {
          if (isObj(part)) out.push(...partSlots(part, `messages.${mi}.content.${ci}`));
        });
      }
    });
  }
  return out;
}

function indexSlot(arr: unknown[], i: number, path: string): Slot {
  return {
    path,
    get: () => arr[i],
    set: (v) => {
      arr[i] = v;
    },
  };
}

function partSlots(part: Obj, base: string): Slot[] {
  const nested = (wrapper: string, key: string): Slot[] => {
    const w = part[wrapper];
    return isObj(w) && typeof w[key] === "string"
      ? [slot(w, key, `${base}.${wrapper}.${key}`)]
      : [];
  };
  switch (part["type"]) {
    case "text":
      return typeof part["text"] === "string" ? [slot(part, "text", `${base}.text`)] : [];
    case "image_url":
      return nested("image_url", "url");
    case "input_audio":
      return nested("input_audio", "data");
    default:
      return [];
  }
}

/** An entry's index for its path: its `index` member when present, else its position. */
function entryIndex(entry: Obj, position: number): number {
  const i = entry["index"];
  return typeof i === "number" && Number.isSafeInteger(i) && i >= 0 ? i : position;
}

/**
 * Response locations that are present (not absent and not null): the
 * generated content of a whole response, or of one streamed chunk.
 */
export function responseSlots(kind: E2eeEndpoint, body: Obj, stream: boolean): Slot[] {
  const out: Slot[] = [];
  const add = (container: Obj, key: string, path: string, extra: Partial<Slot> = {}) => {
    const v = container[key];
    if (v !== undefined && v !== null) out.push(slot(container, key, path, extra));
  };
  if (kind === "embeddings") {
    const data = body["data"];
    if (!Array.isArray(data)) return out;
    data.forEach((d, pos) => {
      if (isObj(d)) add(d, "embedding", `data.${entryIndex(d, pos)}.embedding`, { json: true });
    });
    return out;
  }
  const choices = body["choices"];
  if (!Array.isArray(choices)) return out;
  choices.forEach((c, pos) => {
    if (!isObj(c)) return;
    const i = entryIndex(c, pos);
    if (kind === "completions") return add(c, "text", `choices.${i}.text`);
    const holder = stream ? "delta" : "message";
    const m = c[holder];
    if (!isObj(m)) return;
    for (const key of ["content", "reasoning", "reasoning_content"]) {
      add(m, key, `choices.${i}.${holder}.${key}`);
    }
    if (!stream && isObj(m["audio"])) {
      add(m["audio"] as Obj, "data", `choices.${i}.message.audio.data`);
    }
  });
  return out;
}

/** The clear response `id` bound into response AAD, or "". */
export function responseIdFor(body: Obj): string {
  return typeof body["id"] === "string" ? body["id"] : "";
}
