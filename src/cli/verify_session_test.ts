import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { defaultGpuDeps } from "../verify/nvidia/deps.ts";
import {
  collateralWith,
  FULL_RIMS,
  fullNrasPayload,
  vector,
} from "../../tests/support/nvidia_fixtures.ts";
import { runVerify } from "./verify.ts";

const FULL = vector("hopper-550.90.07-FULL");

function sessionDoc(report: Record<string, unknown>, claim = "asserted") {
  const bytes = new TextEncoder().encode(JSON.stringify(report));
  return {
    api_version: "aci/1",
    claims: { gpu_attested: { status: claim } },
    evidence: {
      digest: "sha256:" + createHash("sha256").update(bytes).digest("hex"),
      data: "data:application/json;base64," + btoa(String.fromCharCode(...bytes)),
    },
  };
}

async function run(args: string[], apiKey?: string) {
  const lines: string[] = [];
  const code = await runVerify(args, {
    fetch: (input, init) => fetch(input, init),
    apiKey,
    readFile: () => Promise.reject(new Error("no files here")),
    print: (l) => lines.push(l),
    randomBytes: (n) => new Uint8Array(n),
    now: () => Date.parse("2026-01-01T00:00:00Z"),
    gpu: defaultGpuDeps({ collateral: collateralWith(FULL_RIMS) }),
  });
  return { code, lines };
}

Deno.test("verify --session URL: fetched with the API key (GATEWAY_API_KEY), checked at the given times", async () => {
  const doc = sessionDoc({
    request_nonce: FULL.nonce,
    nvidia_payload: JSON.stringify(fullNrasPayload()),
  });
  const auth: (string | null)[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    auth.push(req.headers.get("authorization"));
    return Response.json(doc);
  });
  const url = `http://127.0.0.1:${server.addr.port}/v1/aci/sessions/${"a".repeat(64)}`;
  try {
    const ok = await run([
      "--session",
      url,
      "--at",
      "2025-08-21T12:00:00Z",
      "--rim-at",
      "2025-10-24T12:00:00Z",
    ], "sk-test");
    assert.equal(ok.code, 0, ok.lines.join("\n"));
    assert.deepEqual(auth, ["Bearer sk-test"]);
    assert.match(
      ok.lines.at(-2)!,
      /^PASS gpu\.claim — evidence verdict pass \(asserted\).*claimed "asserted"$/,
    );
    // At the command's own clock the recorded OCSP answers are long stale.
    const now = await run(["--session", url], "sk-test");
    assert.equal(now.code, 1);
    assert.ok(now.lines.some((l) => l.startsWith("FAIL gpu[0].")), now.lines.join("\n"));
  } finally {
    await server.shutdown();
  }
});

Deno.test("verify --session: usage errors and records without GPU evidence", async () => {
  assert.equal((await run(["--session", "x.json", "--report", "r.json"])).code, 2);
  assert.equal((await run(["--session", "x.json", "--at", "yesterday"])).code, 2);
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (req) =>
      Response.json(
        new URL(req.url).pathname === "/none"
          ? sessionDoc({ request_nonce: FULL.nonce, nvidia_payload: null }, "unknown")
          : {
            ...sessionDoc({}),
            evidence: {
              digest: "sha256:" + "0".repeat(64),
              data: "data:application/json;base64,e30=",
            },
          },
      ),
  );
  const base = `http://127.0.0.1:${server.addr.port}`;
  try {
    const none = await run(["--session", `${base}/none`]);
    assert.equal(none.code, 1);
    assert.ok(
      none.lines.includes("FAIL gpu.payload — the session's report carries no GPU evidence"),
    );
    const tampered = await run(["--session", `${base}/tampered`]);
    assert.equal(tampered.code, 1);
    assert.match(
      tampered.lines[0],
      /^FAIL session\.evidence — evidence digest .* does not match its data$/,
    );
  } finally {
    await server.shutdown();
  }
});
