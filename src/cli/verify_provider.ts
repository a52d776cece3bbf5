/**
 * `verify --kind near-ai|tinfoil`: an auditor's offline check of a provider's
 * recorded evidence, without running a gateway. Prints one line per check
 * (`PASS|FAIL name — detail`); exit 0 when every check passes, 1 when any
 * fails, 2 on usage errors. `--at` judges collateral and certificates at the
 * instant the evidence was recorded. All I/O comes in through `deps` (main.ts
 * dispatches `verify --kind near-ai|tinfoil` here).
 */
import { parseArgs } from "node:util";
import { createHash, X509Certificate } from "node:crypto";
import {
  type Check,
  check,
  collateralFromDcapQvlJson,
  LocalCollateralSource,
  matchRelease,
  parseNearAiReport,
  parseTinfoilEvidence,
  snpReportHex,
  splitAskArkPem,
  tinfoilBinding,
  verifyNearAiReport,
  verifyNearSignature,
  verifyReleaseBundle,
  verifySnpReport,
  verifyTdxQuoteWithSource,
} from "../verify/mod.ts";

export interface ProviderVerifyDeps {
  readFile: (path: string) => Promise<Uint8Array>;
  print: (line: string) => void;
  /** Epoch ms when no `--at` is given. */
  now: () => number;
}

const PROVIDER_VERIFY_USAGE = [
  "usage: verify --kind near-ai --evidence <report.json> [--nonce <hex>] [--collateral <dcap-qvl.json>]...",
  "              [--at <ISO time>] [--tls-spki <hex>] [--signature <file> --request <file> --response <file>]",
  "       verify --kind tinfoil --evidence <attestation or bundle.json> --repo <owner/name>",
  "              --trusted-root <sigstore trusted_root.json> [--bundle <sigstore bundle.json>]",
  "              [--collateral <dcap-qvl.json>]... [--ask-ark <ask_ark.pem>] [--vcek <der>] [--at <ISO>] [--tls-spki <hex>]",
].join("\n");

const text = (b: Uint8Array) => new TextDecoder().decode(b);

class Usage extends Error {}

/** Collateral files keyed by the FMSPC their signed TCB Info names, for both PCK CA kinds. */
async function collateralFrom(paths: string[], deps: ProviderVerifyDeps) {
  const source = new LocalCollateralSource();
  for (const p of paths) {
    const c = collateralFromDcapQvlJson(text(await deps.readFile(p)));
    if (!c.ok) throw new Usage(`--collateral ${p}: ${c.reason}`);
    const fmspc = String(JSON.parse(c.collateral.tcbInfo).fmspc ?? "");
    if (!/^[0-9a-fA-F]{12}$/.test(fmspc)) throw new Usage(`--collateral ${p}: no FMSPC`);
    source.set(fmspc, "platform", c.collateral).set(fmspc, "processor", c.collateral);
  }
  return source;
}

async function nearAi(v: Record<string, unknown>, deps: ProviderVerifyDeps, at: number) {
  const report: unknown = JSON.parse(text(await deps.readFile(String(v.evidence))));
  const parsed = parseNearAiReport(report);
  if (!parsed.ok) return [check("near_ai.format", false, parsed.reason)];
  const checks: Check[] = [];
  let nonce = typeof v.nonce === "string" ? v.nonce.toLowerCase() : null;
  if (nonce === null) {
    nonce = (parsed.report.gateway.requestNonce ?? "").toLowerCase();
    checks.push(
      check("near_ai.freshness", false, "no --nonce: compared with the echoed nonce only"),
    );
  }
  if (!/^[0-9a-f]{64}$/.test(nonce)) throw new Usage("--nonce must be 32 bytes of hex");
  const source = await collateralFrom((v.collateral as string[] | undefined) ?? [], deps);
  const out = await verifyNearAiReport(parsed.report, {
    nonce,
    tdx: { source },
    now: at,
    observedSpkiSha256: typeof v["tls-spki"] === "string" ? v["tls-spki"] : undefined,
  });
  checks.push(...out.checks);
  if (v.signature) {
    const envelope: unknown = JSON.parse(text(await deps.readFile(String(v.signature))));
    if (!v.request || !v.response) throw new Usage("--signature needs --request and --response");
    checks.push(...verifyNearSignature(envelope, {
      requestBody: await deps.readFile(String(v.request)),
      responseBody: await deps.readFile(String(v.response)),
    }, [parsed.report.gateway, ...parsed.report.models].map((c) => c.signingAddress)));
  }
  return checks;
}

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
async function tinfoil(v: Record<string, unknown>, deps: ProviderVerifyDeps, at: number) {
  const raw: unknown = JSON.parse(text(await deps.readFile(String(v.evidence))));
  const parsed = parseTinfoilEvidence(raw);
  if (!parsed.ok) return [check("tinfoil.format", false, parsed.reason)];
  const ev = parsed.evidence;
  const checks: Check[] = [];
  let reportData: Uint8Array | null = null;
  const measured: { snpMeasurement?: string; rtmr1?: string; rtmr2?: string } = {};
  if (ev.document.platform === "tdx") {
    const source = await collateralFrom((v.collateral as string[] | undefined) ?? [], deps);
    const r = await verifyTdxQuoteWithSource(ev.document.report, { source, now: () => at });
    checks.push(check(
      "tinfoil.tdx_quote",
      r.ok,
      r.ok ? `verified (FMSPC ${r.fmspc}, TCB ${r.tcbStatus})` : `${r.stage}: ${r.reason}`,
    ));
    if (r.ok) {
      reportData = r.report.reportData;
      Object.assign(measured, { rtmr1: r.reportHex.rtmr1, rtmr2: r.reportHex.rtmr2 });
    }
  } else {
    if (!v["ask-ark"]) throw new Usage("an SEV-SNP attestation needs --ask-ark");
    const roots = splitAskArkPem(text(await deps.readFile(String(v["ask-ark"]))));
    if (!roots.ok) throw new Usage(`--ask-ark: ${roots.reason}`);
    const vcekDer = v.vcek ? await deps.readFile(String(v.vcek)) : ev.vcekDer;
    if (!vcekDer) throw new Usage("no VCEK in the evidence: give --vcek");
    const r = await verifySnpReport(ev.document.report, { vcekDer, ...roots, now: () => at });
    checks.push(
      check("tinfoil.snp_report", r.ok, r.ok ? "VCEK chain and signature verified" : r.reason),
    );
    if (r.ok) {
      reportData = r.report.reportData;
      measured.snpMeasurement = snpReportHex(r.report).measurement;
      checks.push(
        check("tinfoil.snp_debug", !r.debugAllowed, `debug ${r.debugAllowed ? "allowed" : "off"}`),
      );
    }
  }
  if (reportData !== null) {
    const b = tinfoilBinding(reportData);
    let spki = typeof v["tls-spki"] === "string" ? v["tls-spki"].toLowerCase() : null;
    if (spki === null && typeof (raw as Record<string, unknown>).enclaveCert === "string") {
      const cert = new X509Certificate(String((raw as Record<string, unknown>).enclaveCert));
      const der = cert.publicKey.export({ type: "spki", format: "der" });
      spki = createHash("sha256").update(der).digest("hex");
    }
    checks.push(check(
      "tinfoil.tls_binding",
      b.ok && spki !== null && b.tlsFingerprint === spki,
      !b.ok
        ? b.reason
        : spki === null
        ? `report binds TLS key ${b.tlsFingerprint}; no --tls-spki or enclaveCert to compare`
        : `report binds ${b.tlsFingerprint}; TLS key ${spki}`,
    ));
    if (b.ok) checks.push(check("tinfoil.hpke_key", true, b.hpkePublicKey));
  }
  const bundle = v.bundle
    ? JSON.parse(text(await deps.readFile(String(v.bundle))))
    : ev.sigstoreBundle;
  if (!v["trusted-root"] || !v.repo) throw new Usage("tinfoil needs --trusted-root and --repo");
  const root: unknown = JSON.parse(text(await deps.readFile(String(v["trusted-root"]))));
  const rel = verifyReleaseBundle(bundle, root, {
    repo: String(v.repo),
    oidcIssuer: "https://token.actions.githubusercontent.com",
    workflowRefPrefix: "refs/tags/",
  }, ev.releaseDigest ?? undefined);
  checks.push(check(
    "tinfoil.release",
    rel.ok,
    rel.ok
      ? `release ${rel.subjectDigest} signed by ${rel.signerUri}`
      : `${rel.code}: ${rel.reason}`,
  ));
  if (rel.ok) {
    const m = matchRelease(ev.document.platform, measured, rel.registers);
    checks.push(check("tinfoil.measurement", m.ok, m.ok ? "equals the release's" : m.reason));
  }
  return checks;
}

/** Runs the command; returns the exit code. */
export async function runProviderVerify(argv: string[], deps: ProviderVerifyDeps): Promise<number> {
  let checks: Check[];
  try {
    const { values: v } = parseArgs({
      args: argv,
      options: {
        kind: { type: "string" },
        evidence: { type: "string" },
        nonce: { type: "string" },
        collateral: { type: "string", multiple: true },
        at: { type: "string" },
        "tls-spki": { type: "string" },
        signature: { type: "string" },
        request: { type: "string" },
        response: { type: "string" },
        repo: { type: "string" },
        "trusted-root": { type: "string" },
        bundle: { type: "string" },
        "ask-ark": { type: "string" },
        vcek: { type: "string" },
      },
    });
    if (!v.evidence) throw new Usage("--evidence is required");
    const at = v.at === undefined ? deps.now() : Date.parse(v.at);
    if (!Number.isFinite(at)) throw new Usage("--at is not an ISO time");
    if (v.kind === "near-ai") checks = await nearAi(v, deps, at);
    else if (v.kind === "tinfoil") checks = await tinfoil(v, deps, at);
    else throw new Usage("--kind must be near-ai or tinfoil");
  } catch (e) {
    if (e instanceof Usage || (e instanceof TypeError && /option|argument/i.test(e.message))) {
      deps.print(`${e.message}\n${PROVIDER_VERIFY_USAGE}`);
      return 2;
    }
    deps.print(`FAIL input — ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
  for (const c of checks) deps.print(`${c.ok ? "PASS" : "FAIL"} ${c.name} — ${c.detail}`);
  const failures = checks.filter((c) => !c.ok).length;
  const ok = checks.length > 0 && failures === 0;
  // The last line as every `verify` mode ends.
  deps.print(
    ok
      ? `RESULT: all ${checks.length} checks passed`
      : `RESULT: ${failures} of ${checks.length} checks failed`,
  );
  return ok ? 0 : 1;
}
