import type pg from 'pg';
import type { SegmentOutcome } from '../engine/logEngine.js';
import { NO_VOUCH, type PendingSegment, type Vouch, type WatermarkSource } from '../engine/writer.js';
import { fetchWindow } from '../engine/windowFetch.js';
import type { DedupCache } from '../dedup/index.js';
import type { MetricsRegistry } from '../telemetry/metrics.js';

/**
 * Connects the broker dedup cache (pure, src/dedup) to the write path: before
 * a push it hydrates what needs hydrating (full-window fetch, gated by the
 * cache's admission policy) and asks for p_verified; after the push it
 * reports each outcome back so the watermark advances or the entry is
 * disqualified.
 *
 * Soundness does not rest here: every answer this class gives is either the
 * cache's vouched watermark or -1, and SQL re-checks whatever the watermark
 * does not cover. A failed hydration simply leaves the partition at -1.
 */
export class CacheWatermarks implements WatermarkSource {
  private readonly hydrationFailures;

  constructor(
    private readonly cache: DedupCache,
    private readonly pool: pg.Pool,
    metrics?: MetricsRegistry,
    private readonly onError: (err: unknown, partitionId: number) => void = () => undefined,
    /**
     * false: a local hit answers -1 (the seed's rule: the full-window probe)
     * instead of naming its offsets. Only benchmarks turn it off, to measure
     * what hints save; both are exact.
     */
    private readonly hints = true,
  ) {
    this.hydrationFailures = metrics?.counter(
      'queen_dedup_hydration_failures_total',
      'Cache hydrations that failed (the partition probes with -1 meanwhile)',
    );
    if (metrics) {
      metrics
        .gauge('queen_dedup_suppressed_partitions', 'Partitions suppressed by the cache memory policy')
        .collect(() => cache.suppressedCount());
      metrics.gauge('queen_dedup_resident_bytes', 'Bytes accounted to resident cache entries').collect(() => cache.residentBytes());
      metrics.counterFrom('queen_dedup_hydrations_total', 'Full-window cache hydrations', () => cache.stats.hydrations);
      metrics.counterFrom('queen_dedup_vouched_total', 'Segments sent with a vouched watermark', () => cache.stats.vouched);
      metrics.counterFrom(
        'queen_dedup_hinted_total',
        'Vouched segments that named their local hits for positional checks',
        () => cache.stats.hinted,
      );
    }
  }

  async beforePush(segments: readonly PendingSegment[]): Promise<Vouch[]> {
    const begun: number[] = [];
    try {
      for (const s of segments) {
        this.cache.beginFlush(s.partitionId);
        begun.push(s.partitionId);
      }
      const out: Vouch[] = [];
      for (const s of segments) {
        const decision = this.cache.prepare(s.partitionId, s.windowSeconds);
        if (decision === 'hydrate') await this.hydrate(s.partitionId);
        const { verified, hits } = this.hints
          ? this.cache.vouchWithHints(s.partitionId, s.hashes, s.count)
          : { verified: this.cache.verifiedFor(s.partitionId, s.hashes, s.count), hits: undefined };
        // The claim is only as wide as the window the entry was built for.
        out.push(verified < 0 ? NO_VOUCH : { verified, windowSeconds: this.cache.vouchedWindow(s.partitionId), hits });
      }
      return out;
    } catch (err) {
      // Never leave a partition marked in flight: that would wedge it.
      for (const pid of begun) {
        this.cache.recordUnknown(pid);
        this.cache.endFlush(pid);
      }
      throw err;
    }
  }

  afterPush(segments: readonly PendingSegment[], outcomes: readonly SegmentOutcome[]): void {
    // segments[i] is what was appended of the i-th segment (its frames, not its hinted items).
    const now = Date.now();
    segments.forEach((s, i) => {
      const o = outcomes[i]!;
      // The window SQL used is authoritative: a change detected here forces
      // the sticky full rehydration on the next flush.
      this.cache.prepare(s.partitionId, o.windowSeconds);
      if (o.assignedBase !== null) this.cache.recordAppend(s.partitionId, o.assignedBase, s.hashes, s.count, now);
      this.cache.endFlush(s.partitionId);
    });
  }

  pushFailed(segments: readonly PendingSegment[]): void {
    for (const s of segments) {
      this.cache.recordUnknown(s.partitionId);
      this.cache.endFlush(s.partitionId);
    }
  }

  private async hydrate(partitionId: number): Promise<void> {
    try {
      const snap = await fetchWindow(this.pool, partitionId, (st) => this.cache.admitRebuild(partitionId, st.inWindowHashes));
      if (!snap) return;
      this.cache.install(partitionId, snap.windowSeconds, snap.lastOffset, snap.txnsStart, snap.rows, snap.fetchedAtMs);
    } catch (err) {
      // Not fatal: the partition answers -1 (full probe) until a hydration succeeds.
      this.hydrationFailures?.inc();
      this.onError(err, partitionId);
    }
  }
}
