/** Percentiles and medians for the benchmark's samples. */

/** Nearest-rank percentile (`p` in 0..100) of unsorted samples; NaN when empty. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return NaN;
  const s = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

export const median = (samples: number[]): number => percentile(samples, 50);
