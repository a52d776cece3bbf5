/**
 * Bounded HTTP probes for hostile-input, fuzz and fault tests: every request
 * has a deadline (a hang fails the test instead of stalling it), raw TCP
 * requests can send bytes `fetch` refuses to (bad methods, CR in headers,
 * invalid request lines), and error envelopes are checked in one place.
 */
import assert from "node:assert/strict";
import { concatBytes } from "../../src/aci/bytes.ts";

/** What a probe observed. `json` is undefined when the body is not JSON. */
export interface Probe {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

/** `fetch` with a deadline covering the headers and the whole body. */
export async function probe(
  url: string,
  init: RequestInit = {},
  timeoutMs = 10_000,
): Promise<Probe> {
  const ctl = new AbortController();
  const timer = setTimeout(
    () => ctl.abort(new Error(`no answer within ${timeoutMs} ms`)),
    timeoutMs,
  );
  try {
    const res = await fetch(url, { ...init, signal: ctl.signal });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, json: parseOrUndefined(text) };
  } finally {
    clearTimeout(timer);
  }
}

function parseOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const encoder = new TextEncoder();

/**
 * Sends raw request bytes over one loopback TCP connection and reads until the
 * server closes it (requests should carry `Connection: close`) or the first
 * complete response has arrived. Bodies sent chunked are de-chunked.
 */
export async function rawHttp(
  port: number,
  request: string | Uint8Array,
  timeoutMs = 10_000,
): Promise<Probe> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const timer = setTimeout(() => {
    try {
      conn.close();
    } catch { /* already closed */ }
  }, timeoutMs);
  const chunks: Uint8Array[] = [];
  let total = 0;
  let writing: Promise<void> = Promise.resolve();
  try {
    const bytes = typeof request === "string" ? encoder.encode(request) : request;
    // Written alongside the reads: a server refusing a large body stops reading it, and a
    // client blocked on writing would never see the answer.
    writing = writeAll(conn, bytes);
    const buf = new Uint8Array(64 * 1024);
    while (true) {
      let n: number | null;
      try {
        n = await conn.read(buf);
      } catch {
        break; // reset by the server, or closed by the deadline
      }
      if (n === null) break;
      chunks.push(buf.slice(0, n));
      total += n;
      if (complete(concatBytes(chunks, total))) break;
    }
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch { /* already closed */ }
    await writing;
  }
  const all = concatBytes(chunks, total);
  const parsed = parseResponse(all);
  if (parsed === null) {
    throw new Error(`no HTTP response within ${timeoutMs} ms (${total} bytes read)`);
  }
  return parsed;
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let off = 0;
  try {
    while (off < bytes.byteLength) off += await conn.write(bytes.subarray(off));
  } catch {
    // the server closed or reset the connection before taking everything
  }
}

const latin1 = new TextDecoder("latin1");

/** Whether the bytes hold one complete response (so keep-alive servers need not close). */
function complete(bytes: Uint8Array): boolean {
  const text = latin1.decode(bytes);
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return false;
  const head = text.slice(0, end).toLowerCase();
  const body = text.slice(end + 4);
  const len = /\r\ncontent-length:\s*(\d+)/.exec(head);
  if (len) return body.length >= Number(len[1]);
  if (/\r\ntransfer-encoding:\s*chunked/.test(head)) {
    return body.includes("\r\n0\r\n\r\n") || body.startsWith("0\r\n\r\n");
  }
  return false;
}

function parseResponse(bytes: Uint8Array): Probe | null {
  const text = latin1.decode(bytes);
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return null;
  const lines = text.slice(0, end).split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
  if (!m) return null;
  const headers = new Headers();
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    if (i > 0) headers.append(l.slice(0, i).trim(), l.slice(i + 1).trim());
  }
  let body = text.slice(end + 4);
  if (headers.get("transfer-encoding")?.toLowerCase().includes("chunked")) body = dechunk(body);
  const utf8 = new TextDecoder().decode(Uint8Array.from(body, (c) => c.charCodeAt(0)));
  return { status: Number(m[1]), headers, text: utf8, json: parseOrUndefined(utf8) };
}

function dechunk(body: string): string {
  let out = "";
  let i = 0;
  while (i < body.length) {
    const eol = body.indexOf("\r\n", i);
    if (eol < 0) break;
    const size = parseInt(body.slice(i, eol), 16);
    if (!Number.isFinite(size) || size === 0) break;
    out += body.slice(eol + 2, eol + 2 + size);
    i = eol + 2 + size + 2;
  }
  return out;
}

/** The two error envelopes the gateway speaks. */
export type Envelope = "openai" | "anthropic";

/** Asserts `p` is an error in the given envelope, with no extra top-level members. */
export function assertEnvelope(p: Probe, envelope: Envelope, label: string): void {
  const j = p.json;
  assert.ok(
    j !== null && typeof j === "object" && !Array.isArray(j),
    `${label}: body is JSON object`,
  );
  const o = j as Record<string, unknown>;
  const e = o.error as Record<string, unknown> | undefined;
  assert.ok(e !== null && typeof e === "object", `${label}: has error object`);
  if (envelope === "anthropic") {
    assert.deepEqual(Object.keys(o).sort(), ["error", "type"], `${label}: anthropic top level`);
    assert.equal(o.type, "error", `${label}: type=error`);
    assert.equal(typeof e.type, "string", `${label}: error.type`);
    assert.equal(typeof e.message, "string", `${label}: error.message`);
    return;
  }
  assert.deepEqual(Object.keys(o), ["error"], `${label}: openai top level`);
  assert.equal(typeof e.message, "string", `${label}: error.message`);
  assert.ok((e.message as string).length > 0, `${label}: error.message not empty`);
  assert.equal(typeof e.type, "string", `${label}: error.type`);
  assert.ok("code" in e && (e.code === null || typeof e.code === "string"), `${label}: error.code`);
  assert.ok(
    "param" in e && (e.param === null || typeof e.param === "string"),
    `${label}: error.param`,
  );
}

/** The envelope a path answers errors in. */
export function envelopeFor(path: string): Envelope {
  return path.split("?")[0] === "/v1/messages" ? "anthropic" : "openai";
}
