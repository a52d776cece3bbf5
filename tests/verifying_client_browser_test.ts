/**
 * The verifying client in a real browser (headless Debian Chromium): a page
 * on its own loopback origin imports the library's browser bundle (what
 * `deno task client-browser` writes) and the real `openai` SDK's browser
 * build, and points the SDK (`dangerouslyAllowBrowser`) with the library's
 * fetch at the real gateway (CORS allows the page's origin). In the page: a
 * chat answer and a stream verified (receipt, body hashes, log inclusion),
 * E2EE applied without being asked for, TLS pinning reported unavailable; a
 * loopback proxy flipping one byte of the answer makes the SDK call fail with
 * the library's typed error; a TDX quote (forged under a pinned test root,
 * collateral supplied as JSON) verified by the DCAP code in the page, an
 * SEV-SNP report under pinned AMD roots likewise; and,
 * over https, E2EE applied although the policy said off (nothing is pinned,
 * so only E2EE protects the prompt) and a tools request refused.
 */
import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import { launchChromium } from "./support/chromium.ts";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { startTamperingProxy } from "./support/tampering_proxy.ts";
import { forgeTdxEnvironment } from "./support/tdx_forge.ts";
import { forgeSnpEnvironment } from "./support/snp_forge.ts";
import { bundleBrowserClient } from "../src/client/browser/build.ts";
import { bytesToHex, hexToBytes } from "../src/aci/hex.ts";
import { issueServerCert, makeTestCa } from "./support/tls_servers.ts";
import type { QuoteProvider } from "../src/attestation/quote_provider.ts";

const ROOT = new URL("../", import.meta.url);

/** The real `openai` package (the version deno.json pins) bundled for the browser. */
async function openaiBrowserBuild(): Promise<string> {
  const spec = JSON.parse(await Deno.readTextFile(new URL("deno.json", ROOT))).imports.openai;
  const dir = await Deno.makeTempDir({ prefix: "openai-browser-" });
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["bundle", "--quiet", "--platform", "browser", "--format", "esm", "-o", "o.js", spec],
      cwd: dir,
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    return await Deno.readTextFile(`${dir}/o.js`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Both scripts, built once for the file's tests. */
let scripts: Promise<[string, string]> | null = null;

/** The app's origin: a blank page and the two scripts. */
async function startApp() {
  scripts ??= Promise.all([bundleBrowserClient().then((b) => b.js), openaiBrowserBuild()]);
  const [client, openai] = await scripts;
  const js = { "content-type": "text/javascript" };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/client.js") return new Response(client, { headers: js });
    if (path === "/openai.js") return new Response(openai, { headers: js });
    return new Response("<!doctype html><title>app</title>", {
      headers: { "content-type": "text/html" },
    });
  });
  return { origin: `http://127.0.0.1:${server.addr.port}`, close: () => server.shutdown() };
}

interface PageResult {
  content?: string;
  streamed?: string;
  verified?: string;
  streamVerified?: string;
  verdicts?: {
    ok: boolean;
    verified: string[];
    checks: { name: string; ok: boolean; detail: string }[];
  }[];
  tlsPinning?: boolean;
  pinningAvailable?: boolean;
  error?: { name: string; code?: string; typed: boolean; failed: string[]; message: string };
}

/** Runs one SDK call (and, with `stream`, a streamed one) through the library in the page. */
function inPage(page: Page, baseURL: string, apiKey: string, opts: unknown): Promise<PageResult> {
  return page.evaluate(
    async (baseURL: string, apiKey: string, opts: Record<string, unknown>) => {
      // Specifiers the page resolves against its origin (not module graph entries here).
      const [libUrl, sdkUrl] = ["/client.js", "/openai.js"];
      const lib = await import(libUrl);
      const OpenAI = (await import(sdkUrl)).default;
      const verdicts: unknown[] = [];
      const trust = opts.quoteTrust as Record<string, unknown> | undefined;
      const f = lib.verifyingFetch({
        baseURL,
        policy: opts.policy,
        quoteTrust: trust
          ? {
            ...trust,
            tdxRootCaDer: trust.tdxRootCaDer
              ? Uint8Array.from(trust.tdxRootCaDer as number[])
              : undefined,
            // SEV-SNP: the pinned AMD roots and the chip's VCEK, as a page would hold them.
            snp: trust.snp
              ? (({ product, askDer, arkDer, vcekDer }) => ({
                roots: [{
                  product,
                  askDer: Uint8Array.from(askDer),
                  arkDer: Uint8Array.from(arkDer),
                }],
                vcek: { get: () => Promise.resolve(Uint8Array.from(vcekDer)) },
              }))(
                trust.snp as {
                  product: string;
                  askDer: number[];
                  arkDer: number[];
                  vcekDer: number[];
                },
              )
              : undefined,
          }
          : undefined,
        onVerdict: (v: { ok: boolean; verified: string[]; checks: unknown[] }) =>
          verdicts.push({ ok: v.ok, verified: v.verified, checks: v.checks }),
      });
      const client = new OpenAI({
        baseURL,
        apiKey,
        fetch: f,
        maxRetries: 0,
        dangerouslyAllowBrowser: true,
      });
      const out: Record<string, unknown> = {
        tlsPinning: f.tlsPinning,
        pinningAvailable: lib.TLS_PINNING_AVAILABLE,
        verdicts,
      };
      try {
        const tools = opts.tools
          ? [{
            type: "function",
            function: { name: "lookup", parameters: { type: "object", properties: {} } },
          }]
          : undefined;
        const r = await client.chat.completions.create({
          model: "demo/echo",
          messages: [{ role: "user", content: "hello from the page" }],
          ...(tools ? { tools } : {}),
        }).withResponse();
        out.content = r.data.choices[0].message.content;
        out.verified = r.response.headers.get("x-aci-verified");
        if (opts.stream) {
          const s = await client.chat.completions.create({
            model: "demo/echo",
            messages: [{ role: "user", content: "stream to the page" }],
            stream: true,
          }).withResponse();
          out.streamVerified = s.response.headers.get("x-aci-verified");
          let text = "";
          for await (const c of s.data) text += c.choices[0]?.delta?.content ?? "";
          out.streamed = text;
        }
      } catch (e) {
        // The SDK wraps what its fetch threw: find the library's own error in the causes.
        let x: unknown = e;
        while (x instanceof Error && !(x instanceof lib.AciVerificationError) && x.cause) {
          x = x.cause;
        }
        const err = x as {
          name: string;
          code?: string;
          message: string;
          checks?: { name: string; ok: boolean }[];
        };
        out.error = {
          name: err.name,
          code: err.code,
          typed: x instanceof lib.AciVerificationError,
          failed: (err.checks ?? []).filter((c) => !c.ok).map((c) => c.name),
          message: err.message,
        };
      } finally {
        f.close();
      }
      return out;
    },
    baseURL,
    apiKey,
    opts as Record<string, unknown>,
  ) as Promise<PageResult>;
}

async function withBrowser(
  gwOpts: (appOrigin: string) => Parameters<typeof startTestGateway>[0],
  body: (page: Page, gw: TestGateway) => Promise<void>,
  chromiumArgs: string[] = [],
) {
  const app = await startApp();
  const gw = await startTestGateway(gwOpts(app.origin));
  const browser = await launchChromium(chromiumArgs);
  try {
    const page = await browser.newPage();
    await page.goto(`${app.origin}/`);
    await body(page, gw);
  } finally {
    await browser.close();
    await gw.close();
    await app.close();
  }
}

const cors = (origin: string) => ({
  configure: (c: { cors: { allowed_origins: string[] } }) => {
    c.cors.allowed_origins = [origin];
  },
});

Deno.test("verifying client in Chromium: openai SDK answers verified (receipt, inclusion), E2EE automatic, no TLS pinning, a flipped byte refused", async () => {
  await withBrowser(cors, async (page, gw) => {
    const policy = { allow_dev_evidence: true, inclusion: "required" };
    const ok = await inPage(page, gw.baseURL, gw.apiKey, { policy, stream: true });
    assert.equal(ok.error, undefined, JSON.stringify(ok.error));
    assert.match(ok.content ?? "", /hello from the page/);
    assert.match(ok.streamed ?? "", /stream to the page/);
    const verified = (ok.verified ?? "").split(",");
    for (const c of ["attestation", "e2ee", "receipt-signature", "body-hashes", "log-inclusion"]) {
      assert.ok(verified.includes(c), `${c} in ${ok.verified}`);
    }
    assert.ok(!verified.includes("tls-pin"), ok.verified);
    assert.ok((ok.streamVerified ?? "").split(",").includes("e2ee"), ok.streamVerified);
    // Both answers' verdicts: every check passed, inclusion among them.
    assert.equal(ok.verdicts?.length, 2);
    for (const v of ok.verdicts!) {
      assert.ok(v.ok && v.checks.every((c) => c.ok), JSON.stringify(v));
      assert.ok(v.checks.some((c) => c.name === "receipt.log_inclusion" && c.ok));
      assert.ok(v.checks.some((c) => c.name === "receipt.response_body_hash" && c.ok));
    }
    // The library says, in the browser, that it cannot pin TLS.
    assert.equal(ok.tlsPinning, false);
    assert.equal(ok.pinningAvailable, false);
    const pin = ok.verdicts![0].checks.find((c) => c.name === "tls.pin");
    assert.match(pin?.detail ?? "", /TLS pinning is impossible in this runtime/);

    // A loopback proxy flipping one byte of the answer: the typed error reaches the page.
    const proxy = startTamperingProxy(gw.url, { flip: {} });
    try {
      const bad = await inPage(page, `${proxy.url}/v1`, gw.apiKey, { policy });
      assert.equal(bad.content, undefined, "no answer delivered");
      assert.ok(bad.error?.typed, JSON.stringify(bad.error));
      assert.equal(bad.error?.name, "AciVerificationError");
      assert.equal(bad.error?.code, "receipt_invalid");
      assert.ok(bad.error?.failed.includes("receipt.response_body_hash"), JSON.stringify(bad));
      assert.ok(proxy.seen.includes("POST /v1/chat/completions"), proxy.seen.join());
      assert.equal(bad.verdicts?.length, 1);
      assert.equal(bad.verdicts?.[0].ok, false);
    } finally {
      await proxy.close();
    }
  });
});

Deno.test("verifying client in Chromium: a TDX quote verified by the DCAP code in the page (pinned root, supplied collateral), another MRTD refused, a PCS closed to the page refused saying why", async () => {
  const forge = await forgeTdxEnvironment();
  const MRTD = new Uint8Array(48).fill(0x3c);
  const quotes: QuoteProvider = {
    name: "forged-tdx",
    hardware: true,
    getQuote: (rd) =>
      Promise.resolve({
        tee_type: "tdx",
        provider: "test",
        quote: forge.mintQuote(rd, { mrTd: MRTD }),
      }),
  };
  await withBrowser((origin) => ({ ...cors(origin), quotes }), async (page, gw) => {
    const quoteTrust = {
      tdxCollateralJson: forge.collateralJson,
      tdxRootCaDer: Array.from(forge.rootCertDer),
    };
    const listed = await inPage(page, gw.baseURL, gw.apiKey, {
      quoteTrust,
      policy: { measurements: [{ tee_type: "tdx", mrtd: bytesToHex(MRTD) }] },
    });
    assert.equal(listed.error, undefined, JSON.stringify(listed.error));
    assert.match(listed.verified ?? "", /hardware-quote/);
    const quote = listed.verdicts![0].checks.find((c) => c.name === "report.hardware_evidence");
    assert.ok(quote?.ok, JSON.stringify(quote));
    assert.match(quote.detail, /TDX v4 quote verified/);
    const other = await inPage(page, gw.baseURL, gw.apiKey, {
      quoteTrust,
      policy: { measurements: [{ tee_type: "tdx", mrtd: "ab".repeat(48) }] },
    });
    assert.equal(other.error?.code, "policy_refused", JSON.stringify(other.error));
    assert.ok(other.error?.typed);
    // Without the pinned root the same quote does not verify under Intel's (default) root.
    const unpinned = await inPage(page, gw.baseURL, gw.apiKey, {
      quoteTrust: { tdxCollateralJson: forge.collateralJson },
      policy: { accept_any_measurement: true },
    });
    assert.equal(unpinned.error?.code, "attestation_failed", JSON.stringify(unpinned.error));
    // No collateral given and a PCS that does not allow the page's origin: refused, saying why.
    const noCors = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      () => new Response("{}"),
    );
    try {
      const unreachable = await inPage(page, gw.baseURL, gw.apiKey, {
        quoteTrust: {
          tdxRootCaDer: Array.from(forge.rootCertDer),
          pcsBaseUrl: `http://127.0.0.1:${noCors.addr.port}`,
        },
        policy: { accept_any_measurement: true },
      });
      assert.equal(unreachable.error?.code, "attestation_failed");
      assert.ok(unreachable.error?.typed);
      assert.match(
        unreachable.error?.message ?? "",
        /unreachable from this page.*tdxCollateralJson/,
      );
      assert.equal(unreachable.content, undefined);
    } finally {
      await noCors.shutdown();
    }
  });
});

Deno.test("verifying client in Chromium over https: no pinning, so E2EE is applied even when the policy says off, and a tools request is refused", async () => {
  const cert = await issueServerCert(await makeTestCa());
  // The browser trusts exactly this key (as a user who installed the certificate would).
  const spkiB64 = btoa(String.fromCharCode(...hexToBytes(cert.spkiSha256)));
  await withBrowser(
    (origin) => ({ ...cors(origin), tls: cert }),
    async (page, gw) => {
      assert.match(gw.baseURL, /^https:/);
      const policy = { allow_dev_evidence: true, e2ee: "off" };
      const ok = await inPage(page, gw.baseURL, gw.apiKey, { policy });
      assert.equal(ok.error, undefined, JSON.stringify(ok.error));
      assert.match(ok.content ?? "", /hello from the page/);
      const verified = (ok.verified ?? "").split(",");
      assert.ok(verified.includes("e2ee") && !verified.includes("tls-pin"), ok.verified);
      const pin = ok.verdicts![0].checks.find((c) => c.name === "tls.pin");
      assert.match(pin?.detail ?? "", /impossible in this runtime .*relying on E2EE/);
      // Tools travel in clear under E2EE v2: with nothing else protecting them, refused.
      const tools = await inPage(page, gw.baseURL, gw.apiKey, { policy, tools: true });
      assert.equal(tools.content, undefined);
      assert.ok(tools.error?.typed, JSON.stringify(tools.error));
      assert.equal(tools.error?.code, "e2ee_unavailable");
    },
    [`--ignore-certificate-errors-spki-list=${spkiB64}`],
  );
});

Deno.test("verifying client in Chromium: an SEV-SNP report verified in the page under pinned AMD roots, another MEASUREMENT refused", async () => {
  const forge = await forgeSnpEnvironment();
  const MEASUREMENT = new Uint8Array(48).fill(0x5e);
  const quotes: QuoteProvider = {
    name: "forged-snp",
    hardware: true,
    getQuote: (rd) =>
      Promise.resolve({
        tee_type: "sev_snp",
        provider: "test",
        quote: forge.mintReport(rd, { measurement: MEASUREMENT }),
      }),
  };
  await withBrowser((origin) => ({ ...cors(origin), quotes }), async (page, gw) => {
    const quoteTrust = {
      snp: {
        product: "Milan",
        askDer: Array.from(forge.askDer),
        arkDer: Array.from(forge.arkDer),
        vcekDer: Array.from(forge.vcekDer),
      },
    };
    const ok = await inPage(page, gw.baseURL, gw.apiKey, {
      quoteTrust,
      policy: { measurements: [{ tee_type: "sev_snp", measurement: bytesToHex(MEASUREMENT) }] },
    });
    assert.equal(ok.error, undefined, JSON.stringify(ok.error));
    assert.match(ok.verified ?? "", /hardware-quote/);
    const quote = ok.verdicts![0].checks.find((c) => c.name === "report.hardware_evidence");
    assert.ok(quote?.ok, JSON.stringify(quote));
    assert.match(quote.detail, /SEV-SNP report verified under the pinned Milan ARK/);
    const other = await inPage(page, gw.baseURL, gw.apiKey, {
      quoteTrust,
      policy: { measurements: [{ tee_type: "sev_snp", measurement: "00".repeat(48) }] },
    });
    assert.equal(other.error?.code, "policy_refused", JSON.stringify(other.error));
    // No AMD roots given: refused, not skipped.
    const none = await inPage(page, gw.baseURL, gw.apiKey, {
      policy: { accept_any_measurement: true },
    });
    assert.equal(none.error?.code, "attestation_failed", JSON.stringify(none.error));
  });
});
