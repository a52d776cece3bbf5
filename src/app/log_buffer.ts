/**
 * The gateway's log: one JSON line per event, written in batches — one write
 * per event-loop turn instead of one per request, which is measurable under
 * load. main.ts passes the writer (stdout), the clock and the deferral.
 */

export interface LogBuffer {
  log(line: Record<string, unknown>): void;
  /** Writes what is buffered now (before exit, or a fatal message). */
  flush(): void;
}

export function createLogBuffer(io: {
  /** Writes some of `bytes`, returning how many (as `Deno.stdout.writeSync`). */
  writeSync: (bytes: Uint8Array) => number;
  now: () => number;
  /** Runs `f` once the current event-loop turn is over. */
  defer: (f: () => void) => void;
}): LogBuffer {
  const lines: string[] = [];
  const encoder = new TextEncoder();
  const flush = (): void => {
    if (lines.length === 0) return;
    let bytes = encoder.encode(lines.join("\n") + "\n");
    lines.length = 0;
    try {
      while (bytes.length > 0) bytes = bytes.subarray(io.writeSync(bytes));
    } catch {
      // A closed stdout must not take the gateway down with it; the lines are dropped.
    }
  };
  return {
    log(line) {
      lines.push(JSON.stringify({ ts: new Date(io.now()).toISOString(), ...line }));
      if (lines.length === 1) io.defer(flush);
    },
    flush,
  };
}
