import type { PartitionEntry } from './entry.js';

/**
 * The resident entries in LRU order with their summed byte accounting. Maps
 * the seed's RwLock<HashMap<pid, Arc<Mutex<Entry>>>> to one Map: Node runs
 * one flush step at a time, so no lock is needed; the single-flight rule per
 * partition is asserted by the cache.
 *
 * Order: a Map iterates in insertion order, and touch() re-inserts, so the
 * first entries are the least recently used. With a non-decreasing clock
 * this is also ascending lastUsedMs, which lets victim search stop at the
 * first recently used entry (if the clock ever stepped back we would only
 * find fewer victims: the safe direction).
 *
 * Accounting: total = sum of each entry's accountedBytes, refreshed by
 * refresh() after any mutation that can change an entry's size.
 */
export class ResidentSet {
  private readonly map = new Map<number, PartitionEntry>();
  private total = 0;

  get size(): number {
    return this.map.size;
  }
  get totalBytes(): number {
    return this.total;
  }
  get(pid: number): PartitionEntry | undefined {
    return this.map.get(pid);
  }
  values(): IterableIterator<PartitionEntry> {
    return this.map.values();
  }

  /** Inserts (or replaces) pid's entry as the most recently used. Returns the replaced entry. */
  set(pid: number, entry: PartitionEntry, nowMs: number): PartitionEntry | undefined {
    const old = this.delete(pid);
    entry.lastUsedMs = nowMs;
    entry.accountedBytes = entry.bytes;
    this.total += entry.accountedBytes;
    this.map.set(pid, entry);
    return old;
  }

  delete(pid: number): PartitionEntry | undefined {
    const e = this.map.get(pid);
    if (e === undefined) return undefined;
    this.map.delete(pid);
    this.total -= e.accountedBytes;
    return e;
  }

  /** Marks pid used now: most recently used, and protected by the recent-use guard. */
  touch(pid: number, entry: PartitionEntry, nowMs: number): void {
    entry.lastUsedMs = nowMs;
    this.map.delete(pid);
    this.map.set(pid, entry);
  }

  /** Re-reads an entry's size into the total. */
  refresh(entry: PartitionEntry): void {
    const b = entry.bytes;
    this.total += b - entry.accountedBytes;
    entry.accountedBytes = b;
  }

  /**
   * The least recently used entries, other than `exclude`, last used before
   * `usedBeforeMs`, whose bytes add up to at least `needBytes`, in eviction
   * order; undefined if all such entries together are not enough (then the
   * caller evicts nothing: a partial eviction would free memory without
   * admitting anyone).
   */
  victims(needBytes: number, usedBeforeMs: number, exclude: number): number[] | undefined {
    const out: number[] = [];
    let freed = 0;
    for (const [pid, e] of this.map) {
      if (freed >= needBytes) break;
      if (pid === exclude) continue;
      if (e.lastUsedMs >= usedBeforeMs) break;
      out.push(pid);
      freed += e.accountedBytes;
    }
    return freed >= needBytes ? out : undefined;
  }

  /** Least recently used pid other than `exclude` (optionally only among those used before a time). */
  lru(exclude: number, usedBeforeMs = Infinity): number | undefined {
    for (const [pid, e] of this.map) {
      if (pid === exclude) continue;
      return e.lastUsedMs < usedBeforeMs ? pid : undefined;
    }
    return undefined;
  }

  clear(): void {
    this.map.clear();
    this.total = 0;
  }
}
