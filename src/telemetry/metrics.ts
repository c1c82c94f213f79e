import client from 'prom-client';

/**
 * The process's metrics, on prom-client, exposed as Prometheus text by
 * GET /metrics. A thin facade keeps the call sites small and lets tests read
 * a value synchronously (prom-client's own reads are async): each Counter,
 * Gauge and Histogram here owns one prom-client metric in this registry's
 * prom-client Registry and mirrors what tests need to count.
 *
 * Each MetricsRegistry has its own prom-client Registry (never the global
 * one), so two services or pipelines in one test process never share a
 * series. Names follow Prometheus conventions: counters end in `_total`,
 * durations are `_seconds` histograms, sizes `_bytes`.
 */
export type Labels = Record<string, string | number>;

/** A label value: either the one label's value (single-label metrics, the old call style) or a label set. */
type LabelArg = string | Labels;

function toLabels(keys: readonly string[], label: LabelArg | undefined): Labels {
  if (label === undefined || label === '') return {};
  if (typeof label === 'string') {
    if (keys.length !== 1) throw new RangeError(`a plain label value needs exactly one label name, have [${keys.join(', ')}]`);
    return { [keys[0]!]: label };
  }
  return label;
}

function keyOf(keys: readonly string[], labels: Labels): string {
  return keys.map((k) => String(labels[k] ?? '')).join('\x1f');
}

export class Counter {
  private readonly values = new Map<string, number>();
  private readonly prom: client.Counter;
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelKeys: readonly string[],
    registry: client.Registry,
  ) {
    this.prom = new client.Counter({ name, help, labelNames: labelKeys, registers: [registry] });
  }
  inc(by = 1, label?: LabelArg): void {
    const labels = toLabels(this.labelKeys, label);
    this.prom.inc(labels, by);
    const k = keyOf(this.labelKeys, labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  get(label?: LabelArg): number {
    return this.values.get(keyOf(this.labelKeys, toLabels(this.labelKeys, label))) ?? 0;
  }
}

/**
 * A counter whose total lives elsewhere (a component's own monotonic stats):
 * read at scrape time, exposed with counter semantics (TYPE counter, `_total`).
 */
export class CounterFrom {
  constructor(
    readonly name: string,
    private readonly read: () => number,
    help: string,
    registry: client.Registry,
  ) {
    let seen = 0;
    new client.Counter({
      name,
      help,
      registers: [registry],
      collect() {
        const v = read();
        if (v > seen) this.inc(v - seen);
        seen = Math.max(seen, v);
      },
    });
  }
  get(): number {
    return this.read();
  }
}

/**
 * How a gauge's series combine when /metrics sums a pod's worker processes
 * (prom-client's AggregatorRegistry, docs/scaling.md). Counters and
 * histograms always sum. A gauge sums by default (bytes, connections,
 * suppressed or halted partitions: each worker holds its own); a 0/1 health
 * gauge takes `min`, so it reads 0 when any worker is down and the alerts on
 * `== 0` still fire; a gauge that several workers would each report for the
 * same thing (a duration, an age) takes `max`, never a multiple.
 */
export type GaugeAggregator = 'sum' | 'min' | 'max' | 'first';

export class Gauge {
  private fn: (() => number) | undefined;
  private labeledFn: (() => Iterable<[Labels, number]>) | undefined;
  private value = 0;
  private readonly prom: client.Gauge;
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelKeys: readonly string[],
    registry: client.Registry,
    aggregator: GaugeAggregator = 'sum',
  ) {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    this.prom = new client.Gauge({
      name,
      help,
      labelNames: labelKeys,
      registers: [registry],
      aggregator,
      collect() {
        if (self.fn) this.set(self.fn());
        if (self.labeledFn) {
          // Series that disappeared (a revoked partition) must disappear here too.
          this.reset();
          for (const [labels, v] of self.labeledFn()) this.set(labels, v);
        }
      },
    });
  }
  set(v: number, labels?: Labels): void {
    if (labels) this.prom.set(labels, v);
    else {
      this.value = v;
      this.prom.set(v);
    }
  }
  /** A gauge computed when read. */
  collect(fn: () => number): void {
    this.fn = fn;
  }
  /** A labelled gauge computed when read: exactly the series fn returns. */
  collectLabeled(fn: () => Iterable<[Labels, number]>): void {
    this.labeledFn = fn;
  }
  get(): number {
    return this.fn ? this.fn() : this.value;
  }
}

/** Default buckets for latencies in seconds: 1 ms .. 30 s. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class Histogram {
  private readonly counts = new Map<string, number>();
  private readonly sums = new Map<string, number>();
  private readonly prom: client.Histogram;
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelKeys: readonly string[],
    buckets: readonly number[],
    registry: client.Registry,
  ) {
    this.prom = new client.Histogram({ name, help, labelNames: labelKeys, buckets: [...buckets], registers: [registry] });
  }
  /** Records one observation (seconds for a `_seconds` histogram). */
  observe(value: number, labels?: Labels): void {
    const l = labels ?? {};
    this.prom.observe(l, value);
    const k = keyOf(this.labelKeys, l);
    this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
    this.sums.set(k, (this.sums.get(k) ?? 0) + value);
  }
  /** Starts a timer; the returned function observes the elapsed seconds (labels may be added at the end). */
  startTimer(labels?: Labels): (end?: Labels) => number {
    const t0 = process.hrtime.bigint();
    return (end) => {
      const s = Number(process.hrtime.bigint() - t0) / 1e9;
      this.observe(s, { ...labels, ...end });
      return s;
    };
  }
  /** Observations recorded so far (tests). */
  count(labels?: Labels): number {
    return this.counts.get(keyOf(this.labelKeys, labels ?? {})) ?? 0;
  }
  /** Sum of the observations so far (tests). */
  sum(labels?: Labels): number {
    return this.sums.get(keyOf(this.labelKeys, labels ?? {})) ?? 0;
  }
}

type AnyMetric = Counter | CounterFrom | Gauge | Histogram;

export class MetricsRegistry {
  /** The prom-client registry behind this facade (for exporters and tests). */
  readonly registry = new client.Registry();
  private readonly metrics = new Map<string, AnyMetric>();
  private defaultsOn = false;
  private readonly asyncReaders = new Map<string, () => Promise<number>>();

  private lookup<T extends AnyMetric>(name: string, kind: new (...a: never[]) => T, make: () => T): T {
    const m = this.metrics.get(name);
    if (m) {
      if (!(m instanceof kind)) throw new TypeError(`metric ${name} is already registered as a ${m.constructor.name}`);
      return m;
    }
    const created = make();
    this.metrics.set(name, created);
    return created;
  }

  /** A counter; `labelKeys` names its labels (one name keeps the old `inc(n, value)` style). Returns the existing one by name. */
  counter(name: string, help: string, labelKeys?: string | readonly string[]): Counter {
    const keys = labelKeys === undefined ? [] : typeof labelKeys === 'string' ? [labelKeys] : labelKeys;
    return this.lookup(name, Counter, () => new Counter(name, help, keys, this.registry));
  }

  /** A counter read at scrape time from a monotonic source. */
  counterFrom(name: string, help: string, read: () => number): CounterFrom {
    return this.lookup(name, CounterFrom, () => new CounterFrom(name, read, help, this.registry));
  }

  /** A gauge; `aggregator` says how a pod's workers combine (GaugeAggregator; default sum). */
  gauge(name: string, help: string, labelKeys?: readonly string[], aggregator?: GaugeAggregator): Gauge {
    return this.lookup(name, Gauge, () => new Gauge(name, help, labelKeys ?? [], this.registry, aggregator));
  }

  /** A gauge computed asynchronously at scrape time (e.g. a database ping); registering the name again replaces the reader. */
  gaugeAsync(name: string, help: string, read: () => Promise<number>, aggregator: GaugeAggregator = 'sum'): void {
    const existing = this.asyncReaders.get(name);
    this.asyncReaders.set(name, read);
    if (existing) return;
    const readers = this.asyncReaders;
    new client.Gauge({
      name,
      help,
      registers: [this.registry],
      aggregator,
      async collect() {
        this.set(await readers.get(name)!());
      },
    });
  }

  histogram(name: string, help: string, opts: { labelKeys?: readonly string[]; buckets?: readonly number[] } = {}): Histogram {
    return this.lookup(
      name,
      Histogram,
      () => new Histogram(name, help, opts.labelKeys ?? [], opts.buckets ?? LATENCY_BUCKETS, this.registry),
    );
  }

  /** A metric registered under `name`, if any (tests). */
  find(name: string): AnyMetric | undefined {
    return this.metrics.get(name);
  }

  /** prom-client's process and Node.js metrics (CPU, memory, event loop lag, GC, handles). Once per registry. */
  collectDefaults(): void {
    if (this.defaultsOn) return;
    this.defaultsOn = true;
    client.collectDefaultMetrics({ register: this.registry });
    // prom-client names three gauges with a counter's `_total` suffix, which
    // `promtool check metrics` rejects; each is the sum of its per-type gauge
    // (nodejs_active_handles{type}, ...), so dropping them loses nothing.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'])
      this.registry.removeSingleMetric(name);
  }

  /** `queen_build_info{version,commit} 1`: which build is running. */
  buildInfo(version: string, commit: string): void {
    const g = new client.Gauge({
      name: 'queen_build_info',
      help: 'The running build (always 1)',
      labelNames: ['version', 'commit'],
      registers: [this.registry],
      // Every worker runs the same build: one series of 1, not N.
      aggregator: 'first',
    });
    g.set({ version, commit }, 1);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The Prometheus text exposition. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}

/** `queen_messages_total{source,status}`: per-message verdicts, shared by the Kafka and HTTP ingress. */
export function messageVerdicts(metrics: MetricsRegistry): Counter {
  return metrics.counter('queen_messages_total', 'Messages by source (kafka, http) and verdict (queued, duplicate, failed)', [
    'source',
    'status',
  ]);
}
