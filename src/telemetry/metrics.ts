/**
 * A small in-process metrics registry rendered in the Prometheus text format
 * by GET /metrics. Components register their counters and gauges here; tests
 * read them to prove behaviour by counting (never by timing).
 */
export class Counter {
  private values = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(by = 1, label = ''): void {
    this.values.set(label, (this.values.get(label) ?? 0) + by);
  }
  get(label = ''): number {
    return this.values.get(label) ?? 0;
  }
  entries(): [string, number][] {
    return [...this.values.entries()];
  }
}

export class Gauge {
  private fn: (() => number) | undefined;
  private value = 0;
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  set(v: number): void {
    this.value = v;
  }
  /** A gauge computed when read. */
  collect(fn: () => number): void {
    this.fn = fn;
  }
  get(): number {
    return this.fn ? this.fn() : this.value;
  }
}

export class MetricsRegistry {
  private counters = new Map<string, Counter>();
  private gauges = new Map<string, Gauge>();
  /** Label key for counters with one label dimension (e.g. "status"). */
  private labelKeys = new Map<string, string>();

  counter(name: string, help: string, labelKey?: string): Counter {
    let c = this.counters.get(name);
    if (!c) {
      c = new Counter(name, help);
      this.counters.set(name, c);
      if (labelKey) this.labelKeys.set(name, labelKey);
    }
    return c;
  }

  gauge(name: string, help: string): Gauge {
    let g = this.gauges.get(name);
    if (!g) {
      g = new Gauge(name, help);
      this.gauges.set(name, g);
    }
    return g;
  }

  render(): string {
    const lines: string[] = [];
    for (const c of this.counters.values()) {
      lines.push(`# HELP ${c.name} ${c.help}`, `# TYPE ${c.name} counter`);
      const key = this.labelKeys.get(c.name);
      const entries = c.entries();
      if (entries.length === 0) lines.push(`${c.name} 0`);
      for (const [label, v] of entries) {
        lines.push(label && key ? `${c.name}{${key}="${label.replace(/["\\\n]/g, '_')}"} ${v}` : `${c.name} ${v}`);
      }
    }
    for (const g of this.gauges.values()) {
      lines.push(`# HELP ${g.name} ${g.help}`, `# TYPE ${g.name} gauge`, `${g.name} ${g.get()}`);
    }
    return lines.join('\n') + '\n';
  }
}
