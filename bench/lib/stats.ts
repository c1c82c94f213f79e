/** Small, dependency-free statistics for benchmark samples. */

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Nearest-rank percentile, p in [0, 100]. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = Float64Array.from(xs).sort();
  const rank = Math.min(s.length, Math.max(1, Math.ceil((p / 100) * s.length)));
  return s[rank - 1]!;
}

export function mean(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  let t = 0;
  for (const x of xs) t += x;
  return t / xs.length;
}

export function min(xs: readonly number[]): number {
  let m = NaN;
  for (const x of xs) if (!(x >= m)) m = x;
  return m;
}

export function max(xs: readonly number[]): number {
  let m = NaN;
  for (const x of xs) if (!(x <= m)) m = x;
  return m;
}

/** Human-readable number: 12345 -> "12.3k", 0.0123 -> "0.0123". */
export function fmt(x: number, digits = 3): string {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a >= 1e9) return `${(x / 1e9).toPrecision(digits)}G`;
  if (a >= 1e6) return `${(x / 1e6).toPrecision(digits)}M`;
  if (a >= 1e4) return `${(x / 1e3).toPrecision(digits)}k`;
  if (a >= 100) return x.toFixed(0);
  if (a === 0) return '0';
  return x.toPrecision(digits);
}

export function fmtRatio(x: number): string {
  return Number.isFinite(x) ? `${x.toFixed(2)}x` : String(x);
}

/** High-resolution wall clock in ms (same clock for producer stamps and commit times in one process). */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Counts per integer value (e.g. latency in whole ms): a lossless, compact form of many integer samples. */
export function histogram(xs: readonly number[]): Record<string, number> {
  const h = new Map<number, number>();
  for (const x of xs) h.set(x, (h.get(x) ?? 0) + 1);
  return Object.fromEntries([...h].sort((a, b) => a[0] - b[0]).map(([k, v]) => [String(k), v]));
}
