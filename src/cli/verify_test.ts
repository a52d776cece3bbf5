import assert from "node:assert/strict";
import { sha256Prefixed } from "../aci/digest.ts";
import { type LegacySigningAlgo, signatureEnvelope } from "../aci/legacy.ts";
import { generateWorkloadKeys } from "../aci/signer.ts";
import { makeLegacyReport, makeReceipt, makeReport } from "../verify/dev_report_fixture.ts";
import { runVerify, type VerifyDeps } from "./verify.ts";

const enc = new TextEncoder();
const REQ = enc.encode('{"model":"m","messages":[{"role":"user","content":"hi"}]}');
const RES = enc.encode('data: {"id":"c1"}\n\ndata: [DONE]\n\n');
const API_KEY = "sk-test-secret-key-123";
const keys = generateWorkloadKeys();
const { keyset } = makeReport(keys, null);
const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

const receipt = makeReceipt(keys, keyset, "rcpt-" + "12".repeat(16), REQ, RES);

function deps(lines: string[], apiKey?: string): VerifyDeps {
  return {
    apiKey,
    fetch: globalThis.fetch,
    readFile: (p) => Deno.readFile(p),
    print: (l) => lines.push(l),
    randomBytes: random,
    now: () => 1_800_000_000_000,
  };
}

async function writeFiles(): Promise<Record<string, string>> {
  const dir = await Deno.makeTempDir({ prefix: "aci-verify-" });
  const nonce = "ee".repeat(32);
  const files: Record<string, string> = {
    dir,
    nonce,
    report: `${dir}/report.json`,
    receipt: `${dir}/receipt.json`,
    request: `${dir}/request.json`,
    response: `${dir}/response.sse`,
    bad: `${dir}/bad.sse`,
    apiKey: `${dir}/api-key`,
  };
  await Deno.writeTextFile(files.apiKey, `${API_KEY}\n`);
  await Deno.writeTextFile(files.report, JSON.stringify(makeReport(keys, nonce).report, null, 2));
  await Deno.writeTextFile(files.receipt, JSON.stringify(receipt));
  await Deno.writeFile(files.request, REQ);
  await Deno.writeFile(files.response, RES);
  const bad = RES.slice();
  bad[3] ^= 1;
  await Deno.writeFile(files.bad, bad);
  return files;
}

const checkLines = (lines: string[]) => lines.filter((l) => /^(PASS|FAIL) /.test(l));

Deno.test("cli: receipt and report files verify; every check prints one PASS line", async () => {
  const f = await writeFiles();
  try {
    const lines: string[] = [];
    const args = [
      "--receipt",
      f.receipt,
      "--report",
      f.report,
      "--nonce",
      f.nonce,
      "--request",
      f.request,
    ];
    const code = await runVerify([...args, `--response=${f.response}`, "--allow-dev"], deps(lines));
    assert.equal(code, 0, lines.join("\n"));
    const checks = checkLines(lines);
    assert.ok(checks.length >= 10);
    assert.ok(checks.every((l) => l.startsWith("PASS ")));
    assert.ok(checks.some((l) => /^PASS receipt\.signature — /.test(l)));
    assert.ok(lines.some((l) => /WARNING: quote is development evidence, not hardware/.test(l)));
    assert.match(lines.at(-1)!, /^RESULT: all \d+ checks passed$/);

    // Without --allow-dev the development quote is a failure.
    const strict: string[] = [];
    assert.equal(await runVerify([...args, "--response", f.response], deps(strict)), 1);
    assert.ok(
      strict.some((l) =>
        /^FAIL report\.hardware_evidence — quote is development evidence, not hardware/.test(l)
      ),
    );
  } finally {
    await Deno.remove(f.dir, { recursive: true });
  }
});

Deno.test("cli: a tampered response file or a wrong nonce fails with exit code 1", async () => {
  const f = await writeFiles();
  try {
    const lines: string[] = [];
    const code = await runVerify(
      [
        "--receipt",
        f.receipt,
        "--report",
        f.report,
        "--nonce",
        f.nonce,
        "--response",
        f.bad,
        "--allow-dev",
      ],
      deps(lines),
    );
    assert.equal(code, 1);
    assert.deepEqual(
      checkLines(lines).filter((l) => l.startsWith("FAIL")).map((l) => l.split(" ")[1]),
      [
        "receipt.response_body_hash",
      ],
    );
    const replay: string[] = [];
    assert.equal(
      await runVerify([
        "--receipt",
        f.receipt,
        "--report",
        f.report,
        "--nonce",
        "ff".repeat(32),
        "--allow-dev",
      ], deps(replay)),
      1,
    );
    assert.ok(replay.some((l) => l.startsWith("FAIL report.report_data")));
  } finally {
    await Deno.remove(f.dir, { recursive: true });
  }
});

Deno.test("cli: usage errors exit 2", async () => {
  const f = await writeFiles();
  try {
    const cases = [
      [],
      ["--receipt", f.receipt],
      ["--receipt", f.receipt, "--report", f.report, "--signature", f.receipt],
      ["--report", f.report, "--bogus"],
      ["--report"],
      ["--report", f.report, "--report", f.report],
      ["--receipt", `${f.dir}/missing.json`, "--report", f.report],
      ["--report", f.report, "--nonce", "not-hex"],
      ["stray"],
    ];
    for (const args of cases) {
      const lines: string[] = [];
      assert.equal(await runVerify(args, deps(lines)), 2, args.join(" "));
      assert.ok(lines.some((l) => l.startsWith("usage: verify")));
    }
    const help: string[] = [];
    assert.equal(await runVerify(["--help"], deps(help)), 0);
  } finally {
    await Deno.remove(f.dir, { recursive: true });
  }
});

interface Seen {
  path: string;
  nonce: string | null;
  algo: string | null;
  auth: string | null;
}

function serve(opts: { staleNonce?: string } = {}) {
  const seen: Seen[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const url = new URL(req.url);
    const nonce = url.searchParams.get("nonce");
    const algo = url.searchParams.get("signing_algo");
    seen.push({ path: url.pathname, nonce, algo, auth: req.headers.get("authorization") });
    if (url.pathname === "/v1/aci/attestation") {
      return Response.json(makeReport(keys, opts.staleNonce ?? nonce).report);
    }
    if (url.pathname === "/v1/attestation/report") {
      return Response.json(
        makeLegacyReport(keys, (algo ?? "ecdsa") as LegacySigningAlgo, nonce, random),
      );
    }
    if (req.headers.get("authorization") !== `Bearer ${API_KEY}`) {
      return Response.json({ error: { message: "unauthorized", type: "unauthorized" } }, {
        status: 401,
      });
    }
    if (url.pathname === `/v1/aci/receipts/${receipt.receipt_id}`) return Response.json(receipt);
    if (url.pathname === `/v1/signature/${receipt.receipt_id}`) {
      const env = signatureEnvelope(
        receipt,
        sha256Prefixed(REQ),
        sha256Prefixed(RES),
        (algo ?? "ecdsa") as LegacySigningAlgo,
        keys,
      );
      return Response.json(env);
    }
    return new Response("not found", { status: 404 });
  });
  const base = `http://127.0.0.1:${server.addr.port}`;
  return { seen, base, close: () => server.shutdown() };
}

Deno.test("cli: report URL is fetched with a fresh random nonce; the API key goes only to the receipt URL", async () => {
  const s = serve();
  try {
    const lines: string[] = [];
    const code = await runVerify([
      "--receipt",
      `${s.base}/v1/aci/receipts/${receipt.receipt_id}`,
      "--report",
      `${s.base}/v1/aci/attestation`,
      "--allow-dev",
    ], deps(lines, API_KEY));
    assert.equal(code, 0, lines.join("\n"));
    const reportReq = s.seen.find((x) => x.path === "/v1/aci/attestation")!;
    assert.match(reportReq.nonce!, /^[0-9a-f]{64}$/);
    assert.equal(reportReq.auth, null, "the public report endpoint never sees the key");
    assert.equal(
      s.seen.find((x) => x.path.startsWith("/v1/aci/receipts/"))!.auth,
      `Bearer ${API_KEY}`,
    );
    assert.ok(lines.some((l) => l.includes(`fresh nonce ${reportReq.nonce}`)));
    assert.ok(
      lines.some((l) => l.startsWith("PASS report.report_data") && l.includes(reportReq.nonce!)),
    );
    assert.ok(!lines.join("\n").includes(API_KEY), "the key is never printed");

    // A second run uses another nonce.
    await runVerify(["--report", `${s.base}/v1/aci/attestation`, "--allow-dev"], deps([]));
    const nonces = s.seen.filter((x) => x.path === "/v1/aci/attestation").map((x) => x.nonce);
    assert.equal(new Set(nonces).size, 2);
  } finally {
    await s.close();
  }
});

Deno.test("cli: a server replaying a report for another nonce fails; a 401 is a clear failure", async () => {
  const s = serve({ staleNonce: "00".repeat(32) });
  try {
    const lines: string[] = [];
    assert.equal(
      await runVerify(["--report", `${s.base}/v1/aci/attestation`, "--allow-dev"], deps(lines)),
      1,
    );
    assert.ok(lines.some((l) => l.startsWith("FAIL report.report_data")));
    assert.ok(lines.some((l) => l.startsWith("FAIL report.quote_report_data")));

    const unauth: string[] = [];
    const code = await runVerify([
      "--receipt",
      `${s.base}/v1/aci/receipts/${receipt.receipt_id}`,
      "--report",
      `${s.base}/v1/aci/attestation`,
    ], deps(unauth));
    assert.equal(code, 1);
    assert.ok(unauth.some((l) => /^FAIL input — .*HTTP 401: \S/.test(l)));
  } finally {
    await s.close();
  }
});

Deno.test("cli: legacy signature envelope over URLs, for both signing algorithms", async () => {
  const s = serve();
  const f = await writeFiles();
  try {
    for (const algo of ["ecdsa", "ed25519"]) {
      const lines: string[] = [];
      const code = await runVerify([
        "--signature",
        `${s.base}/v1/signature/${receipt.receipt_id}?signing_algo=${algo}`,
        "--api-key-file",
        f.apiKey,
        "--report",
        `${s.base}/v1/attestation/report`,
        "--request",
        f.request,
        "--response",
        f.response,
        "--allow-dev",
      ], deps(lines));
      assert.equal(code, 0, lines.join("\n"));
      const legacyReq = s.seen.filter((x) => x.path === "/v1/attestation/report").at(-1)!;
      assert.equal(legacyReq.algo, algo, "the report is asked for the envelope's algorithm");
      assert.match(legacyReq.nonce!, /^[0-9a-f]{64}$/);
      for (
        const name of [
          "legacy.quote_report_data",
          "signature.signature",
          "signature.report_address",
          "receipt.signature",
        ]
      ) {
        assert.ok(lines.some((l) => l.startsWith(`PASS ${name} `)), name);
      }
    }
  } finally {
    await s.close();
    await Deno.remove(f.dir, { recursive: true });
  }
});

Deno.test("cli: --api-key on the command line is refused (deno task echoes it); errors show the server's message", async () => {
  const lines: string[] = [];
  assert.equal(await runVerify(["--report", "r.json", "--api-key", API_KEY], deps(lines)), 2);
  assert.match(lines[0], /--api-key is not accepted: .*GATEWAY_API_KEY.*--api-key-file/);
  assert.ok(!lines.join("\n").includes(API_KEY));

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const url = new URL(req.url);
    if (url.searchParams.has("workload_keyset_digest") && url.searchParams.has("nonce")) {
      return Response.json({
        error: { message: "nonce cannot be combined with workload_keyset_digest", type: "x" },
      }, { status: 400 });
    }
    return Response.json({ error: { message: "no report for that keyset digest", type: "x" } }, {
      status: 404,
    });
  });
  try {
    const out: string[] = [];
    const url = `http://127.0.0.1:${server.addr.port}/v1/aci/attestation?workload_keyset_digest=` +
      `sha256:${"0".repeat(64)}`;
    assert.equal(await runVerify(["--report", url, "--allow-dev"], deps(out)), 1);
    // An archived report is asked for without a nonce; the server's own message is shown.
    assert.deepEqual(out, [
      `FAIL input — http://127.0.0.1:${server.addr.port}/v1/aci/attestation answered HTTP 404: ` +
      "no report for that keyset digest",
    ]);
  } finally {
    await server.shutdown();
  }
});
