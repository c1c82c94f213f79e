/**
 * Counts of non-negative values in power-of-two buckets (bucket k holds
 * values in [2^(k-1), 2^k), bucket 0 holds 0), with quantiles read back as
 * the bucket's upper bound. Cheap enough for every push; exact enough to say
 * "a probe reads ~1 k hashes at the median and ~64 k at p99".
 */
export class Log2Histogram {
  private readonly buckets = new Float64Array(54);
  private n = 0;

  observe(v: number): void {
    const k = v <= 0 ? 0 : Math.min(53, Math.floor(Math.log2(v)) + 1);
    this.buckets[k]!++;
    this.n++;
  }

  get count(): number {
    return this.n;
  }

  /** Upper bound of the bucket holding quantile q (0..1); 0 when empty. */
  quantile(q: number): number {
    if (this.n === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.n));
    let seen = 0;
    for (let k = 0; k < this.buckets.length; k++) {
      seen += this.buckets[k]!;
      if (seen >= rank) return k === 0 ? 0 : 2 ** k - 1;
    }
    return 2 ** 53;
  }

  reset(): void {
    this.buckets.fill(0);
    this.n = 0;
  }
}
