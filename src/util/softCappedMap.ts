/**
 * A Map that cannot grow without bound: past `softCap` entries, an insert
 * prunes it to 3/4 of the cap, first dropping entries `isStale` says are
 * useless, then the oldest-inserted ones. Pruning to 3/4 (not to the cap)
 * makes the cost amortised O(1) per insert.
 *
 * Used for per-partition bookkeeping whose loss only costs a re-test, a
 * re-measured estimate or a re-learned rate, never correctness (the dedup
 * memory policy's cooldown deadlines and footprint hints, the compactor's
 * merge widths), so a workload churning through unboundedly many partitions
 * cannot leak them. Evicting one entry at a time instead (Map.delete of the
 * first key per insert) cost ~32 us an insert at 64 Ki entries: V8 leaves
 * deleted entries as holes that the next first-key lookup walks.
 *
 * Insertion order is refreshed on set (delete + set), so "oldest" means
 * least recently written.
 */
export class SoftCappedMap<K, V> {
  private readonly map = new Map<K, V>();

  constructor(
    readonly softCap: number,
    private readonly isStale: (value: V) => boolean = () => false,
  ) {}

  get size(): number {
    return this.map.size;
  }
  get(key: K): V | undefined {
    return this.map.get(key);
  }
  has(key: K): boolean {
    return this.map.has(key);
  }
  delete(key: K): boolean {
    return this.map.delete(key);
  }
  clear(): void {
    this.map.clear();
  }
  entries(): IterableIterator<[K, V]> {
    return this.map.entries();
  }

  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.softCap) this.prune();
  }

  /** Prunes to 3/4 of the cap: stale entries first, then the oldest. */
  prune(): void {
    const target = Math.floor((this.softCap * 3) / 4);
    for (const [k, v] of this.map) {
      if (this.map.size <= target) return;
      if (this.isStale(v)) this.map.delete(k);
    }
    for (const k of this.map.keys()) {
      if (this.map.size <= target) return;
      this.map.delete(k);
    }
  }
}
