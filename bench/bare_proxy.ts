/**
 * The floor for this design: a bare Deno `fetch` pass-through proxy with no
 * auth, hashing, signing or storage. It reads the request body whole (as the
 * gateway must, to hash it) and streams the upstream's answer back.
 *
 * Run as a process: `deno run -A bench/bare_proxy.ts <upstream base URL>`;
 * prints `proxy listening on http://HOST:PORT` on stderr.
 */

export function createBareProxy(upstream: string): (req: Request) => Promise<Response> {
  const base = upstream.replace(/\/$/, "");
  return async (req) => {
    const url = new URL(req.url);
    const res = await fetch(base + url.pathname + url.search, {
      method: req.method,
      headers: { "content-type": req.headers.get("content-type") ?? "application/json" },
      body: req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer(),
      signal: req.signal,
    });
    return new Response(res.body, {
      status: res.status,
      headers: { "content-type": res.headers.get("content-type") ?? "application/octet-stream" },
    });
  };
}

if (import.meta.main) {
  const upstream = Deno.args[0];
  if (!upstream) {
    console.error("usage: bare_proxy.ts <upstream base URL>");
    Deno.exit(2);
  }
  Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: ({ hostname, port }) =>
      console.error(`proxy listening on http://${hostname}:${port}`),
  }, createBareProxy(upstream));
}
