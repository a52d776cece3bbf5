/**
 * Which measurements a verified session established, by subject, and
 * whether a measurement policy accepts them: every subject must match one
 * entry whose window is open now. The match names the policy version and
 * entry (for the session's claims) and the earliest instant a matched entry
 * closes, when the upstream leaves the policy unless a newer entry covers it.
 */
import type { SessionDocument } from "../types.ts";
import type { MeasurementPolicy, PolicyEntry } from "./document.ts";

/** One attested component's measurements (lowercase hex; versions as reported). */
export interface MeasuredSubject {
  subject: string;
  mrtd?: string | null;
  rtmr0?: string | null;
  rtmr1?: string | null;
  rtmr2?: string | null;
  compose_hash?: string | null;
  app_id?: string | null;
  snp_measurement?: string | null;
  snp_host_data?: string | null;
  gpu_driver_versions?: string[];
  vbios_versions?: string[];
}

const HEX_FIELDS = [
  "mrtd",
  "rtmr0",
  "rtmr1",
  "rtmr2",
  "compose_hash",
  "app_id",
  "snp_measurement",
  "snp_host_data",
] as const;

function rec(v: unknown): Record<string, unknown> | null {
  return typeof v === "object" && v !== null && !Array.isArray(v)
    ? v as Record<string, unknown>
    : null;
}
const s = (v: unknown) => (typeof v === "string" ? v.toLowerCase() : null);

function gpuVersions(extra: Record<string, unknown>) {
  const gpus = rec(extra["gpu_evidence"])?.["gpus"];
  if (!Array.isArray(gpus) || gpus.length === 0) return {};
  const drv = gpus.map((g) => String(rec(g)?.["driver_version"] ?? ""));
  const vb = gpus.map((g) => String(rec(g)?.["vbios_version"] ?? ""));
  return { gpu_driver_versions: drv, vbios_versions: vb };
}

/**
 * The subjects a session measured: `extra.measured_subjects` (subject →
 * measurements) when the verifier lists them (near-ai, tinfoil), else one `upstream` subject from
 * the dstack/ACI TDX registers, the SEV-SNP report and the GPU evidence.
 */
export function subjectsOf(doc: SessionDocument): MeasuredSubject[] {
  const extra = (doc.claims.extra ?? {}) as Record<string, unknown>;
  const listed = rec(extra["measured_subjects"]);
  if (listed) {
    return Object.entries(listed).flatMap(([subject, x]) => {
      const r = rec(x);
      return r ? [{ ...r, subject } as unknown as MeasuredSubject] : [];
    });
  }
  const tdx = rec(extra["tdx_measurements"]);
  const snp = rec(extra["snp_report"]);
  return [{
    subject: "upstream",
    ...(tdx
      ? {
        mrtd: s(tdx["mr_td"]),
        rtmr0: s(tdx["rtmr0"]),
        rtmr1: s(tdx["rtmr1"]),
        rtmr2: s(tdx["rtmr2"]),
        compose_hash: s(tdx["compose_hash"]),
        app_id: s(tdx["app_id"]),
      }
      : {}),
    ...(snp ? { snp_measurement: s(snp["measurement"]), snp_host_data: s(snp["host_data"]) } : {}),
    ...gpuVersions(extra),
  }];
}

function subjectApplies(e: PolicyEntry, subject: string): boolean {
  return e.subject === undefined || e.subject === subject || subject.startsWith(`${e.subject}[`);
}

/** Why `e` does not accept `m` now, or null when it does. */
function mismatch(e: PolicyEntry, m: MeasuredSubject, nowS: number): string | null {
  if (e.not_before !== undefined && nowS < e.not_before) return `entry ${e.id} opens later`;
  if (e.not_after !== undefined && nowS >= e.not_after) return `entry ${e.id} has closed`;
  for (const f of HEX_FIELDS) {
    const want = e[f];
    if (want === undefined) continue;
    const got = m[f];
    if (got === undefined || got === null) return `${f} not established`;
    if (got.toLowerCase() !== want) return `${f} ${got}`;
  }
  const lists = [["gpu_driver_versions", "GPU driver"], ["vbios_versions", "VBIOS"]] as const;
  for (const [f, what] of lists) {
    const allowed = e[f];
    if (allowed === undefined) continue;
    const got = m[f];
    if (!got || got.length === 0) return `${what} version not established`;
    const bad = got.find((v) => !allowed.includes(v));
    if (bad !== undefined) return `${what} version ${bad}`;
  }
  return null;
}

export interface PolicyMatch {
  ok: true;
  version: number;
  matches: { subject: string; entry: string; not_after: number | null }[];
  /** Unix seconds when the first matched entry closes, or null. */
  leavesAt: number | null;
}

/** Whether `policy` accepts every subject at `nowS`. */
export function matchPolicy(
  policy: MeasurementPolicy,
  subjects: readonly MeasuredSubject[],
  nowS: number,
): PolicyMatch | { ok: false; reason: string } {
  if (subjects.length === 0) return { ok: false, reason: "the session measured nothing" };
  const matches: PolicyMatch["matches"] = [];
  for (const m of subjects) {
    const candidates = policy.entries.filter((e) => subjectApplies(e, m.subject));
    const why: string[] = [];
    // Of the open entries that match, the one open longest (none = open-ended).
    let best: PolicyEntry | null = null;
    for (const e of candidates) {
      const w = mismatch(e, m, nowS);
      if (w !== null) {
        why.push(w);
        continue;
      }
      if (best === null || (best.not_after ?? Infinity) < (e.not_after ?? Infinity)) best = e;
    }
    if (best === null) {
      const detail = why.length ? `: ${[...new Set(why)].slice(0, 4).join("; ")}` : "";
      return {
        ok: false,
        reason: `${m.subject} measurement is not in measurement policy v${policy.version}${detail}`,
      };
    }
    matches.push({ subject: m.subject, entry: best.id, not_after: best.not_after ?? null });
  }
  const closing = matches.flatMap((x) => (x.not_after === null ? [] : [x.not_after]));
  return {
    ok: true,
    version: policy.version,
    matches,
    leavesAt: closing.length ? Math.min(...closing) : null,
  };
}
