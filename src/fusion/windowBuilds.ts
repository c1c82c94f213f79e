import type pg from 'pg';
import type { DedupCache } from '../dedup/index.js';
import { fetchWindows, readTails, type WindowSnapshot } from '../engine/windowFetch.js';

/** How windows are fetched (fetchWindows; tests put a gate in front of it). */
export type WindowFetch = typeof fetchWindows;

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
 * queues a fetch per item, and the queue only grows. With batched fetches
 * the queue drains FETCH_BATCH at a time: a cap of 64 started at most 66
 * builds a bundle, and at 100 k partitions an ample cache held 13 k of them
 * after the quick bench's warm-up, its pushes still looked up; at 1 024 it
 * held all of them within the timed passes.
 */
export const MAX_QUEUED_FETCHES = 1024;
/**
 * Queued builds one fetch slot takes at once, in one transaction and one
 * COPY (fetchWindows), when the queue holds more than one: a large window
 * among them is deferred and fetched alone (BATCH_MAX_HASHES).
 */
export const FETCH_BATCH = 256;

/** One partition's background build: its window fetch, then its install. */
export interface WindowBuild {
  /**
   * The fetch has its slot. Before that its state is not known soon, and a
   * flush waits for it only when its tail is long (CacheWatermarks): a push
   * waiting behind every queued fetch ran at the fetches' rate, ~1 k items a
   * second over 100 k partitions. False again when a batch deferred it.
   */
  started: boolean;
  /** Resolves once a fetch has read the partition's state (or failed, or was refused, or deferred it). */
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
 * front of the queue, to be fetched alone.
 *
 * States of a partition here: none -> queued (waiting for a fetch slot) ->
 * fetching -> ready (snapshot held) -> installed (gone from here); or
 * fetching -> gone, when the admission refused it or the fetch failed
 * (cache.endFetch: the partition answers -1 until a later build); or
 * fetching -> queued (solo), when its batch deferred it as too large to
 * share one. A partition asked for while MAX_QUEUED_FETCHES builds are
 * queued stays at none (start returns undefined).
 *
 * A free slot takes the queue's front: alone if it is solo (deferred, or a
 * push waits for it), else with up to FETCH_BATCH - 1 more that are not
 * solo, all in one fetch. At 100 k partitions of a few messages each, a
 * fetch's round trips were its cost; a batch pays them once.
 *
 * Why the install is complete: cache.beginFetch() is called before the
 * fetch starts, so every append reported from then on is kept, and the
 * install replays those above the snapshot (DedupCache.install). An install
 * happens only where no push of the partition is between its SQL call and its
 * report: when its fetch hands the snapshot over and no flush of it is under
 * way, or at the start of its next flush (installReady), before that flush's
 * push.
 */
export class WindowBuilds {
  private readonly builds = new Map<number, Pending>();
  /** Builds waiting for a fetch slot, in the order they get one. */
  private readonly queue: number[] = [];
  /** Fetches under way (at most MAX_CONCURRENT_FETCHES). */
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly cache: DedupCache,
    private readonly pool: pg.Pool,
    /** A fetch failed: the partitions it had not settled (reported once a fetch, however many it held). */
    private readonly onFailure: (err: unknown, partitionIds: readonly number[]) => void,
    private readonly fetch: WindowFetch = fetchWindows,
  ) {}

  get(pid: number): WindowBuild | undefined {
    return this.builds.get(pid)?.build;
  }

  /** Starts pid's build unless one is under way; returns it, or undefined when the queue is full (no build). */
  start(pid: number): WindowBuild | undefined {
    const existing = this.builds.get(pid);
    if (existing !== undefined) return existing.build;
    if (this.running.size >= MAX_CONCURRENT_FETCHES && this.queue.length >= MAX_QUEUED_FETCHES) return undefined;
    let stateKnown!: () => void;
    let finished!: () => void;
    const build: WindowBuild = {
      started: false,
      stateKnown: new Promise<void>((r) => (stateKnown = r)),
      finished: new Promise<void>((r) => (finished = r)),
      tailOffsets: undefined,
      snapshot: undefined,
    };
    this.builds.set(pid, { build, stateKnown, finished, solo: false, settled: false });
    this.cache.beginFetch(pid);
    this.queue.push(pid);
    this.pump();
    return build;
  }

  /** Moves pid's queued build to the front of the queue, to be fetched alone (a push waits for it). */
  prioritise(pid: number): void {
    const i = this.queue.indexOf(pid);
    if (i < 0) return;
    this.builds.get(pid)!.solo = true;
    if (i > 0) this.queue.unshift(...this.queue.splice(i, 1));
  }

  /** Gives free fetch slots the queue's front (see the class comment). */
  private pump(): void {
    while (this.running.size < MAX_CONCURRENT_FETCHES && this.queue.length > 0) {
      const batch = [this.queue.shift()!];
      if (!this.builds.get(batch[0]!)!.solo) {
        while (batch.length < FETCH_BATCH && this.queue.length > 0 && !this.builds.get(this.queue[0]!)!.solo) {
          batch.push(this.queue.shift()!);
        }
      }
      const p = this.run(batch).finally(() => {
        this.running.delete(p);
        this.pump();
      });
      this.running.add(p);
    }
  }

  private async run(pids: number[]): Promise<void> {
    const mine = pids.map((pid) => this.builds.get(pid)!);
    for (const m of mine) {
      m.build.started = true;
      m.settled = false;
    }
    const deferred: number[] = [];
    try {
      await this.fetch(
        this.pool,
        pids,
        (pid, st) => {
          const m = this.builds.get(pid)!;
          m.build.tailOffsets = st.tailOffsets;
          const admitted = this.cache.admitRebuild(pid, st.inWindowHashes);
          m.stateKnown();
          return admitted;
        },
        (pid, o) => {
          const m = this.builds.get(pid)!;
          m.settled = true;
          if (o.kind === 'deferred') {
            // Its state was read: a flush waiting for it decides on its tail
            // now (a short one is looked up) instead of after its solo fetch.
            m.build.tailOffsets = o.state.tailOffsets;
            m.stateKnown();
            deferred.push(pid);
          } else this.settle(pid, m, o.kind === 'snapshot' ? o.snapshot : undefined);
        },
      );
    } catch (err) {
      const failed = pids.filter((_, i) => !mine[i]!.settled);
      this.onFailure(err, failed);
      for (const [i, pid] of pids.entries()) if (!mine[i]!.settled) this.settle(pid, mine[i]!, undefined);
    }
    // Deferred: queued again at the front, in their order, each to be fetched alone.
    for (const pid of deferred.reverse()) {
      const m = this.builds.get(pid)!;
      m.build.started = false;
      m.solo = true;
      this.queue.unshift(pid);
    }
  }

  /** pid's fetch is over: install its snapshot (or hold it for the next flush), or drop the build. */
  private settle(pid: number, m: Pending, snapshot: WindowSnapshot | undefined): void {
    m.stateKnown();
    m.build.snapshot = snapshot;
    if (snapshot === undefined) {
      this.builds.delete(pid);
      this.cache.endFetch(pid);
    } else if (!this.cache.isFlushing(pid)) {
      this.installReady(pid);
    }
    m.finished();
  }

  /**
   * Reads, in one statement, the tails of those of `pids` whose build is
   * queued and whose tail is not known yet, and keeps them on the builds.
   * Advisory (CacheWatermarks decides with it whether a push waits or looks
   * up, both exact): on failure the tails stay unknown.
   */
  async readQueuedTails(pids: readonly number[]): Promise<void> {
    const want = pids.filter((p) => {
      const b = this.builds.get(p)?.build;
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
      const b = this.builds.get(p)?.build;
      if (b !== undefined && b.tailOffsets === undefined) b.tailOffsets = tail;
    }
  }

  /** Installs pid's fetched snapshot, if one is ready. Only where no push of pid is under way (see the class comment). */
  installReady(pid: number): void {
    const s = this.builds.get(pid)?.build.snapshot;
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

/** A build and what settles it. */
interface Pending {
  build: WindowBuild;
  stateKnown: () => void;
  finished: () => void;
  /** Fetched alone: deferred by a batch as too large, or a push waits for it. */
  solo: boolean;
  /** Its current fetch has handed over its outcome. */
  settled: boolean;
}
