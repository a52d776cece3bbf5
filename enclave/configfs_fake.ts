/**
 * TEST SUPPORT ONLY: an imitation of the Linux configfs-tsm report interface
 * over a real temporary directory, so the configfs provider (and the gateway's
 * end-to-end tests) can run on machines without a TEE. Its quotes carry the
 * ASCII marker `FAKE-CONFIGFS-TSM`, no signature, and prove nothing.
 *
 * A watcher polls the directory: each new entry directory gets the kernel's
 * attributes (`generation`, `provider`, `inblob`, `outblob`, plus `auxblob`
 * for sev); each write of `inblob` bumps `generation` and produces an
 * `outblob` that embeds the inblob where a real quote holds its report data.
 *
 * A plain directory cannot imitate three kernel behaviours, so the returned
 * `fs` adapter adds them and must be passed to `createConfigfsTsmProvider`:
 * attributes exist as soon as mkdir returns, reading `outblob` blocks until
 * the quote is produced, and rmdir removes the attributes with the entry.
 */

import { createHash } from "node:crypto";
import type { TsmFs } from "./configfs_tsm.ts";
import { sleep } from "../src/store/mod.ts";

/** The marker every imitation quote carries (TDX header user data, SNP HOST_DATA). */
export const FAKE_QUOTE_MARKER = "FAKE-CONFIGFS-TSM";
/** Absolute offset of REPORTDATA in a TDX v4 quote. */
export const TDX_V4_REPORT_DATA_OFFSET = 568;
/** Length of the imitation TDX quote: v4 header + body + a zero signature-data length. */
export const FAKE_TDX_QUOTE_LENGTH = 636;
/** Offset of REPORT_DATA in an SEV-SNP attestation report. */
export const SEV_SNP_REPORT_DATA_OFFSET = 0x50;
/** Length of an SEV-SNP attestation report. */
export const SEV_SNP_REPORT_LENGTH = 1184;

const TDX_HEADER_USER_DATA_OFFSET = 28;
const SEV_SNP_HOST_DATA_OFFSET = 0xc0;
const INTEL_QE_VENDOR_ID = "939a7233f79c4ca9940a0db3957f0607";
/** An SNP certificate table holding only its all-zero terminator entry. */
const EMPTY_CERT_TABLE_LENGTH = 24;

export type FakeTsmProviderName = "tdx_guest" | "sev_guest";

export interface FakeConfigfsTsmOptions {
  /** The `provider` attribute; null leaves it out (a broken or foreign interface). */
  provider: FakeTsmProviderName | null;
  /** Extra time each quote takes, to imitate a slow quoting enclave. */
  delayMs?: number;
  /** Once, make `generation` jump by 2: a concurrent writer raced the reader. */
  raceOnce?: boolean;
  /** Watcher poll interval (default 2 ms). */
  pollMs?: number;
  /** How long the adapter waits for the watcher before failing (default 5000 ms). */
  waitMs?: number;
}

export interface FakeConfigfsTsm {
  readonly root: string;
  /** The adapter to pass as `fs` to `createConfigfsTsmProvider`. */
  readonly fs: TsmFs;
  /** Quotes produced so far. */
  readonly quotesIssued: number;
  stop(): Promise<void>;
}

interface EntryState {
  ready: boolean;
  generation: number;
  /** inblob writes the adapter made. */
  written: number;
  /** inblob writes the watcher has turned into an outblob. */
  processed: number;
  fingerprint: string;
  error: string | null;
  /** rmdir has begun: the watcher writes nothing more into the entry. */
  removed?: boolean;
}

function hexBytes(hex: string): Uint8Array {
  return Uint8Array.from(hex.match(/../g) ?? [], (b) => parseInt(b, 16));
}

/** A v4 TDX quote: header, zeroed TD report body with REPORTDATA, no signature. */
export function fakeTdxQuote(reportData: Uint8Array): Uint8Array {
  const quote = new Uint8Array(FAKE_TDX_QUOTE_LENGTH);
  const view = new DataView(quote.buffer);
  view.setUint16(0, 4, true); // version
  view.setUint16(2, 2, true); // attestation key type: ECDSA P-256
  view.setUint32(4, 0x81, true); // TEE type: TDX
  quote.set(hexBytes(INTEL_QE_VENDOR_ID), 12);
  quote.set(new TextEncoder().encode(FAKE_QUOTE_MARKER), TDX_HEADER_USER_DATA_OFFSET);
  quote.set(reportData, TDX_V4_REPORT_DATA_OFFSET);
  view.setUint32(632, 0, true); // signature data length: there is none
  return quote;
}

/** A 1184-byte SEV-SNP report with REPORT_DATA filled in and a zero signature. */
export function fakeSevSnpReport(reportData: Uint8Array): Uint8Array {
  const report = new Uint8Array(SEV_SNP_REPORT_LENGTH);
  const view = new DataView(report.buffer);
  view.setUint32(0, 2, true); // version
  view.setBigUint64(0x08, 0x30000n, true); // policy: reserved bit 17 set, SMT allowed
  view.setUint32(0x34, 1, true); // signature algorithm: ECDSA P-384 with SHA-384
  report.set(reportData, SEV_SNP_REPORT_DATA_OFFSET);
  report.set(new TextEncoder().encode(FAKE_QUOTE_MARKER), SEV_SNP_HOST_DATA_OFFSET);
  return report;
}

function fingerprintOf(bytes: Uint8Array, mtime: Date | null): string {
  return `${mtime?.getTime() ?? "none"}:${createHash("sha256").update(bytes).digest("hex")}`;
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

function dirname(path: string): string {
  return path.slice(0, path.lastIndexOf("/"));
}

/** Starts the imitation over the existing directory `dir`. */
// Long as one closure over shared state; each inner function is short.
export function startFakeConfigfsTsm(
  dir: string,
  options: FakeConfigfsTsmOptions,
): FakeConfigfsTsm {
  if (!Deno.statSync(dir).isDirectory) throw new Error(`${dir} is not a directory`);
  const root = dir.replace(/\/+$/, "");
  const pollMs = options.pollMs ?? 2;
  const delayMs = options.delayMs ?? 0;
  const waitMs = options.waitMs ?? 5000;
  let raceLeft = options.raceOnce === true;
  let stopped = false;
  let fault: unknown = null;
  let quotesIssued = 0;
  const entries = new Map<string, EntryState>();
  let scanWaiters: Array<() => void> = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let wake: (() => void) | undefined;

  async function populate(path: string): Promise<void> {
    const enc = new TextEncoder();
    await Deno.writeFile(`${path}/generation`, enc.encode("0\n"));
    if (options.provider !== null) {
      await Deno.writeFile(`${path}/provider`, enc.encode(`${options.provider}\n`));
    }
    await Deno.writeFile(`${path}/inblob`, new Uint8Array());
    await Deno.writeFile(`${path}/outblob`, new Uint8Array());
    if (options.provider === "sev_guest") {
      await Deno.writeFile(`${path}/auxblob`, new Uint8Array());
    }
  }

  async function produce(path: string, state: EntryState, inblob: Uint8Array): Promise<void> {
    if (delayMs > 0) await sleep(delayMs);
    // Like the kernel, any write bumps the generation, even a rejected one.
    state.generation += raceLeft ? 2 : 1;
    raceLeft = false;
    let outblob: Uint8Array | null = null;
    if (options.provider === "sev_guest") {
      if (inblob.length <= 64) {
        const padded = new Uint8Array(64);
        padded.set(inblob);
        outblob = fakeSevSnpReport(padded);
        await Deno.writeFile(`${path}/auxblob`, new Uint8Array(EMPTY_CERT_TABLE_LENGTH));
      }
    } else if (inblob.length === 64) {
      outblob = fakeTdxQuote(inblob);
    }
    state.error = outblob === null ? "EINVAL: inblob length not accepted by the provider" : null;
    await Deno.writeFile(`${path}/outblob`, outblob ?? new Uint8Array());
    await Deno.writeFile(`${path}/generation`, new TextEncoder().encode(`${state.generation}\n`));
    if (outblob !== null) quotesIssued++;
  }

  async function scanEntry(name: string, state: EntryState): Promise<void> {
    const path = `${root}/${name}`;
    if (state.removed) return;
    if (!state.ready) {
      await populate(path);
      state.ready = true;
      return;
    }
    const stat = await Deno.stat(`${path}/inblob`);
    const inblob = await Deno.readFile(`${path}/inblob`);
    const fingerprint = fingerprintOf(inblob, stat.mtime);
    // An empty inblob is a write still in flight (open truncates before it writes).
    const changed = inblob.length > 0 && fingerprint !== state.fingerprint;
    if (!changed && state.written <= state.processed) return;
    state.fingerprint = fingerprint;
    await produce(path, state, inblob);
    state.processed++;
  }

  async function scan(): Promise<void> {
    const seen = new Set<string>();
    for await (const item of Deno.readDir(root)) {
      if (!item.isDirectory || item.name.startsWith(".")) continue;
      seen.add(item.name);
      let state = entries.get(item.name);
      if (state === undefined) {
        state = {
          ready: false,
          generation: 0,
          written: 0,
          processed: 0,
          fingerprint: fingerprintOf(new Uint8Array(), null),
          error: null,
        };
        entries.set(item.name, state);
      }
      try {
        await scanEntry(item.name, state);
      } catch (e) {
        // The consumer may rmdir an entry mid-scan; anything else is a real fault.
        if (!(e instanceof Deno.errors.NotFound)) throw e;
      }
    }
    for (const name of [...entries.keys()]) if (!seen.has(name)) entries.delete(name);
  }

  const loop = (async () => {
    while (!stopped) {
      try {
        await scan();
      } catch (e) {
        // Surfaced to whoever waits next; the imitation stops rather than limping on.
        fault = e;
        stopped = true;
      }
      const waiters = scanWaiters;
      scanWaiters = [];
      for (const w of waiters) w();
      if (stopped) break;
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, pollMs);
      });
    }
    for (const w of scanWaiters) w();
    scanWaiters = [];
  })();

  /** Waits for the watcher until `done()` holds, bounded by `waitMs` worth of scans. */
  async function waitFor(done: () => boolean, what: string): Promise<void> {
    const maxScans = Math.ceil((waitMs + delayMs) / pollMs) + 2;
    for (let i = 0; i < maxScans; i++) {
      if (done()) return;
      if (fault !== null) {
        throw new Error(`fake configfs-tsm watcher failed while waiting for ${what}`, {
          cause: fault,
        });
      }
      if (stopped) throw new Error(`fake configfs-tsm stopped while waiting for ${what}`);
      await new Promise<void>((resolve) => scanWaiters.push(resolve));
    }
    if (done()) return;
    throw new Error(`fake configfs-tsm: timed out waiting for ${what}`);
  }

  function entryOf(path: string): EntryState | undefined {
    return dirname(path) === root ? entries.get(basename(path)) : undefined;
  }

  function attributeEntry(path: string): EntryState | undefined {
    return entryOf(dirname(path));
  }

  const fs: TsmFs = {
    async mkdir(path) {
      if (stopped) throw new Error("fake configfs-tsm is stopped");
      await Deno.mkdir(path);
      if (dirname(path) !== root) return;
      await waitFor(() => entryOf(path)?.ready === true, `the attributes of ${path}`);
    },
    async rmdir(path) {
      if (dirname(path) !== root) throw new Error(`fake configfs-tsm: ${path} is not an entry`);
      // configfs removes an entry atomically; here the watcher may be writing into it, so stop it
      // and let the scan in flight finish before removing (else a file it writes after the
      // listing makes the removal fail with "Directory not empty").
      const state = entryOf(path);
      if (state !== undefined && !stopped) {
        state.removed = true;
        await new Promise<void>((resolve) => scanWaiters.push(resolve));
      }
      await Deno.remove(path, { recursive: true });
    },
    async readFile(path) {
      const state = attributeEntry(path);
      const name = basename(path);
      if (state !== undefined && (name === "outblob" || name === "auxblob")) {
        await waitFor(() => state.processed >= state.written, `the ${name} of ${dirname(path)}`);
        if (state.error !== null) throw new Error(`fake configfs-tsm: ${state.error}`);
      }
      return await Deno.readFile(path);
    },
    async writeFile(path, data) {
      await Deno.writeFile(path, data, { create: false });
      const state = attributeEntry(path);
      if (state !== undefined && basename(path) === "inblob") state.written++;
    },
    async isDirectory(path) {
      try {
        return (await Deno.stat(path)).isDirectory;
      } catch (e) {
        if (e instanceof Deno.errors.NotFound) return false;
        throw e;
      }
    },
  };

  return {
    root,
    fs,
    get quotesIssued() {
      return quotesIssued;
    },
    async stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      wake?.();
      await loop;
    },
  };
}
