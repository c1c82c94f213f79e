import type pg from 'pg';
import type { DedupCache } from '../dedup/index.js';
import { fetchWindow, readTails, type WindowSnapshot } from '../engine/windowFetch.js';

/** How a window is fetched (fetchWindow; tests put a gate in front of it). */
export type WindowFetch = typeof fetchWindow;

/**
 * A partition whose tail (offsets above its hash runs) is at most this long
 * is pushed while its window is fetched, on a lookup of all its items
 * (CacheWatermarks): the lookup reads its runs and a short tail, the cold
 * path's cost. A longer tail (a partition never compacted) would make every
 * such push read it whole, so its flushes wait for the fetch instead.
 */
export const COLD_TAIL_OFFSETS = 4096;
/** Window fetches under way at once per broker (each holds a pool connection for its COPY). */
export const MAX_CONCURRENT_FETCHES = 2;
/**
 * Builds waiting for a fetch slot, at most. Past it no build is started: the
 * partition is pushed on a lookup of its items, as a suppressed one is, and
 * asks again on a later flush. Without the cap, a bundle spread over more new
 * partitions than the fetches can serve (100 k partitions, one item each)
 * queues a fetch per item, and the queue only grows.
 */
export const MAX_QUEUED_FETCHES = 64;

/** One partition's background build: its window fetch, then its install. */
export interface WindowBuild {
  /**
   * The fetch has its slot. Before that its state is not known soon, and a
   * flush waits for it only when its tail is long (CacheWatermarks): a push
   * waiting behind every queued fetch ran at the fetches' rate, ~1 k items a
   * second over 100 k partitions.
   */
  started: boolean;
  /** Resolves once the fetch has read the partition's state (or failed, or was refused). */
  readonly stateKnown: Promise<void>;
  /** Resolves once the fetch is over (snapshot ready, refused or failed). */
  readonly finished: Promise<void>;
  /**
   * The partition's tail when its state was read, or, while the build is
   * queued, as readQueuedTails read it (undefined before, or when the read
   * failed).
   */
  tailOffsets: number | undefined;
  snapshot: WindowSnapshot | undefined;
}

/**
 * Full-window fetches for the dedup cache, off the flush path (issue 38: a
 * broker must not stop the world to hydrate). CacheWatermarks starts one when
 * the cache asks for a (re)build; meanwhile the partition's flushes go on:
 * with the entry it has (a filter being refreshed or promoted), on a lookup
 * of all their items if its tail is short (or not known), or waiting for the
 * fetch if its tail is long; a queued fetch a push waits for goes to the
 * front of the queue.
 *
 * States of a partition here: none -> queued (waiting for a fetch slot) ->
 * fetching -> ready (snapshot held) -> installed (gone from here); or
 * fetching -> gone, when the admission refused it or the fetch failed
 * (cache.endFetch: the partition answers -1 until a later build). A
 * partition asked for while MAX_QUEUED_FETCHES builds are queued stays at
 * none (start returns undefined).
 *
 * Why the install is complete: cache.beginFetch() is called before the
 * fetch starts, so every append reported from then on is kept, and the
 * install replays those above the snapshot (DedupCache.install). An install
 * happens only where no push of the partition is between its SQL call and its
 * report: when the fetch ends and no flush of it is under way, or at the
 * start of its next flush (installReady), before that flush's push.
 */
export class WindowBuilds {
  private readonly builds = new Map<number, WindowBuild>();
  /** Builds waiting for a fetch slot, in the order they get one. */
  private readonly queue: { pid: number; go: () => void }[] = [];
  /** Fetches under way (at most MAX_CONCURRENT_FETCHES). */
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly cache: DedupCache,
    private readonly pool: pg.Pool,
    private readonly onFailure: (err: unknown, partitionId: number) => void,
    private readonly fetch: WindowFetch = fetchWindow,
  ) {}

  get(pid: number): WindowBuild | undefined {
    return this.builds.get(pid);
  }

  /** Starts pid's build unless one is under way; returns it, or undefined when the queue is full (no build). */
  start(pid: number): WindowBuild | undefined {
    const existing = this.builds.get(pid);
    if (existing !== undefined) return existing;
    if (this.running.size >= MAX_CONCURRENT_FETCHES && this.queue.length >= MAX_QUEUED_FETCHES) return undefined;
    let stateKnown!: () => void;
    let finished!: () => void;
    const b: WindowBuild = {
      started: false,
      stateKnown: new Promise<void>((r) => (stateKnown = r)),
      finished: new Promise<void>((r) => (finished = r)),
      tailOffsets: undefined,
      snapshot: undefined,
    };
    this.builds.set(pid, b);
    this.cache.beginFetch(pid);
    const run = async (): Promise<void> => {
      b.started = true;
      try {
        b.snapshot = await this.fetch(this.pool, pid, (st) => {
          b.tailOffsets = st.tailOffsets;
          const admitted = this.cache.admitRebuild(pid, st.inWindowHashes);
          stateKnown();
          return admitted;
        });
      } catch (err) {
        this.onFailure(err, pid);
      } finally {
        stateKnown();
        if (b.snapshot === undefined) {
          this.builds.delete(pid);
          this.cache.endFetch(pid);
        } else if (!this.cache.isFlushing(pid)) {
          this.installReady(pid);
        }
        finished();
      }
    };
    const go = (): void => {
      const p = run().finally(() => {
        this.running.delete(p);
        this.queue.shift()?.go();
      });
      this.running.add(p);
    };
    if (this.running.size < MAX_CONCURRENT_FETCHES) go();
    else this.queue.push({ pid, go });
    return b;
  }

  /** Moves pid's queued build to the front of the queue (a push waits for it). */
  prioritise(pid: number): void {
    const i = this.queue.findIndex((q) => q.pid === pid);
    if (i > 0) this.queue.unshift(...this.queue.splice(i, 1));
  }

  /**
   * Reads, in one statement, the tails of those of `pids` whose build is
   * queued and whose tail is not known yet, and keeps them on the builds.
   * Advisory (CacheWatermarks decides with it whether a push waits or looks
   * up, both exact): on failure the tails stay unknown.
   */
  async readQueuedTails(pids: readonly number[]): Promise<void> {
    const want = pids.filter((p) => {
      const b = this.builds.get(p);
      return b !== undefined && !b.started && b.tailOffsets === undefined;
    });
    if (want.length === 0) return;
    let tails: Map<number, number>;
    try {
      tails = await readTails(this.pool, want);
    } catch {
      // Handled by the fallback: unknown tails are looked up, and a database
      // that cannot answer this fails the push or its lookup, which report it.
      return;
    }
    for (const [p, tail] of tails) {
      const b = this.builds.get(p);
      if (b !== undefined && b.tailOffsets === undefined) b.tailOffsets = tail;
    }
  }

  /** Installs pid's fetched snapshot, if one is ready. Only where no push of pid is under way (see the class comment). */
  installReady(pid: number): void {
    const b = this.builds.get(pid);
    const s = b?.snapshot;
    if (s === undefined) return;
    this.builds.delete(pid);
    this.cache.install(pid, s.windowSeconds, s.lastOffset, s.txnsStart, s.rows, s.fetchedAtMs);
  }

  /** Builds known (queued, fetching or ready). */
  get size(): number {
    return this.builds.size;
  }

  /** Resolves once no build is queued or fetching (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.race(this.running);
  }
}
