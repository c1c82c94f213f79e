/**
 * Reads counters and histograms out of Prometheus text (what the service's
 * /metrics serves), so a suite can report a metric by name whether or not the
 * build it measures has it: a missing metric is `undefined`, never a 0 that
 * reading it would have created.
 */

export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parsePromText(text: string): PromSample[] {
  const out: PromSample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    if (m[3]) for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[4]) });
  }
  return out;
}

/** Sum over all label sets of a counter (or gauge); undefined when absent. */
export function promSum(samples: readonly PromSample[], name: string): number | undefined {
  const xs = samples.filter((s) => s.name === name || s.name === `${name}_total`);
  return xs.length === 0 ? undefined : xs.reduce((a, s) => a + s.value, 0);
}

export interface PromHistogram {
  name: string;
  count: number;
  sum: number;
  /** Upper bound of the bucket holding the q-quantile (Prometheus-style, bucket resolution). */
  quantile(q: number): number;
}

/** A histogram summed over its label sets; undefined when absent. */
export function promHistogram(samples: readonly PromSample[], name: string): PromHistogram | undefined {
  const buckets = new Map<number, number>();
  for (const s of samples) {
    if (s.name !== `${name}_bucket`) continue;
    const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
    buckets.set(le, (buckets.get(le) ?? 0) + s.value);
  }
  if (buckets.size === 0) return undefined;
  const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
  const count = promSum(samples, `${name}_count`) ?? sorted[sorted.length - 1]![1];
  const sum = promSum(samples, `${name}_sum`) ?? NaN;
  return {
    name,
    count,
    sum,
    quantile(q: number): number {
      if (count === 0) return NaN;
      const rank = q * count;
      for (const [le, c] of sorted) if (c >= rank) return le;
      return Infinity;
    },
  };
}

/** Names of the histograms in the text whose name matches `re`. */
export function histogramNames(samples: readonly PromSample[], re: RegExp): string[] {
  return [...new Set(samples.filter((s) => s.name.endsWith('_bucket')).map((s) => s.name.slice(0, -'_bucket'.length)))].filter((n) =>
    re.test(n),
  );
}
