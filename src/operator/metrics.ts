/**
 * Prometheus metrics (prom-client), in a registry of this gateway's own (no
 * global state, no default process collectors unless asked). Served only
 * behind the operator token (`GET /admin/v1/metrics`), never on the public
 * surface. Labels are bounded: route patterns (never raw paths), catalog
 * model ids, configured provider names, status codes and error kinds. The
 * latency histograms carry no labels (per-route detail is in the counters):
 * fewer series to update on the hot path.
 *
 * The per-request path only adds to plain numbers (nested Maps for labeled
 * counts, `fastHistogram` buckets); prom-client's metric objects are filled
 * from them at scrape time in `collect()`, so label hashing and its
 * allocations are paid once per series per scrape, not per request.
 */
import { collectDefaultMetrics, Counter, Gauge, Registry } from "prom-client";
import { fastHistogram } from "./fast_histogram.ts";

/** What one finished request reports (the same facts as its log line). */
export interface RequestObservation {
  route: string;
  status: number;
  model: string | null;
  provider: string | null;
  /** Phase durations in ms: `upstream` (until the upstream's headers), `commit` (receipt). */
  phases: Record<string, number>;
  costNano?: bigint;
  /** Settled token counts of an answered inference request. */
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** Error kind of a refused inference request. */
  refusal?: string;
}

export interface MetricsSources {
  now: () => number;
  /** Configured confidential upstreams. */
  confidential: string[];
  verification: (provider: string) => { verified: boolean; sessionId?: string } | null;
  openStreams: () => number;
  /**
   * UTF-16 units of long prompt texts tokenized, and reused from the key's earlier
   * counts (tokens/text_counts.ts); read at scrape time.
   */
  promptCounting?: () => { tokenized: number; reused: number };
  /** Seconds until a verified upstream fails closed (policy entry closing, evidence expiring), or null. */
  failClosedIn?: (provider: string) => number | null;
  /** Include prom-client's process metrics (CPU, memory, event-loop lag). */
  processMetrics?: boolean;
  /**
   * Read at scrape time only (nothing per request): the light process metrics served
   * when prom-client's are off, so `task dev` and production always show CPU and memory.
   */
  processStats?: () => ProcessStats;
  /** `gateway_build_info` labels (the API version, the runtime, the measured source). */
  build?: Record<string, string>;
  /** Labels on every series (a worker's index, docs/decisions/workers.md). */
  defaultLabels?: Record<string, string>;
}

/** What main.ts reads about its own process at scrape time. */
export interface ProcessStats {
  cpuUserSeconds: number;
  cpuSystemSeconds: number;
  residentBytes: number;
  heapUsedBytes: number;
  startTimeSeconds: number;
  /** Open file descriptors, where the platform tells (Linux /proc). */
  openFds?: number;
}

/** What a listener's accept loop reports (src/http/connections.ts `ConnectionStats`). */
export interface ConnectionCounts {
  open: number;
  headerTimeouts: number;
  idleTimeouts: number;
  evicted: number;
  refused: number;
  acceptErrors: number;
}

export interface GatewayMetrics {
  readonly contentType: string;
  /** Adds a listener's connection counts (read at scrape time). */
  connections(listener: string, counts: () => ConnectionCounts): void;
  render(): Promise<string>;
  request(o: RequestObservation): void;
  /** The gateway's own time until the response headers, without the upstream wait. */
  own(ms: number): void;
  inFlight(delta: 1 | -1): void;
  groupCommit(mutations: number): void;
  kvRetry(): void;
  kvError(): void;
}

const MS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function createMetrics(src: MetricsSources): GatewayMetrics {
  const registry = new Registry();
  if (src.defaultLabels) registry.setDefaultLabels(src.defaultLabels);
  // route → status → model → provider → count; every key is bounded (see above).
  const requestCounts = new Map<string, Map<number, Map<string, Map<string, number>>>>();
  new Counter({
    name: "gateway_requests_total",
    help: "Requests answered, by route pattern, status, model and provider.",
    labelNames: ["endpoint", "status", "model", "provider"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [endpoint, byStatus] of requestCounts) {
        for (const [status, byModel] of byStatus) {
          for (const [model, byProvider] of byModel) {
            for (const [provider, n] of byProvider) {
              this.inc({ endpoint, status: String(status), model, provider }, n);
            }
          }
        }
      }
    },
  });
  const histogram = (name: string, help: string, buckets: number[]) => {
    const h = fastHistogram(name, help, buckets);
    registry.registerMetric(h.metric);
    return h;
  };
  const own = histogram(
    "gateway_own_duration_seconds",
    "The gateway's own time until the response headers, without the upstream wait.",
    MS_BUCKETS,
  );
  const upstream = histogram(
    "gateway_upstream_wait_seconds",
    "Time until the upstream's response headers (failover included).",
    MS_BUCKETS,
  );
  const commit = histogram(
    "gateway_receipt_commit_seconds",
    "Durable receipt commit a non-streamed response waits for.",
    MS_BUCKETS,
  );
  const commitSize = histogram(
    "gateway_group_commit_mutations",
    "Mutations per group commit to the store.",
    [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
  );
  const kvRetries = new Counter({
    name: "gateway_kv_retries_total",
    help: "Store commits retried after a transient lock error.",
    registers: [registry],
  });
  const kvErrors = new Counter({
    name: "gateway_kv_errors_total",
    help: "Durable writes that failed for good.",
    registers: [registry],
  });
  let inFlight = 0;
  new Gauge({
    name: "gateway_requests_in_flight",
    help: "Requests whose response headers have not left yet.",
    registers: [registry],
    collect() {
      this.set(inFlight);
    },
  });
  new Gauge({
    name: "gateway_open_streams",
    help: "Streamed responses in progress.",
    registers: [registry],
    collect() {
      this.set(src.openStreams());
    },
  });
  const creditCounts = new Map<string, number>();
  new Counter({
    name: "gateway_credits_spent_total",
    help: "Credits settled, by model.",
    labelNames: ["model"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [model, n] of creditCounts) this.inc({ model }, n);
    },
  });
  const refusalCounts = new Map<string, number>();
  new Counter({
    name: "gateway_refusals_total",
    help: "Inference requests refused or failed, by error kind.",
    labelNames: ["reason"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of refusalCounts) this.inc({ reason }, n);
    },
  });
  // A session's age counts from when this replica first saw it verified.
  const seen = new Map<string, { id: string; at: number }>();
  const sessionState = () => {
    const t = src.now();
    return src.confidential.map((name) => {
      const v = src.verification(name);
      const ok = v?.verified === true && v.sessionId !== undefined;
      let age: number | null = null;
      if (ok) {
        const s = seen.get(name);
        if (!s || s.id !== v!.sessionId) seen.set(name, { id: v!.sessionId!, at: t });
        age = (t - seen.get(name)!.at) / 1000;
      } else seen.delete(name);
      return { name, ok, age };
    });
  };
  new Gauge({
    name: "gateway_upstream_verified",
    help: "1 while the confidential upstream has a verified session, else 0.",
    labelNames: ["provider"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const s of sessionState()) this.set({ provider: s.name }, s.ok ? 1 : 0);
    },
  });
  new Gauge({
    name: "gateway_upstream_session_age_seconds",
    help: "Age of each verified upstream session (since this replica verified it).",
    labelNames: ["provider"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const s of sessionState()) if (s.age !== null) this.set({ provider: s.name }, s.age);
    },
  });
  new Gauge({
    name: "gateway_upstream_fail_closed_in_seconds",
    help: "Seconds until a verified upstream fails closed unless a newer policy entry or fresh " +
      "evidence covers it (its measurement policy entry closes, collateral or certificates expire).",
    labelNames: ["provider"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const name of src.confidential) {
        const s = src.failClosedIn?.(name) ?? null;
        if (s !== null) this.set({ provider: name }, s);
      }
    },
  });
  const listeners = new Map<string, () => ConnectionCounts>();
  new Gauge({
    name: "gateway_open_connections",
    help: "Client connections open now, by listener.",
    labelNames: ["listener"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [name, f] of listeners) this.set({ listener: name }, f().open);
    },
  });
  const CLOSE_REASONS = {
    header_timeout: "headerTimeouts",
    idle_timeout: "idleTimeouts",
    evicted: "evicted",
    refused_at_cap: "refused",
    accept_error: "acceptErrors",
  } as const;
  new Counter({
    name: "gateway_connections_closed_total",
    help: "Connections the gateway closed or refused itself, by listener and reason.",
    labelNames: ["listener", "reason"] as const,
    registers: [registry],
    collect() {
      // The accept loop keeps the running totals; mirror them at scrape time.
      this.reset();
      for (const [name, f] of listeners) {
        const c = f();
        for (const [reason, field] of Object.entries(CLOSE_REASONS)) {
          this.inc({ listener: name, reason }, c[field]);
        }
      }
    },
  });
  // model → provider → [prompt, completion] tokens settled.
  const tokenCounts = new Map<string, Map<string, [number, number]>>();
  new Counter({
    name: "gateway_tokens_total",
    help: "Tokens settled, by model, provider and kind (prompt or completion).",
    labelNames: ["model", "provider", "kind"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [model, byProvider] of tokenCounts) {
        for (const [provider, [p, c]] of byProvider) {
          this.inc({ model, provider, kind: "prompt" }, p);
          this.inc({ model, provider, kind: "completion" }, c);
        }
      }
    },
  });
  if (src.promptCounting) {
    const read = src.promptCounting;
    new Counter({
      name: "gateway_prompt_count_chars_total",
      help: "Characters of long prompt texts counted for the context check: tokenized, or " +
        "reused from the same key's earlier count of the same text.",
      labelNames: ["how"] as const,
      registers: [registry],
      collect() {
        this.reset();
        const t = read();
        this.inc({ how: "tokenized" }, t.tokenized);
        this.inc({ how: "reused" }, t.reused);
      },
    });
  }
  if (src.build) {
    const build = src.build;
    new Gauge({
      name: "gateway_build_info",
      help: "Always 1; the labels say what is running.",
      labelNames: Object.keys(build),
      registers: [registry],
    }).set(build, 1);
  }
  if (src.processMetrics) collectDefaultMetrics({ register: registry });
  else if (src.processStats) lightProcessMetrics(registry, src.processStats);

  return {
    contentType: registry.contentType,
    render: () => registry.metrics(),
    connections(listener, counts) {
      listeners.set(listener, counts);
    },
    request(o) {
      let byStatus = requestCounts.get(o.route);
      if (!byStatus) requestCounts.set(o.route, byStatus = new Map());
      let byModel = byStatus.get(o.status);
      if (!byModel) byStatus.set(o.status, byModel = new Map());
      const model = o.model ?? "";
      let byProvider = byModel.get(model);
      if (!byProvider) byModel.set(model, byProvider = new Map());
      const provider = o.provider ?? "";
      byProvider.set(provider, (byProvider.get(provider) ?? 0) + 1);
      const up = o.phases.upstream;
      if (up !== undefined) upstream.observe(up / 1000);
      const c = o.phases.commit;
      if (c !== undefined) commit.observe(c / 1000);
      if (o.usage !== undefined) {
        let byProvider = tokenCounts.get(model);
        if (!byProvider) tokenCounts.set(model, byProvider = new Map());
        const t = byProvider.get(provider);
        if (t) {
          t[0] += o.usage.prompt_tokens;
          t[1] += o.usage.completion_tokens;
        } else byProvider.set(provider, [o.usage.prompt_tokens, o.usage.completion_tokens]);
      }
      if (o.costNano !== undefined && o.costNano > 0n) {
        creditCounts.set(model, (creditCounts.get(model) ?? 0) + Number(o.costNano) / 1e9);
      }
      if (o.refusal !== undefined) {
        refusalCounts.set(o.refusal, (refusalCounts.get(o.refusal) ?? 0) + 1);
      }
    },
    own(ms) {
      own.observe(ms / 1000);
    },
    inFlight(d) {
      inFlight += d;
    },
    groupCommit(n) {
      commitSize.observe(n);
    },
    kvRetry() {
      kvRetries.inc();
    },
    kvError() {
      kvErrors.inc();
    },
  };
}

/** prom-client's names for the process metrics that cost nothing until scraped. */
function lightProcessMetrics(registry: Registry, stats: () => ProcessStats): void {
  const gauge = (name: string, help: string, read: (s: ProcessStats) => number | undefined) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const v = read(stats());
        if (v !== undefined) this.set(v);
      },
    });
  new Counter({
    name: "process_cpu_seconds_total",
    help: "Total user and system CPU time spent in seconds.",
    registers: [registry],
    collect() {
      const s = stats();
      this.reset();
      this.inc(s.cpuUserSeconds + s.cpuSystemSeconds);
    },
  });
  gauge("process_resident_memory_bytes", "Resident memory size in bytes.", (s) => s.residentBytes);
  gauge("process_heap_bytes", "Process heap size in bytes.", (s) => s.heapUsedBytes);
  gauge(
    "process_start_time_seconds",
    "Start time of the process since unix epoch in seconds.",
    (s) => s.startTimeSeconds,
  );
  // /proc needs --allow-all (task start has it, task dev does not): served where it can be read.
  if (stats().openFds !== undefined) {
    gauge("process_open_fds", "Number of open file descriptors.", (s) => s.openFds);
  }
}

/** Records nothing (`GATEWAY_METRICS=off`; the bench compares against it). */
export function noopMetrics(): GatewayMetrics {
  const nothing = () => {};
  return {
    contentType: "text/plain; version=0.0.4; charset=utf-8",
    render: () => Promise.resolve("# metrics are off (GATEWAY_METRICS=off)\n"),
    connections: nothing,
    request: nothing,
    own: nothing,
    inFlight: nothing,
    groupCommit: nothing,
    kvRetry: nothing,
    kvError: nothing,
  };
}
