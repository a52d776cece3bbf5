/**
 * Asking witnesses to cosign (C2SP tlog-witness `add-checkpoint`): after an
 * append, the latest head goes to every configured witness with a
 * consistency proof from the size that witness last cosigned; the
 * cosignatures that verify under the configured vkeys are stored with the
 * checkpoint once at least `required` came back. One submission at a time,
 * always the newest head (a head superseded meanwhile is skipped).
 */
import { b64, parseVerifierKey, SIG_COSIGNATURE, verifyNote } from "../aci/mod.ts";
import { COSIGNED_KEY, type Head, witnessKey } from "./tiles.ts";

export interface WitnessConfig {
  url: string;
  vkey: string;
}

export interface WitnessClient {
  submit(head: Head): void;
  /** Resolves when no submission is running. */
  idle(): Promise<void>;
  /** Stops asking again (after the submission in progress). */
  close(): Promise<void>;
}

/**
 * A head that did not get its cosignatures (a witness down, or started after the
 * gateway) is asked again after this, doubling up to `RETRY_MAX_MS`, until a newer head
 * replaces it: a quiet log still gets its cosigned checkpoint once the witnesses answer.
 */
const RETRY_MS = 2_000;
const RETRY_MAX_MS = 60_000;

const MAX_RESPONSE = 64 * 1024;

export function createWitnessClient(o: {
  kv: Deno.Kv;
  witnesses: WitnessConfig[];
  required: number;
  fetch: (url: string, init: RequestInit) => Promise<Response>;
  consistency: (m: number, n: number) => Promise<Uint8Array[]>;
  log: (line: Record<string, unknown>) => void;
}): WitnessClient {
  const list = o.witnesses.map((w) => {
    const key = parseVerifierKey(w.vkey);
    if (key === null || key.type !== SIG_COSIGNATURE) {
      throw new Error(`transparency_log.witnesses: ${w.url} has no valid cosigner vkey`);
    }
    return { url: w.url.replace(/\/+$/, ""), key };
  });
  let latest: Head | null = null;
  let running: Promise<void> | null = null;
  let retry: ReturnType<typeof setTimeout> | null = null;
  let retryMs = RETRY_MS;
  let closed = false;

  /** One witness's cosignature line for `head`, or null. */
  const ask = async (w: (typeof list)[number], head: Head): Promise<string | null> => {
    let old = (await o.kv.get<number>(witnessKey(w.key.name))).value ?? 0;
    for (let attempt = 0; attempt < 3; attempt++) {
      if (old > head.size) return null; // the witness already saw a newer head
      const proof = await o.consistency(old, head.size);
      const body = `old ${old}\n${proof.map((p) => b64(p) + "\n").join("")}\n${head.checkpoint}`;
      const res = await o.fetch(`${w.url}/add-checkpoint`, {
        method: "POST",
        body,
        signal: AbortSignal.timeout(10_000),
      });
      const text = (await res.text()).slice(0, MAX_RESPONSE);
      if (res.status === 409) {
        const m = /^(0|[1-9][0-9]*)\n$/.exec(text);
        if (!m) return null;
        old = Number(m[1]);
        continue;
      }
      if (res.status !== 200) {
        o.log({
          level: "warn",
          msg: "witness refused a checkpoint",
          witness: w.key.name,
          status: res.status,
        });
        return null;
      }
      const noteText = head.checkpoint.slice(0, head.checkpoint.indexOf("\n\n") + 1);
      const lines = text.split("\n").filter((l) => l !== "").map((l) => l + "\n");
      for (const line of lines) {
        if (verifyNote(`${noteText}\n${line}`, [w.key]) !== null) {
          await o.kv.set(witnessKey(w.key.name), head.size);
          return line;
        }
      }
      return null;
    }
    return null;
  };

  const run = async () => {
    while (latest !== null) {
      const head = latest;
      latest = null;
      const lines = await Promise.all(list.map((w) =>
        ask(w, head).catch((e) => {
          o.log({
            level: "warn",
            msg: "witness unreachable",
            witness: w.key.name,
            error: String(e),
          });
          return null;
        })
      ));
      const got = lines.filter((l): l is string => l !== null);
      if (got.length < Math.max(1, o.required)) {
        if (latest === null && !closed) {
          if (retry !== null) clearTimeout(retry);
          retry = setTimeout(() => {
            retry = null;
            if (latest === null && !closed) {
              latest = head;
              running ??= run();
            }
          }, retryMs);
          retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
        }
        continue;
      }
      retryMs = RETRY_MS;
      const cosigned: Head = { ...head, checkpoint: head.checkpoint + got.join("") };
      const cur = await o.kv.get<Head>(COSIGNED_KEY);
      if (cur.value && cur.value.size >= head.size) continue;
      await o.kv.atomic().check(cur).set(COSIGNED_KEY, cosigned).commit();
    }
    running = null;
  };

  return {
    submit(head) {
      if (closed) return;
      if (retry !== null) clearTimeout(retry);
      retry = null;
      retryMs = RETRY_MS;
      latest = head;
      running ??= run();
    },
    async idle() {
      while (running) await running;
    },
    async close() {
      closed = true;
      if (retry !== null) clearTimeout(retry);
      retry = null;
      while (running) await running;
    },
  };
}
