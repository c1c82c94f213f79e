import { NEWCOMER_GUARD_MS, RECENT_USE_MS, REUSE_GUARD_FACTOR, REUSE_GUARD_MAX_MS } from './constants.js';
import type { PartitionEntry } from './entry.js';

/**
 * How long after its last use an entry may not be evicted to admit another
 * (the recent-use guard). An entry is protected while it has been idle for
 * no longer than it is expected to be: twice the idle time before its latest return
 * (at least RECENT_USE_MS, at most REUSE_GUARD_MAX_MS), or NEWCOMER_GUARD_MS
 * if it has not returned yet since it became resident.
 *
 * Why not a fixed 5 s: under a cyclic order (a round-robin over more
 * partitions than fit, LRU's worst case) with passes longer than 5 s, every
 * resident entry is idle longer than the guard just before its next use, so
 * each admission (every cooldown expiry) evicted a partition about to be
 * used, which came back the same way: make bench's slow scenario (8 s a
 * pass) rehydrated on 22-26 % of flushes, and a host slowed by steal tipped
 * the main scenario into it (2 s passes became 17 s). Protecting an entry for
 * its own rhythm keeps a cycle of any period up to REUSE_GUARD_MAX_MS / 2
 * resident; an entry whose partition went quiet loses the protection after
 * twice its rhythm. The guard only chooses which partitions vouch: never a
 * verdict.
 */
export function guardMs(e: PartitionEntry): number {
  if (e.reuseGapMs < 0) return NEWCOMER_GUARD_MS;
  return Math.max(RECENT_USE_MS, Math.min(REUSE_GUARD_FACTOR * e.reuseGapMs, REUSE_GUARD_MAX_MS));
}

/**
 * The resident entries in LRU order with their summed byte accounting. Maps
 * the seed's RwLock<HashMap<pid, Arc<Mutex<Entry>>>> to one Map: Node runs
 * one flush step at a time, so no lock is needed; the single-flight rule per
 * partition is asserted by the cache.
 *
 * Order: a Map iterates in insertion order, and touch() re-inserts, so the
 * first entries are the least recently used. With a non-decreasing clock
 * this is also ascending lastUsedMs, which lets victim search stop at the
 * first entry used within RECENT_USE_MS (every guard is at least that long;
 * if the clock ever stepped back we would only find fewer victims: the safe
 * direction). Entries before it are checked one by one against their own
 * guard.
 *
 * Accounting: total = sum of each entry's accountedBytes, refreshed by
 * refresh() after any mutation that can change an entry's size.
 *
 * The exact entries are also kept in their own LRU order (`exact`), so the
 * cache finds the least recently used one to demote without walking the
 * filter entries; retiered() takes an entry out of it when it is demoted.
 */
export class ResidentSet {
  private readonly map = new Map<number, PartitionEntry>();
  private readonly exact = new Map<number, PartitionEntry>();
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
  entries(): IterableIterator<[number, PartitionEntry]> {
    return this.map.entries();
  }

  /** Inserts (or replaces) pid's entry as the most recently used. Returns the replaced entry. */
  set(pid: number, entry: PartitionEntry, nowMs: number): PartitionEntry | undefined {
    const old = this.delete(pid);
    entry.lastUsedMs = nowMs;
    // A rebuilt partition keeps its rhythm; a new one is a newcomer.
    entry.reuseGapMs = old?.reuseGapMs ?? -1;
    entry.installUsePending = true;
    entry.accountedBytes = entry.bytes;
    this.total += entry.accountedBytes;
    this.map.set(pid, entry);
    if (entry.tier === 'exact') this.exact.set(pid, entry);
    return old;
  }

  delete(pid: number): PartitionEntry | undefined {
    const e = this.map.get(pid);
    if (e === undefined) return undefined;
    this.map.delete(pid);
    this.exact.delete(pid);
    this.total -= e.accountedBytes;
    return e;
  }

  /** Marks pid used now: most recently used, and protected by the recent-use guard (its idle time sizes the guard). */
  touch(pid: number, entry: PartitionEntry, nowMs: number): void {
    if (entry.installUsePending) entry.installUsePending = false;
    else entry.reuseGapMs = Math.max(0, nowMs - entry.lastUsedMs);
    entry.lastUsedMs = nowMs;
    this.map.delete(pid);
    this.map.set(pid, entry);
    if (entry.tier === 'exact') {
      this.exact.delete(pid);
      this.exact.set(pid, entry);
    }
  }

  /** pid's entry changed tier (an exact entry was demoted to a filter): re-read its size and its place in the exact order. */
  retiered(pid: number, entry: PartitionEntry): void {
    if (entry.tier !== 'exact') this.exact.delete(pid);
    this.refresh(entry);
  }

  /** The least recently used exact entry other than `exclude` (undefined when there is none). */
  lruExact(exclude: number): number | undefined {
    for (const pid of this.exact.keys()) if (pid !== exclude) return pid;
    return undefined;
  }

  /** Exact entries resident. */
  get exactCount(): number {
    return this.exact.size;
  }

  /** Re-reads an entry's size into the total. */
  refresh(entry: PartitionEntry): void {
    const b = entry.bytes;
    this.total += b - entry.accountedBytes;
    entry.accountedBytes = b;
  }

  /**
   * The least recently used entries, other than `exclude`, whose guard has
   * run out at nowMs, whose bytes add up to at least `needBytes`, in eviction
   * order (`pids`); or, if all such entries together are not enough (then the
   * caller evicts nothing: a partial eviction would free memory without
   * admitting anyone), `calmUntilMs`: no entry the walk passed can become a
   * victim before then (the earliest guard to run out among them, or the
   * first recently used entry leaving RECENT_USE_MS, after which every entry
   * follows). An entry used later, or one joining later, can only become a
   * victim later than that, except one whose use shortens its guard (a faster
   * rhythm): the caller keeps the answer for at most a second (cache.ts,
   * fits).
   */
  victims(needBytes: number, nowMs: number, exclude: number): { pids: number[] } | { calmUntilMs: number } {
    const out: number[] = [];
    let freed = 0;
    let calmUntilMs = Infinity;
    for (const [pid, e] of this.map) {
      if (freed >= needBytes) break;
      if (e.lastUsedMs >= nowMs - RECENT_USE_MS) {
        calmUntilMs = Math.min(calmUntilMs, e.lastUsedMs + RECENT_USE_MS);
        break;
      }
      if (pid === exclude) continue;
      const guardEnds = e.lastUsedMs + guardMs(e);
      if (nowMs <= guardEnds) {
        calmUntilMs = Math.min(calmUntilMs, guardEnds);
        continue;
      }
      out.push(pid);
      freed += e.accountedBytes;
    }
    return freed >= needBytes ? { pids: out } : { calmUntilMs };
  }

  /** Least recently used pid other than `exclude`; with nowMs, only among those whose guard has run out. */
  lru(exclude: number, nowMs?: number): number | undefined {
    for (const [pid, e] of this.map) {
      if (pid === exclude) continue;
      if (nowMs === undefined) return pid;
      if (e.lastUsedMs >= nowMs - RECENT_USE_MS) return undefined;
      if (nowMs - e.lastUsedMs > guardMs(e)) return pid;
    }
    return undefined;
  }

  clear(): void {
    this.map.clear();
    this.exact.clear();
    this.total = 0;
  }
}
