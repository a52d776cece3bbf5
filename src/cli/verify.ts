/**
 * `verify`: the offline ACI verifier's command line. Checks a receipt (or a
 * legacy `/v1/signature` envelope) against an attestation report, and the
 * report against a fresh nonce when it is fetched from a URL. Prints one line
 * per check and exits 0 when all pass, 1 when any fails, 2 on usage errors.
 * All I/O comes in through `deps`; nothing here reads env, clock or network
 * directly. The API key is only ever sent as a bearer header to the receipt /
 * signature URL, and never printed; it comes from `GATEWAY_API_KEY` (read by
 * main.ts) or `--api-key-file`, never from the command line, which
 * `deno task` echoes to the terminal.
 */

import { type ParsedOptions, parseOptions, UsageError } from "./args.ts";
import {
  bytesToHex,
  jcs,
  leafHash,
  parseCheckpointBody,
  parseVerifierKey,
  receiptEntry,
  verifyInclusion,
  verifyNote,
} from "../aci/mod.ts";
import {
  allPassed,
  type AuditChoices,
  type AuditTrust,
  type Check,
  check,
  defaultGpuDeps,
  EVIDENCE_KINDS,
  evidenceContext,
  evidenceKind,
  extractKeyset,
  followLog,
  type GpuDeps,
  hardwareQuoteCheck,
  isRecord,
  keysetLogKeys,
  type QuoteCheck,
  verifyBundle,
  verifyLegacyReport,
  verifyReceipt,
  verifyReport,
  verifySessionGpu,
  verifySignatureEnvelope,
} from "../verify/mod.ts";
import { Buffer } from "node:buffer";
import { verifyE2eeResponse } from "../e2ee/mod.ts";
import { ACCEPTABLE_TCB_STATUSES, type AcceptableTcbStatus } from "../config/mod.ts";

/** Everything the command needs from the outside world. */
export interface VerifyDeps {
  fetch: typeof fetch;
  readFile: (path: string) => Promise<Uint8Array>;
  print: (line: string) => void;
  randomBytes: (n: number) => Uint8Array;
  /** Epoch milliseconds; enables the keyset `not_after` check. */
  now?: () => number;
  /** Hardware quote verifier (TDX / SEV-SNP); without it hardware quotes are reported unverified. */
  quoteCheck?: QuoteCheck;
  /**
   * TDX collateral, AMD roots and VCEKs, NVIDIA roots: when given, hardware
   * quotes are checked with them at `--at` (overriding `quoteCheck`), and
   * `--evidence` is available.
   */
  trust?: AuditTrust;
  /** The API key from the environment (`GATEWAY_API_KEY`); `--api-key-file` overrides it. */
  apiKey?: string;
  /** NVIDIA GPU evidence roots and collateral, for `--session`. */
  gpu?: GpuDeps;
}

/** The environment variable the API key is taken from. */
export const API_KEY_VARIABLE = "GATEWAY_API_KEY";

const VERIFY_USAGE = [
  "usage: verify --receipt <file|URL> --report <file|URL> [--request <file>] [--response <file>]",
  "       verify --signature <file|URL> --report <file|URL> [--request <file>] [--response <file>]",
  "       verify --report <file|URL>",
  "       verify --session <file|URL> [--rim-at <ISO time>]   (GPU evidence of a session record; --collateral DIR)",
  "       verify --bundle <file> [--at <ISO time>]   (an evidence bundle, offline; --at defaults to the receipt's served_at)",
  `       verify --evidence <file> --kind ${
    Object.keys(EVIDENCE_KINDS).join("|")
  }   (a provider's recorded evidence, check by check)`,
  "trust: --collateral <file|dir> / --pccs-url <url> (TDX), --amd-roots <ASK+ARK PEM> and",
  "       --vcek <file> (SEV-SNP; without --vcek the AMD KDS is asked),",
  "       --tdx-root <PEM|DER> (the root TDX collateral must chain to; default Intel's SGX Root CA)",
  "       (--bundle reads only the collateral inside the bundle: --collateral/--pccs-url/--vcek unused)",
  "the API key for a receipt/signature/session URL: the GATEWAY_API_KEY variable, or --api-key-file <file>",
  "options: --at <ISO time>   judge at this instant instead of now (every mode)",
  "         --tcb-accept <S,S…>  TDX TCB statuses accepted (default: all but NotSupported/Revoked)",
  "         --allow-sept-ve-enabled  accept TDX TDs with SEPT_VE_DISABLE = 0 (Azure TDX)",
  "         --nonce <value>   nonce the report FILE was fetched with (a report URL always gets a fresh random nonce)",
  "         --allow-dev       accept development (non-hardware) evidence with a warning",
  "         --require-verified-upstream  fail unless the served attempt's upstream.verified says verified (hardware)",
  "         --e2ee-context <file>  E2EE v2: {algo, nonce, timestamp, client_private_key[, model]};",
  "                           --request is then the restored request, --response the wire bytes",
].join("\n");

const VALUE_FLAGS = [
  "receipt",
  "signature",
  "report",
  "api-key-file",
  "request",
  "response",
  "nonce",
  "e2ee-context",
  "session",
  "bundle",
  "at",
  "rim-at",
  "evidence",
  "kind",
  "tcb-accept",
] as const;
const BOOL_FLAGS = [
  "allow-dev",
  "require-verified-upstream",
  "allow-sept-ve-enabled",
  "help",
] as const;
type ValueFlag = typeof VALUE_FLAGS[number];
type BoolFlag = typeof BOOL_FLAGS[number];

type ParsedArgs = ParsedOptions<ValueFlag, BoolFlag, never>;

function parseArgs(args: string[]): ParsedArgs {
  // Refused by name: a key on the command line ends up in `deno task`'s echo and shell history.
  if (args.some((a) => a === "--api-key" || a.startsWith("--api-key="))) {
    throw new UsageError(
      "--api-key is not accepted: deno task prints its command line; set GATEWAY_API_KEY " +
        "or use --api-key-file <file>",
    );
  }
  return parseOptions(args, { strings: VALUE_FLAGS, booleans: BOOL_FLAGS });
}

function isUrl(source: string): boolean {
  return /^https?:\/\//i.test(source);
}

/** A fetch or read that failed: reported as a failed check, not a crash. */
class SourceError extends Error {}

async function fetchJson(deps: VerifyDeps, url: URL, apiKey?: string): Promise<unknown> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (apiKey) headers["authorization"] = `Bearer ${apiKey}`;
  let res: Response;
  try {
    res = await deps.fetch(url, { headers });
  } catch (e) {
    throw new SourceError(
      `cannot fetch ${url.origin}${url.pathname}: ${e instanceof Error ? e.name : "error"}`,
    );
  }
  const text = await res.text();
  if (!res.ok) {
    const message = serverMessage(text);
    throw new SourceError(
      `${url.origin}${url.pathname} answered HTTP ${res.status}` + (message ? `: ${message}` : ""),
    );
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new SourceError(`${url.origin}${url.pathname} did not return JSON`);
  }
}

/** The `error.code` of an error envelope, if any. */
function serverCode(text: string): string | null {
  try {
    const body = JSON.parse(text);
    return isRecord(body) && isRecord(body["error"]) && typeof body["error"]["code"] === "string"
      ? body["error"]["code"]
      : null;
  } catch {
    return null;
  }
}

/** The `error.message` of an error envelope (one line, bounded), for the user to read. */
function serverMessage(text: string): string | null {
  try {
    const body = JSON.parse(text);
    const message = isRecord(body) && isRecord(body["error"]) ? body["error"]["message"] : null;
    if (typeof message !== "string" || message === "") return null;
    return message.replace(/\s+/g, " ").slice(0, 300);
  } catch {
    return null;
  }
}

async function readBytes(deps: VerifyDeps, path: string): Promise<Uint8Array> {
  try {
    return await deps.readFile(path);
  } catch {
    throw new UsageError(`cannot read ${path}`);
  }
}

async function readJson(deps: VerifyDeps, path: string): Promise<unknown> {
  const bytes = await readBytes(deps, path);
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new SourceError(`${path} is not JSON`);
  }
}

function parseUrl(source: string): URL {
  try {
    return new URL(source);
  } catch {
    throw new UsageError(`invalid URL ${source}`);
  }
}

/** Loads the report; a URL gets a fresh nonce (and the envelope's signing_algo for legacy URLs). */
async function loadReport(
  deps: VerifyDeps,
  source: string,
  fileNonce: string | undefined,
  signingAlgo: string | undefined,
): Promise<{ report: unknown; nonce: string | null; fresh: boolean }> {
  if (!isUrl(source)) {
    return { report: await readJson(deps, source), nonce: fileNonce ?? null, fresh: false };
  }
  if (fileNonce !== undefined) {
    throw new UsageError("--nonce applies to a report file; a report URL gets a fresh nonce");
  }
  const url = parseUrl(source);
  if (url.searchParams.has("workload_keyset_digest")) {
    // An archived report is the stored one, issued without a nonce: nothing fresh to ask for.
    return { report: await fetchJson(deps, url), nonce: null, fresh: false };
  }
  const random = deps.randomBytes(32);
  if (random.length !== 32) throw new Error("randomBytes returned the wrong length");
  const nonce = bytesToHex(random);
  url.searchParams.set("nonce", nonce);
  if (signingAlgo !== undefined && !url.searchParams.has("signing_algo")) {
    url.searchParams.set("signing_algo", signingAlgo);
  }
  return { report: await fetchJson(deps, url), nonce, fresh: true };
}

async function loadArtifact(deps: VerifyDeps, source: string, apiKey?: string): Promise<unknown> {
  return isUrl(source)
    ? await fetchJson(deps, parseUrl(source), apiKey)
    : await readJson(deps, source);
}

function isLegacyReport(report: unknown): boolean {
  return isRecord(report) && typeof report["signing_address"] === "string" &&
    typeof report["signing_algo"] === "string";
}

/** `--at`, `--nonce`, `--tcb-accept` and `--allow-sept-ve-enabled`, as one run's choices. */
function auditChoices(deps: VerifyDeps, p: ParsedArgs): AuditChoices {
  const v = p.values;
  const at = isoTime(v.at, "at") ?? deps.now?.() ?? 0;
  let accepted: AcceptableTcbStatus[] | undefined;
  if (v["tcb-accept"] !== undefined) {
    accepted = [];
    for (const s of v["tcb-accept"].split(",").map((x) => x.trim())) {
      if (!(ACCEPTABLE_TCB_STATUSES as readonly string[]).includes(s)) {
        throw new UsageError(
          `--tcb-accept: ${JSON.stringify(s)} is not one of ${ACCEPTABLE_TCB_STATUSES.join(", ")}`,
        );
      }
      accepted.push(s as AcceptableTcbStatus);
    }
  }
  return {
    at,
    ...(v.nonce !== undefined ? { nonce: v.nonce } : {}),
    ...(accepted ? { tcbPolicy: { accepted } } : {}),
    allowSeptVeEnabled: p.flags.has("allow-sept-ve-enabled"),
  };
}

/** `--evidence FILE --kind K`: one provider's recorded evidence, check by check. */
async function evidenceFileChecks(deps: VerifyDeps, p: ParsedArgs): Promise<Check[]> {
  const v = p.values;
  const others = [v.receipt, v.signature, v.report, v.session].filter((x) => x !== undefined);
  if (others.length > 0) {
    throw new UsageError(
      "--evidence stands alone (no --receipt, --signature, --report, --session)",
    );
  }
  if (v.kind === undefined) throw new UsageError("--evidence needs --kind");
  const kind = evidenceKind(v.kind);
  if (!kind) {
    throw new UsageError(
      `--kind ${JSON.stringify(v.kind)} is not one of ${Object.keys(EVIDENCE_KINDS).join(", ")}`,
    );
  }
  if (!deps.trust) throw new UsageError("offline evidence checks are not available in this build");
  const choices = auditChoices(deps, p);
  deps.print(`NOTE judged at ${new Date(choices.at).toISOString()}`);
  const input = await readBytes(deps, v.evidence!);
  return await kind.verify(input, evidenceContext(deps.trust, choices));
}

async function collectChecks(deps: VerifyDeps, p: ParsedArgs): Promise<Check[]> {
  const v = p.values;
  if (v.evidence !== undefined) return await evidenceFileChecks(deps, p);
  if (v.kind !== undefined) throw new UsageError("--kind applies to --evidence");
  if (v.session !== undefined) return await sessionChecks(deps, v);
  if (v.bundle !== undefined) return await bundleChecks(deps, p);
  const modes = [v.receipt, v.signature].filter((x) => x !== undefined).length;
  if (modes > 1) throw new UsageError("give either --receipt or --signature, not both");
  if (v.report === undefined) throw new UsageError("--report is required");
  if (modes === 0 && (v.request || v.response || v["api-key-file"])) {
    throw new UsageError("--request/--response/--api-key-file need --receipt or --signature");
  }
  const apiKey = v["api-key-file"] !== undefined
    ? new TextDecoder().decode(await readBytes(deps, v["api-key-file"])).trim()
    : deps.apiKey;
  const requestBody = v.request !== undefined ? await readBytes(deps, v.request) : undefined;
  const responseBody = v.response !== undefined ? await readBytes(deps, v.response) : undefined;
  const allowDevEvidence = p.flags.has("allow-dev");
  const requireVerifiedUpstream = p.flags.has("require-verified-upstream");
  // --at judges the report (keyset not_after, quote, collateral, VCEK chain) at that instant.
  const choices = auditChoices(deps, p);
  const now = v.at !== undefined || deps.now ? () => choices.at : undefined;
  const quoteCheck = deps.trust
    ? hardwareQuoteCheck(evidenceContext(deps.trust, choices))
    : deps.quoteCheck;
  const evidence = { allowDevEvidence, quoteCheck };

  const envelope = v.signature !== undefined
    ? await loadArtifact(deps, v.signature, apiKey)
    : undefined;
  const envelopeAlgo = isRecord(envelope) && typeof envelope["signing_algo"] === "string"
    ? envelope["signing_algo"]
    : undefined;
  const { report, nonce, fresh } = await loadReport(deps, v.report, v.nonce, envelopeAlgo);
  deps.print(
    fresh
      ? `NOTE report fetched with fresh nonce ${nonce}`
      : nonce !== null
      ? `NOTE report checked against the given nonce ${nonce}`
      : isUrl(v.report)
      ? "NOTE archived report (workload_keyset_digest): issued without a nonce, so its " +
        "freshness cannot be established"
      : "NOTE report file without --nonce: its freshness cannot be established",
  );
  const checks: Check[] = [];

  if (v.signature !== undefined && isLegacyReport(report)) {
    checks.push(...await verifyLegacyReport(report, { ...evidence, nonce }));
  } else {
    if (nonce !== null && !/^[0-9a-f]{64}$/.test(nonce)) {
      throw new UsageError("--nonce for a canonical report must be 64 lowercase hex characters");
    }
    checks.push(...await verifyReport(report, { ...evidence, nonce, now }));
  }

  if (v.receipt !== undefined) {
    const receipt = await loadArtifact(deps, v.receipt, apiKey);
    // A receipt from before a restart or rotation: its own (archived) keyset and report.
    const signing = await receiptReport(deps, v.report, report, receipt, evidence, checks);
    checks.push(
      ...verifyReceipt(receipt, {
        report: signing,
        requestBody,
        responseBody,
        requireVerifiedUpstream,
      }),
    );
    if (isUrl(v.receipt) && isRecord(receipt)) {
      checks.push(
        ...await inclusionChecks(deps, v.receipt, receipt, [report, signing], evidence, apiKey),
      );
    }
    if (v["e2ee-context"] !== undefined) {
      if (responseBody === undefined) throw new UsageError("--e2ee-context needs --response");
      const context = await readJson(deps, v["e2ee-context"]);
      checks.push(...verifyE2eeResponse(responseBody, context, isRecord(receipt) ? receipt : {}));
    }
  } else if (envelope !== undefined) {
    checks.push(
      ...verifySignatureEnvelope(envelope, {
        report,
        requestBody,
        responseBody,
        requireVerifiedUpstream,
      }),
    );
  }
  return checks;
}

/**
 * The report whose keyset signed `receipt`: the one given when the digests
 * match, else (a report URL) the archived report of the receipt's keyset,
 * fetched from the same gateway and verified as not fresh. Says which it used.
 */
async function receiptReport(
  deps: VerifyDeps,
  source: string,
  report: unknown,
  receipt: unknown,
  evidence: { allowDevEvidence: boolean; quoteCheck?: QuoteCheck },
  checks: Check[],
): Promise<unknown> {
  const wanted = isRecord(receipt) ? receipt["workload_keyset_digest"] : undefined;
  const current = isRecord(report) ? report["workload_keyset_digest"] : undefined;
  if (typeof wanted !== "string" || wanted === current || !isUrl(source)) {
    deps.print(`NOTE using keyset ${String(current)} and the report given`);
    return report;
  }
  const url = parseUrl(source);
  url.search = "";
  url.searchParams.set("workload_keyset_digest", wanted);
  const archived = await fetchJson(deps, url);
  deps.print(
    `NOTE the receipt was signed by keyset ${wanted}, not the current ${String(current)}: ` +
      `using its archived report from ${url.origin}${url.pathname}?workload_keyset_digest=…`,
  );
  for (const c of await verifyReport(archived, { ...evidence, nonce: null })) {
    checks.push({ ...c, name: c.name.replace(/^report\./, "archived_report.") });
  }
  return archived;
}

/**
 * The receipt's inclusion in the transparency log (`<receipt URL>/inclusion`):
 * the proof against the checkpoint, and the checkpoint's signature by a log
 * key of an attested keyset (the reports at hand, else the keysets the log holds).
 */
async function inclusionChecks(
  deps: VerifyDeps,
  receiptUrl: string,
  receipt: Record<string, unknown>,
  reports: unknown[],
  evidence: { allowDevEvidence: boolean; quoteCheck?: QuoteCheck },
  apiKey: string | undefined,
): Promise<Check[]> {
  const url = parseUrl(receiptUrl);
  url.pathname = url.pathname.replace(/\/+$/, "") + "/inclusion";
  let answer: unknown;
  for (let attempt = 0;; attempt++) {
    const res = await deps.fetch(url, {
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
    });
    const text = await res.text();
    // The stated bound is seconds: a receipt just made may still be pending.
    if (res.status === 503 && attempt < 20) {
      await new Promise((r) => setTimeout(r, 250));
      continue;
    }
    if (res.status === 404 && serverCode(text) !== "receipt_not_found") {
      // A gateway from before the transparency log: nothing to check, said plainly.
      deps.print("NOTE this gateway serves no transparency log: inclusion not checked");
      return [];
    }
    if (res.status !== 200) {
      return [check("log.inclusion", false, `${url.pathname} answered HTTP ${res.status}`)];
    }
    answer = JSON.parse(text);
    break;
  }
  if (!isRecord(answer) || typeof answer.checkpoint !== "string") {
    return [check("log.inclusion", false, "malformed inclusion answer")];
  }
  const origin = String(answer.origin);
  const keys = reports.flatMap((r) => keysetLogKeys(extractKeyset(r), origin));
  let verified = verifyNote(answer.checkpoint, keys);
  let via = "a log key of the report's keyset";
  if (verified === null) {
    // Signed by another replica or an older keyset: find it through the log itself.
    const gateway = `${url.origin}${url.pathname.replace(/\/v1\/aci\/receipts\/.*$/, "")}`;
    try {
      const r = await followLog(deps.fetch, gateway, null, evidence, answer.checkpoint);
      verified = verifyNote(
        answer.checkpoint,
        r.state.keysets.flatMap((k) => k.vkeys).map(parseVerifierKey).filter((k) => k !== null),
      );
      via = "a log key of a keyset the log holds (its archived report verified)";
    } catch (e) {
      return [check("log.checkpoint", false, (e as Error).message)];
    }
  }
  const cp = verified ? parseCheckpointBody(verified.note.text) : null;
  const out: Check[] = [
    check(
      "log.checkpoint",
      cp !== null,
      cp !== null
        ? `checkpoint ${cp.origin} size ${cp.size} root ${
          Buffer.from(cp.root).toString("base64")
        }, signed by ${via}`
        : "the checkpoint's signature does not verify under an attested log key",
    ),
  ];
  if (cp === null) return out;
  const proof = Array.isArray(answer.inclusion_proof)
    ? answer.inclusion_proof.map((p) => new Uint8Array(Buffer.from(String(p), "base64")))
    : [];
  const index = Number(answer.leaf_index);
  const ok = Number(answer.tree_size) === cp.size &&
    verifyInclusion(leafHash(receiptEntry(jcs(receipt))), index, cp.size, proof, cp.root);
  out.push(
    check(
      "log.inclusion",
      ok,
      ok
        ? `receipt digest is leaf ${index} of the tree of size ${cp.size}`
        : "the inclusion proof does not verify against the checkpoint",
    ),
  );
  return out;
}

function isoTime(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const t = Date.parse(value);
  if (!Number.isFinite(t)) throw new UsageError(`--${flag} is not an ISO time`);
  return t;
}

/**
 * `--bundle`: everything from one file, nothing fetched: the collateral the
 * bundle archived for each quote, chained to the roots this command pins
 * (the real Intel root unless `--tdx-root`, `--amd-roots`, NVIDIA's built-in
 * roots). Reports are judged at `--at` or the receipt's time; sessions at
 * `--at` or their own verification time.
 */
async function bundleChecks(deps: VerifyDeps, p: ParsedArgs): Promise<Check[]> {
  const v = p.values;
  if (v.receipt !== undefined || v.signature !== undefined || v.report !== undefined) {
    throw new UsageError("--bundle stands alone (no --receipt, --signature or --report)");
  }
  const bundle = await readJson(deps, v.bundle!);
  const servedAt = isRecord(bundle) && isRecord(bundle.receipt) &&
      typeof bundle.receipt.served_at === "number"
    ? bundle.receipt.served_at * 1000
    : undefined;
  const given = isoTime(v.at, "at");
  const at = given ?? servedAt ?? deps.now?.() ?? 0;
  const choices = auditChoices(deps, p);
  const gpu = deps.trust?.gpu ?? deps.gpu ?? defaultGpuDeps();
  deps.print(
    `NOTE offline: nothing is fetched; the report judged at ${new Date(at).toISOString()}, ` +
      (given === undefined ? "each session at its own verification time" : "sessions too"),
  );
  return await verifyBundle(bundle, {
    now: () => at,
    trust: {
      ...(given !== undefined ? { at: given } : {}),
      tdxRootCaDer: deps.trust?.tdxRootCaDer,
      tcbPolicy: choices.tcbPolicy,
      allowSeptVeEnabled: choices.allowSeptVeEnabled,
      snpRoots: deps.trust?.snpRoots ?? [],
      gpuRoots: { deviceRootDer: gpu.deviceRootDer, rimRootDer: gpu.rimRootDer },
      allowDevEvidence: p.flags.has("allow-dev"),
    },
  });
}

/** `--session`: the GPU evidence of a stored session, at `--at` (RIMs at `--rim-at`) or now. */
async function sessionChecks(
  deps: VerifyDeps,
  v: Partial<Record<ValueFlag, string>>,
): Promise<Check[]> {
  if (v.receipt !== undefined || v.signature !== undefined || v.report !== undefined) {
    throw new UsageError("--session stands alone (no --receipt, --signature or --report)");
  }
  if (!deps.gpu) throw new UsageError("GPU verification is not available in this build");
  const at = isoTime(v.at, "at") ?? deps.now?.() ?? 0;
  const rimAt = isoTime(v["rim-at"], "rim-at") ?? at;
  const apiKey = v["api-key-file"] !== undefined
    ? new TextDecoder().decode(await readBytes(deps, v["api-key-file"])).trim()
    : deps.apiKey;
  const doc = await loadArtifact(deps, v.session!, apiKey);
  const gpu = {
    ...deps.gpu,
    times: () => ({ device: at, deviceOcsp: at, rim: rimAt, rimOcsp: rimAt }),
  };
  return await verifySessionGpu(doc, gpu, at);
}

/** Runs the `verify` command; resolves to the process exit code. */
export async function runVerify(args: string[], deps: VerifyDeps): Promise<number> {
  let parsed: ParsedArgs;
  try {
    parsed = parseArgs(args);
  } catch (e) {
    deps.print(`error: ${e instanceof Error ? e.message : "bad arguments"}`);
    deps.print(VERIFY_USAGE);
    return 2;
  }
  if (parsed.flags.has("help")) {
    deps.print(VERIFY_USAGE);
    return 0;
  }
  let checks: Check[];
  try {
    checks = await collectChecks(deps, parsed);
  } catch (e) {
    if (e instanceof UsageError) {
      deps.print(`error: ${e.message}`);
      deps.print(VERIFY_USAGE);
      return 2;
    }
    if (e instanceof SourceError) {
      deps.print(`FAIL input — ${e.message}`);
      return 1;
    }
    // A verifier bug must not look like success: report it as a failure.
    deps.print(`FAIL internal — ${e instanceof Error ? e.message : "unexpected error"}`);
    return 1;
  }
  for (const c of checks) deps.print(`${c.ok ? "PASS" : "FAIL"} ${c.name} — ${c.detail}`);
  const failures = checks.filter((c) => !c.ok).length;
  const ok = allPassed(checks);
  deps.print(
    ok
      ? `RESULT: all ${checks.length} checks passed`
      : `RESULT: ${failures} of ${checks.length} checks failed`,
  );
  return ok ? 0 : 1;
}
