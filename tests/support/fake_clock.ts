/** A settable fake clock (epoch milliseconds) for tests that move time. */
export interface FakeClock {
  now: () => number;
  advance(ms: number): void;
}

export function fakeClock(start = 1_790_000_000_000): FakeClock {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      if (!Number.isFinite(ms) || ms < 0) throw new RangeError("a clock only moves forward");
      t += ms;
    },
  };
}
