import type { LogEngine, PartitionInfo } from './logEngine.js';

interface Memo {
  key: string;
  info: PartitionInfo;
  fetchedAt: number;
}

/**
 * Memo of (queue, partition) -> partition id and deduplication window, with a
 * TTL (30 s by default). The TTL bounds how long a /configure window change
 * can go unnoticed by the broker's layers 1 and 2 and by its cache; SQL always
 * reads the current window itself, so a stale memo never changes a verdict.
 * Every push result also carries the window SQL used (read in the push's own
 * transaction), which refreshes the memo for free: a partition pushed to at
 * least once a TTL is never provisioned again. (A partition's id never
 * changes: log_partitions rows are never deleted.)
 *
 * Bounded (MAX_MEMO_ENTRIES by default): past it, expired entries go
 * first, then the earliest provisioned, down to EVICT_TO of the cap, so one
 * overflow costs one scan and the next one waits for another tenth of the
 * cap. (Clearing the whole memo instead made a broker that serves about the
 * cap re-provision every partition, a call per 1 000, each time one entry
 * expired.)
 */
/** Soft cap on memoised partitions (~250 B each with byId). */
const MAX_MEMO_ENTRIES = 100_000;
/** An overflow evicts down to this share of the cap. */
const EVICT_TO = 0.9;

export class PartitionDirectory {
  private memo = new Map<string, Memo>();
  private byId = new Map<number, Memo>();

  constructor(
    private readonly engine: LogEngine,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
    private readonly maxEntries = MAX_MEMO_ENTRIES,
  ) {}

  static key(queue: string, partition: string): string {
    return `${queue}\x1f${partition}`;
  }

  /**
   * Each item's partition, in item order. A run of items naming the same
   * partition (fusion hands a bundle's items grouped by partition) costs one
   * memo lookup: the key is built and hashed once per run, not per item.
   */
  async resolveEach(items: readonly { queue: string; partition: string }[]): Promise<PartitionInfo[]> {
    const out = new Array<PartitionInfo>(items.length);
    let unresolved: (string | undefined)[] | undefined;
    const t = this.now();
    let prev: { queue: string; partition: string } | undefined;
    let prevInfo: PartitionInfo | undefined;
    let prevKey = '';
    for (let i = 0; i < items.length; i++) {
      const it = items[i]!;
      if (it.queue !== prev?.queue || it.partition !== prev.partition) {
        prev = it;
        prevKey = PartitionDirectory.key(it.queue, it.partition);
        const m = this.memo.get(prevKey);
        prevInfo = m && t - m.fetchedAt < this.ttlMs ? m.info : undefined;
      }
      if (prevInfo !== undefined) out[i] = prevInfo;
      else (unresolved ??= new Array<string | undefined>(items.length))[i] = prevKey;
    }
    if (unresolved !== undefined) {
      const pending = unresolved;
      const found = await this.resolve(items.filter((_, i) => pending[i] !== undefined));
      pending.forEach((k, i) => {
        if (k !== undefined) out[i] = found.get(k)!;
      });
    }
    return out;
  }

  async resolve(items: readonly { queue: string; partition: string }[]): Promise<Map<string, PartitionInfo>> {
    const out = new Map<string, PartitionInfo>();
    const missing = new Map<string, { queue: string; partition: string }>();
    const t = this.now();
    for (const it of items) {
      const k = PartitionDirectory.key(it.queue, it.partition);
      if (out.has(k) || missing.has(k)) continue;
      const m = this.memo.get(k);
      if (m && t - m.fetchedAt < this.ttlMs) out.set(k, m.info);
      else missing.set(k, { queue: it.queue, partition: it.partition });
    }
    if (missing.size > 0) {
      if (this.memo.size + missing.size > this.maxEntries) this.evict(t, missing.size);
      // Sorted so concurrent provisioners insert in one global order.
      const pairs = [...missing.values()].sort((a, b) =>
        a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0,
      );
      for (const info of await this.engine.provision(pairs)) {
        const k = PartitionDirectory.key(info.queue, info.partition);
        const memo = { key: k, info, fetchedAt: t };
        this.memo.delete(k); // re-set at the end: the map's order is the order of provisioning
        this.memo.set(k, memo);
        this.byId.set(info.partitionId, memo);
        out.set(k, info);
      }
    }
    return out;
  }

  /** A push answered with the window SQL used: the memo is as current as that push. */
  noteWindow(partitionId: number, windowSeconds: number): void {
    const m = this.byId.get(partitionId);
    if (m === undefined) return;
    if (m.info.windowSeconds !== windowSeconds) m.info = { ...m.info, windowSeconds };
    m.fetchedAt = this.now();
  }

  /** Memoised partitions (the tests read it). */
  get size(): number {
    return this.memo.size;
  }

  /** Makes room for `incoming` entries: expired ones first, then the earliest provisioned (the map's order). */
  private evict(t: number, incoming: number): void {
    for (const m of this.memo.values()) if (t - m.fetchedAt >= this.ttlMs) this.drop(m);
    const keep = Math.max(0, Math.floor(this.maxEntries * EVICT_TO) - incoming);
    for (const m of this.memo.values()) {
      if (this.memo.size <= keep) break;
      this.drop(m);
    }
  }

  private drop(m: Memo): void {
    this.memo.delete(m.key);
    if (this.byId.get(m.info.partitionId) === m) this.byId.delete(m.info.partitionId);
  }

  /** Forget everything (tests; a window change announced out of band). */
  clear(): void {
    this.memo.clear();
    this.byId.clear();
  }
}
