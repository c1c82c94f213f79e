import { NO_BOUND, type ItemsToLookUp, type LogEngine, type LookupInput, type SegmentOutcome } from '../engine/logEngine.js';
import { NO_VOUCH, type Hint, type PendingSegment, type Vouch, type WatermarkSource } from '../engine/writer.js';
import { HASH_BYTES } from '../util/txnHash.js';
import { COLD_TAIL_OFFSETS, WindowBuilds, type WindowBuild, type WindowFetch } from './windowBuilds.js';
import type { DedupCache, ItemSpans } from '../dedup/index.js';
import type { MetricsRegistry } from '../telemetry/metrics.js';
import { LookupPlacement, type LookupMode } from './lookupPlacement.js';

/** What failed on the way to a vouch: a window's hydration, or a bundle's lookup. */
export type DedupFailure = 'hydration' | 'lookup';

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
 *
 * A filter entry (src/dedup/entry.ts) vouches only for the items it clears;
 * its "maybe" items are looked up first, all of the bundle's in one
 * lock-free statement (LogEngine.lookup, sql/functions/lookup.sql), and
 * what the lookup finds is named as hints, exactly like an exact entry's
 * hits. Why the vouch that goes out is sound: for an item the filter
 * cleared, the entry knows nothing of it in (H, V] (the vouch rule); for a
 * maybe item, the lookup named its lowest in-window occurrence at or below
 * min(V, L), L its lastOffset: the item's span (the entry's generations
 * that may hold it) holds every such occurrence at or below V, and the
 * lookup names the lowest at or below L whenever it lies in the span; the
 * watermark sent is min(V, L), and SQL probes (min(V, L), last] for every
 * item under the row lock, as for any vouch. The window the
 * claim is made under is the smaller of the entry's and the lookup's, so a
 * window that grows after the lookup voids it in SQL. A lookup that fails
 * sends -1 for those segments (the full probe). A partition no entry vouches
 * for (none yet, suppressed, gapped, rebuilding) has all its items looked
 * up, and its vouch is the lookup's L alone: the
 * same argument with an entry that clears nothing.
 *
 * Where the lookup runs (LookupPlacement): apart, as above, or in the
 * push's own call, which takes the same two steps in SQL in the same order
 * (queen.log_push_looked_v1) and sends -1 for a segment whose lookup found
 * something; the segment then writes nothing and goes again.
 */
export class CacheWatermarks implements WatermarkSource {
  private readonly hydrationFailures;
  private readonly lookupFailures;
  /** Window fetches run off the flush path (windowBuilds.ts). */
  readonly builds: WindowBuilds;
  /** Whether a bundle's maybe items are looked up apart or in the push (lookupPlacement.ts). */
  readonly placement: LookupPlacement;

  constructor(
    private readonly cache: DedupCache,
    private readonly engine: LogEngine,
    metrics?: MetricsRegistry,
    /** A hydration or a lookup failed (named by `what`); the partition's segments go with -1 meanwhile. */
    private readonly onError: (err: unknown, partitionId: number, what: DedupFailure) => void = () => undefined,
    /**
     * false: a local hit answers -1 (the seed's rule: the full-window probe)
     * instead of naming its offsets. Only benchmarks turn it off, to measure
     * what hints save; both are exact.
     */
    private readonly hints = true,
    /** How windows are fetched (tests hold a fetch open with it). */
    fetch?: WindowFetch,
    /** Where maybe items are looked up; tests and benchmarks pin one way. */
    lookups: LookupMode = 'adaptive',
  ) {
    this.placement = new LookupPlacement(lookups);
    this.hydrationFailures = metrics?.counter(
      'queen_dedup_hydration_failures_total',
      'Cache hydrations that failed (the partition probes with -1 meanwhile)',
    );
    this.lookupFailures = metrics?.counter(
      'queen_lookup_failures_total',
      'Lookups that failed (their segments were pushed with -1, the full probe)',
    );
    this.builds = new WindowBuilds(
      cache,
      engine.pool,
      (err, pids) => {
        // Not fatal: the partitions answer -1 (full probe) until a build
        // succeeds. Counted per partition, reported once per failed fetch
        // (a batch holds up to FETCH_BATCH), naming its first partition.
        this.hydrationFailures?.inc(pids.length);
        if (pids.length > 0) this.onError(err, pids[0]!, 'hydration');
      },
      fetch,
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
      metrics.counterFrom(
        'queen_dedup_demotions_total',
        'Exact cache entries turned into filter entries to free memory',
        () => cache.stats.demotions,
      );
      metrics.counterFrom(
        'queen_dedup_filter_growths_total',
        'Filter generations opened for appends instead of refetching a window',
        () => cache.stats.filterGrowths,
      );
      metrics
        .gauge('queen_dedup_filter_partitions', 'Resident cache entries of the filter tier')
        .collect(() => cache.residentFilterEntries());
      // Densities: a pod's workers combine by min (the sparsest worker's), never a sum.
      metrics
        .gauge('queen_dedup_filter_bits_per_hash', 'Bits a hash that new filters are built with (lowered under memory pressure)', [], 'min')
        .collect(() => cache.filterBitsPerHash());
      metrics
        .gauge(
          'queen_dedup_filter_resident_bits_per_hash',
          'Bits a hash the resident filters hold (their false positives follow it); no value with none',
          [],
          'min',
        )
        // No series while a worker holds no filter, so it drops out of the
        // pod's min (an Infinity would travel to the primary as JSON null, 0).
        .collectLabeled(() => {
          const v = cache.residentFilterBitsPerHash();
          return v === undefined ? [] : [[{}, v]];
        });
    }
  }

  /**
   * Starts pid's window fetch ahead of any push (src/fusion/cachePrewarm.ts),
   * as a flush would: only when the cache asks for a build (prepare answers
   * 'hydrate': no entry, and room to admit one) and neither a flush nor a
   * build of pid is under way. The fetch installs when it ends, or the next
   * flush of pid installs it first (WindowBuilds). Returns the build, or
   * undefined when none was started.
   */
  warm(pid: number, windowSeconds: number): WindowBuild | undefined {
    if (this.cache.isFlushing(pid) || this.cache.hasVouchingEntry(pid) || this.builds.get(pid) !== undefined) return undefined;
    if (this.cache.prepare(pid, windowSeconds) !== 'hydrate') return undefined;
    return this.builds.start(pid);
  }

  async beforePush(segments: readonly PendingSegment[]): Promise<Vouch[]> {
    const begun: number[] = [];
    try {
      for (const s of segments) {
        this.cache.beginFlush(s.partitionId);
        begun.push(s.partitionId);
      }
      // First every segment's (re)build is started, so they fetch together;
      // then a partition with no entry that can vouch waits for its fetch,
      // unless its tail is short enough to look all its items up meanwhile.
      // A fetch still queued would read the tail only after every fetch
      // ahead of it, so the queued ones' tails are read at once, in one
      // statement: a short (or unknown) tail is looked up, a long one waits,
      // its fetch moved to the front. Either way the verdict is exact; the
      // tail only decides which costs less: at 100 k partitions, waiting
      // behind the queue (pushes at the fetches' rate); after a restart over
      // a window never compacted, reading a tail of ~600 k offsets per push
      // until its fetch comes (the restart row: 0.39x of the full rate over
      // its first 30 s in one run).
      for (const s of segments) {
        this.builds.installReady(s.partitionId);
        if (this.cache.prepare(s.partitionId, s.windowSeconds) === 'hydrate') this.builds.start(s.partitionId);
      }
      const unvouched = segments.filter((s) => this.builds.get(s.partitionId) !== undefined && !this.cache.hasVouchingEntry(s.partitionId));
      await this.builds.readQueuedTails(unvouched.map((s) => s.partitionId));
      const queuedLong = (b: WindowBuild): boolean => !b.started && b.tailOffsets !== undefined && b.tailOffsets > COLD_TAIL_OFFSETS;
      // Re-read after the await: a build may have ended (and left) meanwhile.
      for (const s of unvouched) {
        const b = this.builds.get(s.partitionId);
        if (b !== undefined && queuedLong(b)) this.builds.prioritise(s.partitionId);
      }
      for (const s of unvouched) {
        const b = this.builds.get(s.partitionId);
        if (b === undefined || this.cache.hasVouchingEntry(s.partitionId)) continue;
        if (!b.started && !queuedLong(b)) continue;
        await b.stateKnown;
        if (b.tailOffsets !== undefined && b.tailOffsets <= COLD_TAIL_OFFSETS && b.snapshot === undefined) continue;
        await b.finished;
        this.builds.installReady(s.partitionId);
      }
      const out: Vouch[] = [];
      const unclear: Unclear[] = [];
      for (const s of segments) {
        if (!this.hints) {
          const verified = this.cache.verifiedFor(s.partitionId, s.hashes, s.count);
          out.push(verified < 0 ? NO_VOUCH : { verified, windowSeconds: this.cache.vouchedWindow(s.partitionId) });
          continue;
        }
        const { verified, hits, maybe, spans } = this.cache.vouchWithHints(s.partitionId, s.hashes, s.count);
        if (verified < 0 && s.windowSeconds > 0 && !this.cache.hasVouchingEntry(s.partitionId)) {
          // No entry can vouch (none yet, suppressed, gapped, rebuilding):
          // every item is looked up, and the vouch is the lookup's alone.
          // Against -1 this saves the push a second round for each segment
          // holding a re-sent id (a segment with a duplicate writes nothing,
          // its other items go again), and reads the same runs and tail.
          // Even a one-item segment (nothing to send again) is looked up:
          // at 100 k partitions, one item each, pushes with -1 ran at 0.7x
          // of looked-up ones (the push's probe reads the same rows, under
          // the row lock).
          // A placeholder: the lookup replaces it by min(NO_BOUND, L) = L
          // (apart: lookUp; in the push: SQL), or by NO_VOUCH when it fails.
          unclear.push({ at: out.length, maybe: allItems(s.count) });
          out.push({ verified: NO_BOUND, windowSeconds: NO_BOUND });
          continue;
        }
        if (maybe.length > 0) unclear.push(spans === undefined ? { at: out.length, maybe } : { at: out.length, maybe, spans });
        // The claim is only as wide as the window the entry was built for.
        out.push(verified < 0 ? NO_VOUCH : { verified, windowSeconds: this.cache.vouchedWindow(s.partitionId), hits });
      }
      if (unclear.length === 0) return out;
      // The bundle's lookups all go one way (lookupPlacement.ts): the round
      // trip the push's call saves is the bundle's, not a segment's.
      if (this.placement.inPush(unclear.map(({ at }) => segments[at]!.partitionId))) {
        for (const { at, maybe, spans } of unclear) out[at] = { ...out[at]!, lookup: itemsToLookUp(segments[at]!, maybe, spans) };
      } else await this.lookUp(segments, out, unclear);
      return out;
    } catch (err) {
      // Never leave a partition marked in flight: that would wedge it.
      for (const pid of begun) {
        this.cache.recordUnknown(pid);
        this.cache.endFlush(pid);
        this.builds.installReady(pid);
      }
      throw err;
    }
  }

  /**
   * The maybe items of every segment in `unclear`, looked up in one
   * statement; each such vouch becomes min(V, L) under the smaller window,
   * with what was found named as hits (see the class comment). On failure
   * those segments go out with -1.
   */
  private async lookUp(segments: readonly PendingSegment[], out: Vouch[], unclear: Unclear[]): Promise<void> {
    const inputs: LookupInput[] = unclear.map(({ at, maybe, spans }) => ({
      partitionId: segments[at]!.partitionId,
      ...itemsToLookUp(segments[at]!, maybe, spans),
    }));
    let found;
    try {
      found = await this.engine.lookup(inputs);
    } catch (err) {
      this.lookupFailures?.inc();
      for (const { at } of unclear) out[at] = NO_VOUCH;
      this.onError(err, segments[unclear[0]!.at]!.partitionId, 'lookup');
      return;
    }
    unclear.forEach(({ at, maybe }, k) => {
      const v = out[at]!;
      const r = found[k]!;
      this.placement.record(segments[at]!.partitionId, r.found.length);
      let hits: Hint[] | undefined = v.hits === undefined || v.hits.length === 0 ? undefined : [...v.hits];
      let last: Hint | undefined;
      for (const f of r.found) {
        const index = maybe[f.index]!;
        if (last?.index === index) (last.offsets as number[]).push(f.offset);
        else (hits ??= []).push((last = { index, offsets: [f.offset] }));
      }
      out[at] = {
        verified: Math.min(v.verified, r.lastOffset),
        windowSeconds: Math.min(v.windowSeconds, r.windowSeconds),
        ...(hits === undefined ? {} : { hits }),
      };
    });
  }

  afterPush(segments: readonly PendingSegment[], outcomes: readonly SegmentOutcome[]): void {
    // segments[i] is what was appended of the i-th segment (its frames, not its hinted items).
    const now = Date.now();
    segments.forEach((s, i) => {
      const o = outcomes[i]!;
      if (o.lookupFound !== undefined) this.placement.record(s.partitionId, o.lookupFound);
      // The window SQL used is authoritative: a change detected here forces
      // the sticky full rehydration on the next flush.
      this.cache.prepare(s.partitionId, o.windowSeconds);
      if (o.assignedBase !== null) this.cache.recordAppend(s.partitionId, o.assignedBase, s.hashes, s.count, now);
      this.cache.endFlush(s.partitionId);
      // A snapshot fetched while this flush was under way: its appends are all reported now.
      this.builds.installReady(s.partitionId);
    });
  }

  pushFailed(segments: readonly PendingSegment[]): void {
    for (const s of segments) {
      this.cache.recordUnknown(s.partitionId);
      this.cache.endFlush(s.partitionId);
      // A snapshot fetched while this flush was under way: its appends are all reported now.
      this.builds.installReady(s.partitionId);
    }
  }
}

/**
 * A segment with items to look up: where it sits in the bundle, the items
 * (frame indexes), and, from a filter entry, the span each may occur in at
 * or below the vouch (none: the whole window, which a partition no entry
 * vouches for always asks).
 */
interface Unclear {
  at: number;
  maybe: number[];
  spans?: ItemSpans;
}

/** The items `maybe` of segment s to look up (apart or in the push's call), with their spans when the entry gave them. */
function itemsToLookUp(s: PendingSegment, maybe: readonly number[], spans?: ItemSpans): ItemsToLookUp {
  const hashes = pickHashes(s.hashes, maybe);
  return spans === undefined ? { count: maybe.length, hashes } : { count: maybe.length, hashes, from: spans.from, to: spans.to };
}

function allItems(count: number): number[] {
  return Array.from({ length: count }, (_, i) => i);
}

/** The 16-byte hashes at `items` of `hashes`, concatenated in that order. */
function pickHashes(hashes: Buffer, items: readonly number[]): Buffer {
  const out = Buffer.allocUnsafe(items.length * HASH_BYTES);
  items.forEach((i, k) => hashes.copy(out, k * HASH_BYTES, i * HASH_BYTES, (i + 1) * HASH_BYTES));
  return out;
}
