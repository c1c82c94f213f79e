import type pg from 'pg';
import { recentPartitions } from '../engine/recentPartitions.js';
import type { MetricsRegistry } from '../telemetry/metrics.js';
import { Component } from '../util/lifecycle.js';
import type { CacheWatermarks } from './cacheWatermarks.js';
import { FETCH_BATCH } from './windowBuilds.js';

/**
 * Share of the cache budget the prewarm fills at most, by its estimate.
 * Below the admission's 90 % line with room to spare: a warmed partition
 * never makes the admission evict or demote, and the partitions the traffic
 * turns out to need still fit beside the warmed ones.
 */
export const PREWARM_BUDGET_FRACTION = 0.5;

/**
 * Warms the dedup cache when the service starts: fetches, in the
 * background, the windows of the partitions written most recently within
 * their window (recentPartitions), until their estimated footprint reaches
 * PREWARM_BUDGET_FRACTION of the budget or `maxPartitions` were asked for.
 *
 * Why: a restarted broker otherwise builds each partition's entry on its
 * first push, and a partition with a long tail (nothing compacted it: an
 * ample cache never looks up) makes that push wait for its fetch. A service
 * pod draining 1 M Kafka records over 5 M stored spent about a second of its
 * drain so. It does not consume while it joins its Kafka group, which is
 * when this runs.
 *
 * Exactness: nothing here decides a verdict. A warmed entry is built as any
 * other (a full-window fetch in one snapshot, the appends reported
 * meanwhile replayed at install: WindowBuilds), and a partition not warmed
 * hydrates on its first push as before.
 *
 * States, on top of Component's: running -> warming (one pass, started by
 * start(), which does not wait for it) -> done. stop() ends the pass at its
 * next step and waits for it and for the fetches it started.
 */
export class CachePrewarm extends Component {
  private ending = false;
  private pass: Promise<void> | undefined;
  private readonly warmed;

  constructor(
    private readonly watermarks: CacheWatermarks,
    private readonly pool: pg.Pool,
    private readonly budgetBytes: number,
    private readonly maxPartitions: number,
    /** Accounted bytes of an exact entry of that many hashes (the dedup cache's estimate: fusion sees dedup's types only). */
    private readonly estimateBytes: (hashes: number) => number,
    metrics: MetricsRegistry | undefined,
    /** The pass failed (the candidates could not be read); the partitions hydrate on their first push instead. */
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {
    super('CachePrewarm');
    this.warmed = metrics?.counter(
      'queen_dedup_prewarm_partitions_total',
      'Partitions whose window the start-up prewarm fetched into the dedup cache',
    );
  }

  protected async onStart(): Promise<void> {
    this.pass = this.run().catch((err: unknown) => this.onError(err));
  }

  protected async onStop(): Promise<void> {
    this.ending = true;
    await this.pass;
  }

  /** Resolves once the pass is over and its fetches ended (tests). */
  async done(): Promise<void> {
    await this.pass;
  }

  private async run(): Promise<void> {
    if (this.maxPartitions <= 0 || this.budgetBytes <= 0) return;
    const candidates = await recentPartitions(this.pool, this.maxPartitions);
    const limit = PREWARM_BUDGET_FRACTION * this.budgetBytes;
    let bytes = 0;
    // A batch's worth at a time, waiting for it: the fetch queue never
    // fills (WindowBuilds caps it), so the builds pushes ask for meanwhile
    // still start.
    for (let i = 0; i < candidates.length && !this.ending; i += FETCH_BATCH) {
      for (const c of candidates.slice(i, i + FETCH_BATCH)) {
        // The estimate is an upper bound (every stored offset in window):
        // stop at the first that would pass the limit, keeping recency order.
        const need = this.estimateBytes(c.storedOffsets);
        if (bytes + need > limit) {
          await this.watermarks.builds.idle();
          return;
        }
        if (this.watermarks.warm(c.partitionId, c.windowSeconds) === undefined) continue;
        bytes += need;
        this.warmed?.inc();
      }
      await this.watermarks.builds.idle();
    }
  }
}
