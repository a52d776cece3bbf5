/**
 * CORS end to end (issue #17 item 4): preflights and actual responses of the
 * real gateway on a loopback port, for the default (no origin allowed), a
 * listed origin and `*`.
 */
import assert from "node:assert/strict";
import { parseConfig } from "../src/config/schema.ts";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";

const APP = "https://app.example.com";

async function withGateway(origins: string[] | null, fn: (gw: TestGateway) => Promise<void>) {
  const gw = await startTestGateway({
    configure: (c) => {
      if (origins) c.cors.allowed_origins = origins;
    },
  });
  try {
    await fn(gw);
  } finally {
    await gw.close();
  }
}

function preflight(gw: TestGateway, path: string, origin: string, method = "POST") {
  return fetch(`${gw.url}${path}`, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": method,
      "access-control-request-headers": "authorization, content-type, x-stainless-os",
    },
  });
}

function chat(gw: TestGateway, headers: Record<string, string>) {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${gw.apiKey}`,
      ...headers,
    },
    body: JSON.stringify({ model: "demo/echo", messages: [{ role: "user", content: "hi" }] }),
  });
}

Deno.test("CORS off by default: preflights get no grant, responses no CORS headers", async () => {
  await withGateway(null, async (gw) => {
    const pf = await preflight(gw, "/v1/chat/completions", APP);
    await pf.body?.cancel();
    assert.equal(pf.status, 204);
    assert.equal(pf.headers.get("access-control-allow-origin"), null);
    const res = await chat(gw, { origin: APP });
    await res.body?.cancel();
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("access-control-allow-origin"), null);
    assert.equal(res.headers.get("access-control-expose-headers"), null);
    // An OPTIONS that is not a preflight is still an unsupported method.
    const plain = await fetch(`${gw.url}/v1/chat/completions`, { method: "OPTIONS" });
    await plain.body?.cancel();
    assert.equal(plain.status, 405);
  });
});

Deno.test("CORS: an allowed origin gets a full preflight grant and exposed headers", async () => {
  await withGateway([APP], async (gw) => {
    const pf = await preflight(gw, "/v1/chat/completions", APP);
    await pf.body?.cancel();
    assert.equal(pf.status, 204);
    assert.equal(pf.headers.get("access-control-allow-origin"), APP);
    assert.equal(pf.headers.get("access-control-allow-methods"), "POST");
    assert.equal(
      pf.headers.get("access-control-allow-headers"),
      "authorization, content-type, x-stainless-os",
    );
    assert.equal(pf.headers.get("access-control-max-age"), "600");
    assert.equal(pf.headers.get("access-control-allow-credentials"), null);
    assert.match(pf.headers.get("vary") ?? "", /Origin/);

    // GET paths grant GET and HEAD.
    const models = await preflight(gw, "/v1/models", APP, "GET");
    await models.body?.cancel();
    assert.equal(models.headers.get("access-control-allow-methods"), "GET, HEAD");

    // A method the path does not serve, another origin: no grant.
    const del = await preflight(gw, "/v1/chat/completions", APP, "DELETE");
    await del.body?.cancel();
    assert.equal(del.headers.get("access-control-allow-origin"), null);
    const other = await preflight(gw, "/v1/chat/completions", "https://evil.example.com");
    await other.body?.cancel();
    assert.equal(other.headers.get("access-control-allow-origin"), null);
    // Unknown paths stay 404.
    const unknown = await preflight(gw, "/v1/nothing", APP);
    await unknown.body?.cancel();
    assert.equal(unknown.status, 404);

    const res = await chat(gw, { origin: APP });
    await res.json();
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("access-control-allow-origin"), APP);
    const exposed = (res.headers.get("access-control-expose-headers") ?? "").split(", ");
    for (
      const h of [
        "x-receipt-id",
        "x-aci-version",
        "x-aci-keyset-digest",
        "server-timing",
        "x-ratelimit-remaining",
        "x-ratelimit-remaining-tokens",
      ]
    ) {
      assert.ok(exposed.includes(h), `${h} exposed`);
      assert.ok(res.headers.get(h) !== null, `${h} present`);
    }
    // An E2EE v2 answer's headers are readable by a browser client too.
    for (const h of ["x-e2ee-applied", "x-e2ee-version", "x-e2ee-algo"]) {
      assert.ok(exposed.includes(h), `${h} exposed`);
    }
    assert.equal(res.headers.get("timing-allow-origin"), APP);
    // Errors carry the grant too (a script must be able to read a 401).
    const bad = await chat(gw, { origin: APP, authorization: "Bearer nope" });
    await bad.body?.cancel();
    assert.equal(bad.status, 401);
    assert.equal(bad.headers.get("access-control-allow-origin"), APP);
    const evil = await chat(gw, { origin: "https://evil.example.com" });
    await evil.body?.cancel();
    assert.equal(evil.headers.get("access-control-allow-origin"), null);
  });
});

Deno.test("CORS: * allows any origin without credentials", async () => {
  await withGateway(["*"], async (gw) => {
    const pf = await preflight(gw, "/v1/messages", "http://localhost:5173");
    await pf.body?.cancel();
    assert.equal(pf.headers.get("access-control-allow-origin"), "*");
    const res = await chat(gw, { origin: "http://localhost:5173" });
    await res.body?.cancel();
    assert.equal(res.headers.get("access-control-allow-origin"), "*");
  });
});

Deno.test("CORS: allowed_origins entries must be origins", () => {
  const base = JSON.parse(
    Deno.readTextFileSync(new URL("../config/example.json", import.meta.url)),
  );
  for (const bad of ["https://app.example.com/", "app.example.com", "https://a.com/path", ""]) {
    assert.throws(
      () => parseConfig(JSON.stringify({ ...base, cors: { allowed_origins: [bad] } })),
      /cors\.allowed_origins/,
    );
  }
  const ok = parseConfig(
    JSON.stringify({ ...base, cors: { allowed_origins: [APP, "http://[::1]:8080", "*"] } }),
  );
  assert.deepEqual(ok.cors.allowed_origins, [APP, "http://[::1]:8080", "*"]);
});
