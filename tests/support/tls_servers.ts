/**
 * Test-only TLS fixtures, generated at test time offline in pure TypeScript
 * (`@peculiar/x509` over WebCrypto): a throwaway CA, server certificates it
 * issues for loopback hosts, and a raw TLS server that counts the application
 * bytes it receives, so a test can prove a client wrote nothing to it.
 * Nothing here is fit for production trust.
 */
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { createHash } from "node:crypto";

x509.cryptoProvider.set(crypto);

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY_MS = 24 * 60 * 60 * 1000;

/** A test certificate authority: its certificate (PEM) and the key that signs leaves. */
export interface TestCa {
  certPem: string;
  cert: x509.X509Certificate;
  privateKey: CryptoKey;
}

/** A server certificate and key, plus the pin a client would hold for it. */
export interface TestServerCert {
  certPem: string;
  /** PKCS#8 PEM ("PRIVATE KEY"). */
  keyPem: string;
  /** Lowercase hex SHA-256 of the certificate's SubjectPublicKeyInfo DER. */
  spkiSha256: string;
}

function randomSerial(): string {
  const b = crypto.getRandomValues(new Uint8Array(12));
  b[0] = (b[0]! & 0x7f) | 0x01; // positive and without a leading zero byte, as DER wants
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function toPem(der: ArrayBuffer, label: string): string {
  const b64 = btoa(String.fromCharCode(...new Uint8Array(der)));
  const lines = b64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}

function validity(now: number): { notBefore: Date; notAfter: Date } {
  return { notBefore: new Date(now - DAY_MS), notAfter: new Date(now + 30 * DAY_MS) };
}

/** A fresh self-signed CA (P-256). `now` defaults to the wall clock: this is test support. */
export async function makeTestCa(
  opts: { commonName?: string; now?: number } = {},
): Promise<TestCa> {
  const keys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `CN=${opts.commonName ?? "Gateway Test CA"}`,
    ...validity(opts.now ?? Date.now()),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString("pem") + "\n", cert, privateKey: keys.privateKey };
}

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

/**
 * Issues a server certificate (fresh P-256 key) for `hosts` (DNS names or IPv4
 * literals, default `localhost` and `127.0.0.1`) signed by `ca`.
 */
export async function issueServerCert(
  ca: TestCa,
  opts: { hosts?: string[]; now?: number } = {},
): Promise<TestServerCert> {
  const hosts = opts.hosts ?? ["localhost", "127.0.0.1"];
  const keys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: `CN=${hosts[0] ?? "localhost"}`,
    issuer: ca.cert.subject,
    ...validity(opts.now ?? Date.now()),
    signingKey: ca.privateKey,
    publicKey: keys.publicKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(
        hosts.map((h): x509.JsonGeneralName => ({ type: IPV4.test(h) ? "ip" : "dns", value: h })),
      ),
      await x509.AuthorityKeyIdentifierExtension.create(ca.cert),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  const certPem = cert.toString("pem") + "\n";
  // Taken from the WebCrypto key, independently of src/upstream/spki.ts, so tests cross-check it.
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", keys.publicKey));
  return {
    certPem,
    keyPem: toPem(pkcs8, "PRIVATE KEY"),
    spkiSha256: createHash("sha256").update(spki).digest("hex"),
  };
}

// ---------------------------------------------------------------------------
// Counting TLS server

/** One HTTP/1.1 request as the counting server parsed it. */
export interface TestRequest {
  method: string;
  /** Request target as sent, e.g. `/v1/chat/completions?x=1`. */
  path: string;
  headers: Headers;
  body: Uint8Array;
  /** 1-based index of the TCP connection that carried it (for keep-alive tests). */
  connection: number;
}

/** What the server answers. An async-iterable body is sent chunked, chunk by chunk. */
export interface TestResponse {
  status?: number;
  headers?: Record<string, string>;
  body?: string | Uint8Array | AsyncIterable<string | Uint8Array>;
}

export interface CountingTlsServer {
  hostname: string;
  port: number;
  /** Decrypted application bytes received, summed over all connections. */
  bytesReceived(): number;
  /** Complete HTTP requests parsed. */
  requests(): number;
  /** TCP connections accepted (including ones whose handshake failed). */
  connections(): number;
  /** Closes the listener and every connection, and waits for their tasks to end. */
  close(): Promise<void>;
}

export interface CountingTlsServerOptions {
  certPem: string;
  keyPem: string;
  hostname?: string;
  /** Default 0: the OS picks a free port. */
  port?: number;
  /** Without it the server only counts bytes and never answers. */
  respond?: (req: TestRequest) => TestResponse | Promise<TestResponse>;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Starts a raw `Deno.listenTls` server on loopback (port chosen by the OS). */
export function startCountingTlsServer(opts: CountingTlsServerOptions): CountingTlsServer {
  const hostname = opts.hostname ?? "127.0.0.1";
  const listener = Deno.listenTls({
    hostname,
    port: opts.port ?? 0,
    cert: opts.certPem,
    key: opts.keyPem,
  });
  const port = (listener.addr as Deno.NetAddr).port;
  let bytes = 0;
  let reqCount = 0;
  let connCount = 0;
  const conns = new Set<Deno.TlsConn>();
  const tasks = new Set<Promise<void>>();
  let closing = false;
  let signalClosed: () => void = () => {};
  const closed = new Promise<void>((resolve) => (signalClosed = resolve));

  async function serve(conn: Deno.TlsConn, connection: number): Promise<void> {
    let buf: Uint8Array = new Uint8Array(0);
    const chunk = new Uint8Array(16 * 1024);
    const readMore = async (): Promise<boolean> => {
      const n = await conn.read(chunk);
      if (n === null) return false;
      bytes += n;
      buf = concat(buf, chunk.subarray(0, n));
      return true;
    };
    try {
      while (!closing) {
        if (!opts.respond) {
          if (!(await readMore())) return;
          continue;
        }
        let parsed = parseRequest(buf, connection);
        while (parsed === null) {
          if (!(await readMore())) return;
          parsed = parseRequest(buf, connection);
        }
        buf = buf.subarray(parsed.consumed);
        reqCount++;
        const res = await opts.respond(parsed.request);
        await writeResponse(conn, res, closed);
        if (parsed.request.headers.get("connection")?.toLowerCase() === "close") return;
      }
    } catch {
      // Handshake failures, peer resets and closes are expected in these tests.
    } finally {
      conns.delete(conn);
      try {
        conn.close();
      } catch {
        // already closed
      }
    }
  }

  const acceptLoop = (async () => {
    try {
      for await (const conn of listener) {
        connCount++;
        conns.add(conn);
        const task = serve(conn, connCount);
        tasks.add(task);
        task.finally(() => tasks.delete(task));
      }
    } catch {
      // listener closed
    }
  })();

  return {
    hostname,
    port,
    bytesReceived: () => bytes,
    requests: () => reqCount,
    connections: () => connCount,
    async close() {
      closing = true;
      signalClosed();
      try {
        listener.close();
      } catch {
        // already closed
      }
      for (const conn of conns) {
        try {
          conn.close();
        } catch {
          // already closed
        }
      }
      await acceptLoop;
      await Promise.allSettled([...tasks]);
    },
  };
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function indexOfSeq(hay: Uint8Array, needle: Uint8Array, from = 0): number {
  outer: for (let i = from; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

const CRLF = enc.encode("\r\n");
const CRLFCRLF = enc.encode("\r\n\r\n");

/** Parses one request from the front of `buf`, or returns null when more bytes are needed. */
function parseRequest(
  buf: Uint8Array,
  connection: number,
): { request: TestRequest; consumed: number } | null {
  const headEnd = indexOfSeq(buf, CRLFCRLF);
  if (headEnd < 0) return null;
  const lines = dec.decode(buf.subarray(0, headEnd)).split("\r\n");
  const [method = "", path = ""] = (lines[0] ?? "").split(" ");
  const headers = new Headers();
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  let pos = headEnd + 4;
  let body: Uint8Array;
  if (headers.get("transfer-encoding")?.toLowerCase().includes("chunked")) {
    const parts: Uint8Array[] = [];
    for (;;) {
      const lineEnd = indexOfSeq(buf, CRLF, pos);
      if (lineEnd < 0) return null;
      const size = parseInt(dec.decode(buf.subarray(pos, lineEnd)), 16);
      if (!Number.isFinite(size)) throw new Error("bad chunk size");
      const dataStart = lineEnd + 2;
      if (buf.length < dataStart + size + 2) return null;
      if (size === 0) {
        pos = dataStart + 2; // no trailers in these tests
        break;
      }
      parts.push(buf.subarray(dataStart, dataStart + size));
      pos = dataStart + size + 2;
    }
    body = parts.reduce(concat, new Uint8Array(0));
  } else {
    const len = Number(headers.get("content-length") ?? "0");
    if (buf.length < pos + len) return null;
    body = buf.slice(pos, pos + len);
    pos += len;
  }
  return { request: { method, path, headers, body, connection }, consumed: pos };
}

async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

function asBytes(x: string | Uint8Array): Uint8Array {
  return typeof x === "string" ? enc.encode(x) : x;
}

async function writeResponse(
  conn: Deno.Conn,
  res: TestResponse,
  closed: Promise<void>,
): Promise<void> {
  const status = res.status ?? 200;
  const headers = new Headers(res.headers);
  const body = res.body ?? "";
  const streamed = typeof body !== "string" && !(body instanceof Uint8Array);
  if (streamed) headers.set("transfer-encoding", "chunked");
  else headers.set("content-length", String(asBytes(body).length));
  let head = `HTTP/1.1 ${status} ${status === 200 ? "OK" : "Status"}\r\n`;
  for (const [k, v] of headers) head += `${k}: ${v}\r\n`;
  await writeAll(conn, enc.encode(head + "\r\n"));
  if (!streamed) {
    await writeAll(conn, asBytes(body));
    return;
  }
  // Race each step against server close so a test's never-resolved gate cannot hang close().
  const it = body[Symbol.asyncIterator]();
  const stop = closed.then(() => null);
  let finished = false;
  try {
    for (;;) {
      const step = await Promise.race([it.next(), stop]);
      if (step === null) return;
      if (step.done) break;
      const data = asBytes(step.value);
      if (data.length === 0) continue;
      await writeAll(conn, concat(enc.encode(data.length.toString(16) + "\r\n"), data));
      await writeAll(conn, CRLF);
    }
    finished = true;
  } finally {
    // Not awaited: a generator parked on a gate would only return once the gate opens.
    if (!finished) void it.return?.();
  }
  await writeAll(conn, enc.encode("0\r\n\r\n"));
}
