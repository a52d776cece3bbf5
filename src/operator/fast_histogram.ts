/**
 * An unlabeled Prometheus histogram whose `observe` is a bucket search and
 * three additions: no label hashing, no closure, no allocation (prom-client's
 * `Histogram.observe` does all three per call). prom-client's registry
 * renders it at scrape time through the same `get()` shape its own
 * histograms return, so the exposition text is unchanged.
 */
import type { Metric } from "prom-client";

export interface FastHistogram {
  observe(value: number): void;
  /** Registers it with a prom-client registry (`registerMetric`). */
  readonly metric: Metric;
}

interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

export function fastHistogram(name: string, help: string, buckets: number[]): FastHistogram {
  const bounds = Float64Array.from(buckets);
  // counts[i] holds observations in (bounds[i-1], bounds[i]]; the last slot is above every bound.
  const counts = new Float64Array(bounds.length + 1);
  let sum = 0;
  let count = 0;
  const get = () => {
    const values: Sample[] = [];
    let acc = 0;
    for (let i = 0; i < bounds.length; i++) {
      acc += counts[i];
      values.push({ labels: { le: bounds[i] }, value: acc, metricName: `${name}_bucket` });
    }
    values.push({ labels: { le: "+Inf" }, value: count, metricName: `${name}_bucket` });
    values.push({ labels: {}, value: sum, metricName: `${name}_sum` });
    values.push({ labels: {}, value: count, metricName: `${name}_count` });
    return Promise.resolve({ name, help, type: "histogram", values, aggregator: "sum" });
  };
  const reset = () => {
    counts.fill(0);
    sum = 0;
    count = 0;
  };
  const metric = { name, help, type: "histogram", aggregator: "sum", get, reset };
  return {
    observe(v) {
      if (!Number.isFinite(v)) return;
      let i = 0;
      while (i < bounds.length && v > bounds[i]) i++;
      counts[i]++;
      sum += v;
      count++;
    },
    // The registry reads only name, type and get(); the cast is to prom-client's class type.
    metric: metric as unknown as Metric,
  };
}
