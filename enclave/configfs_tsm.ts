/**
 * Quote provider over Linux configfs-tsm (`/sys/kernel/config/tsm/report`),
 * the one guest interface for both Intel TDX and AMD SEV-SNP (Linux ≥ 6.7).
 *
 * Protocol (attestation.md §1): mkdir a fresh entry, read `generation`, write
 * the 64-byte `inblob`, read `outblob` (and `auxblob`, `provider`), re-read
 * `generation` and require it moved by exactly one, rmdir the entry. Requests
 * are serialized because the TDX driver does not handle concurrency.
 */

import { assertReportData, type Quote, type QuoteProvider } from "./quote_provider.ts";

/** Default configfs-tsm report directory. */
export const DEFAULT_TSM_ROOT = "/sys/kernel/config/tsm/report";

/**
 * The file operations the provider needs. The default is plain Deno file I/O;
 * tests inject the imitation's adapter (see `configfs_fake.ts`).
 */
export interface TsmFs {
  mkdir(path: string): Promise<void>;
  /** Plain rmdir: configfs removes an item's attributes with it. */
  rmdir(path: string): Promise<void>;
  /** Throws `Deno.errors.NotFound` for an absent attribute. */
  readFile(path: string): Promise<Uint8Array>;
  /** Writes an existing attribute (never creates a file). */
  writeFile(path: string, data: Uint8Array): Promise<void>;
  isDirectory(path: string): Promise<boolean>;
}

/** Real file I/O, all async so a slow quote never blocks the event loop. */
export const denoTsmFs: TsmFs = {
  mkdir: (path) => Deno.mkdir(path),
  // Not recursive: on configfs unlinking attributes fails, rmdir is the protocol.
  rmdir: (path) => Deno.remove(path),
  readFile: (path) => Deno.readFile(path),
  writeFile: (path, data) => Deno.writeFile(path, data, { create: false }),
  isDirectory: async (path) => {
    try {
      return (await Deno.stat(path)).isDirectory;
    } catch (e) {
      if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.PermissionDenied) {
        return false;
      }
      throw e;
    }
  },
};

/** A configfs-tsm failure; messages never carry report data or quote bytes. */
export class ConfigfsTsmError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ConfigfsTsmError";
  }
}

/** configfs-tsm provider names → ACI `tee_type`. */
const TEE_TYPES: Readonly<Record<string, string>> = {
  tdx_guest: "tdx",
  sev_guest: "sev_snp",
};

export interface ConfigfsTsmOptions {
  root?: string;
  fs?: TsmFs;
  /** Attempts when a concurrent writer moves `generation` (default 3). */
  maxAttempts?: number;
}

/** Whether a configfs-tsm report directory is present at `root`. */
export async function detectConfigfsTsm(
  root: string = DEFAULT_TSM_ROOT,
  fs: TsmFs = denoTsmFs,
): Promise<boolean> {
  return await probeConfigfsTsm(root, fs) === "present";
}

/**
 * `present`, `absent`, or `out_of_reach`: Deno refused to look (NotCapable;
 * it allows `/sys` paths only with `--allow-all`), so the answer is unknown.
 */
export async function probeConfigfsTsm(
  root: string = DEFAULT_TSM_ROOT,
  fs: TsmFs = denoTsmFs,
): Promise<"present" | "absent" | "out_of_reach"> {
  try {
    return await fs.isDirectory(root) ? "present" : "absent";
  } catch (e) {
    if (e instanceof Deno.errors.NotCapable) return "out_of_reach";
    throw e;
  }
}

class GenerationRace extends ConfigfsTsmError {}

function parseGeneration(bytes: Uint8Array, entry: string): bigint {
  const text = new TextDecoder().decode(bytes).trim();
  if (!/^\d+$/.test(text)) {
    throw new ConfigfsTsmError(`configfs-tsm ${entry}/generation is not a decimal number`);
  }
  return BigInt(text);
}

async function readAttribute(fs: TsmFs, entry: string, name: string): Promise<Uint8Array> {
  try {
    return await fs.readFile(`${entry}/${name}`);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new ConfigfsTsmError(`configfs-tsm entry ${entry} has no '${name}' attribute`);
    }
    throw new ConfigfsTsmError(`configfs-tsm read of ${entry}/${name} failed`, { cause: e });
  }
}

async function readOptionalAttribute(
  fs: TsmFs,
  entry: string,
  name: string,
): Promise<Uint8Array | undefined> {
  try {
    return await fs.readFile(`${entry}/${name}`);
  } catch (e) {
    // The kernel hides `auxblob` when the provider has none (TDX).
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw new ConfigfsTsmError(`configfs-tsm read of ${entry}/${name} failed`, { cause: e });
  }
}

/** The protocol inside an existing entry. */
async function quoteInEntry(fs: TsmFs, entry: string, reportData: Uint8Array): Promise<Quote> {
  const before = parseGeneration(await readAttribute(fs, entry, "generation"), entry);
  try {
    await fs.writeFile(`${entry}/inblob`, reportData);
  } catch (e) {
    throw new ConfigfsTsmError(`configfs-tsm write of ${entry}/inblob failed`, { cause: e });
  }
  const outblob = await readAttribute(fs, entry, "outblob");
  const auxblob = await readOptionalAttribute(fs, entry, "auxblob");
  const providerName = new TextDecoder().decode(await readAttribute(fs, entry, "provider")).trim();
  // Re-read last so the check covers every blob read above.
  const after = parseGeneration(await readAttribute(fs, entry, "generation"), entry);
  if (after - before !== 1n) {
    throw new GenerationRace(
      `configfs-tsm generation moved by ${after - before} instead of 1: a concurrent writer raced`,
    );
  }
  const teeType = TEE_TYPES[providerName];
  if (teeType === undefined) {
    throw new ConfigfsTsmError(
      `configfs-tsm provider ${JSON.stringify(providerName)} is not tdx_guest or sev_guest`,
    );
  }
  if (outblob.length === 0) {
    throw new ConfigfsTsmError(`configfs-tsm ${entry}/outblob is empty`);
  }
  const quote: Quote = { tee_type: teeType, provider: providerName, quote: outblob };
  if (auxblob !== undefined && auxblob.length > 0) quote.aux = auxblob;
  return quote;
}

/** One protocol run in one fresh entry; the entry is removed whatever happens. */
async function quoteOnce(fs: TsmFs, root: string, reportData: Uint8Array): Promise<Quote> {
  const entry = `${root}/gw-${crypto.randomUUID()}`;
  try {
    await fs.mkdir(entry);
  } catch (e) {
    throw new ConfigfsTsmError(`configfs-tsm: cannot create an entry under ${root}`, { cause: e });
  }
  let quote: Quote;
  try {
    quote = await quoteInEntry(fs, entry, reportData);
  } catch (e) {
    // The original failure matters more than a second one from the cleanup.
    await fs.rmdir(entry).catch(() => undefined);
    throw e;
  }
  try {
    await fs.rmdir(entry);
  } catch (e) {
    throw new ConfigfsTsmError(`configfs-tsm: cannot remove entry ${entry}`, { cause: e });
  }
  return quote;
}

/** A hardware quote provider speaking configfs-tsm at `root`. */
export function createConfigfsTsmProvider(options: ConfigfsTsmOptions = {}): QuoteProvider {
  const root = (options.root ?? DEFAULT_TSM_ROOT).replace(/\/+$/, "");
  const fs = options.fs ?? denoTsmFs;
  const maxAttempts = options.maxAttempts ?? 3;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
    throw new RangeError("maxAttempts must be a positive integer");
  }

  async function quoteWithRetries(reportData: Uint8Array): Promise<Quote> {
    let lastRace: GenerationRace | null = null;
    for (let attempt = 0; attempt < maxAttempts; attempt++) {
      try {
        return await quoteOnce(fs, root, reportData);
      } catch (e) {
        if (!(e instanceof GenerationRace)) throw e;
        lastRace = e;
      }
    }
    throw new ConfigfsTsmError(
      `configfs-tsm: generation raced on all ${maxAttempts} attempts (${lastRace?.message})`,
    );
  }

  // The queue tail: each request starts only after the previous one settled.
  let tail: Promise<unknown> = Promise.resolve();

  return {
    name: `configfs-tsm:${root}`,
    hardware: true,
    getQuote(reportData: Uint8Array): Promise<Quote> {
      try {
        assertReportData(reportData);
      } catch (e) {
        return Promise.reject(e);
      }
      // Copy: the caller may reuse its buffer while the request waits in the queue.
      const data = new Uint8Array(reportData);
      const run = tail.then(() => quoteWithRetries(data));
      tail = run.catch(() => undefined);
      return run;
    },
  };
}
