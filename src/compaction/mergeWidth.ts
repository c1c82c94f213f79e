import { SoftCappedMap } from '../util/softCappedMap.js';

/**
 * How many runs of one size tier a compaction step merges, per partition:
 * the configured fan-out, or WIDE_FACTOR times it where the partition's runs
 * are rarely read. Policy only: a merge of any width writes the union of the
 * runs it deletes in one transaction (compactionStore.ts), so which runs
 * exist never decides a verdict, only how many an item's search reads.
 *
 * Why the width should follow the reads. A partition whose window holds N
 * hashes, compacted in new runs of about b pairs and merged w at a time,
 * rewrites each hash about log_w(N / b) times and keeps up to (w - 1) runs a
 * tier, every one of which a looked-up item may read. Per hash appended,
 * with rho items reading the runs per hash appended, the cost is about
 *
 *   ln(N / b) / ln(w) x (c_merge + rho x (w - 1) x c_read)
 *
 * where c_merge is what writing one hash into a merged run costs (~0.85 us:
 * ~0.7 us of database time and ~0.15 us of the broker's sort,
 * docs/operations.md) and c_read what one run costs an item's search (~6 us,
 * docs/history/2026-12-06-lookup-replayed-by-item-kind.md). For w = 16
 * against w = 4 that is cheaper exactly when 9 x rho x c_read < c_merge,
 * rho < ~1.5 %. Lookup-heavy partitions (a tenth of their ids
 * re-sent, so rho ~ 0.17) keep the narrow merges; a window past the budget
 * that almost nothing reads (a duplicate-free stream, whose only reads are a
 * filter's false positives, rho ~ 0.0004 in the defaults soak) merges wide
 * and writes each hash about half as often. WIDE_BELOW sits under that
 * break-even so that a partition near it stays narrow, today's behaviour.
 * A broker counts only its own searches: where several brokers push one
 * partition without affinity, the one compacting it may see a fraction of
 * them and merge wide a little past the break-even, which costs reads,
 * never a verdict.
 *
 * State per partition: two counts, hashes built into new runs and items that
 * read its runs, both halved whenever the built count passes HORIZON, so
 * they describe about the last HORIZON hashes appended. A partition with
 * fewer than MIN_EVIDENCE hashes built since it was first seen merges
 * narrow. At most MAX_PARTITIONS are tracked (a SoftCappedMap: past the cap
 * it is pruned to three quarters, least recently compacted first), and a
 * forgotten partition merges narrow until it has built the evidence again.
 */
export class MergeWidth {
  /** Wide merges take this many times the configured fan-out. */
  static readonly WIDE_FACTOR = 4;
  /** Items reading the runs per hash built, below which merges go wide. */
  static readonly WIDE_BELOW = 0.005;
  /** Hashes built before the ratio is trusted. */
  static readonly MIN_EVIDENCE = 65_536;
  /** Hashes built after which both counts are halved. */
  static readonly HORIZON = 4_194_304;
  /** Partitions tracked at most (two numbers each, in a Map: a few MB at the cap). */
  static readonly MAX_PARTITIONS = 65_536;

  private readonly stats = new SoftCappedMap<number, { built: number; reads: number }>(MergeWidth.MAX_PARTITIONS);

  /** `minEvidence`: hashes built before the ratio is trusted (tests lower it). */
  constructor(
    private readonly fanout: number,
    private readonly minEvidence = MergeWidth.MIN_EVIDENCE,
  ) {
    if (!Number.isInteger(fanout) || fanout < 2) throw new RangeError(`MergeWidth: fanout must be an integer >= 2, got ${fanout}`);
  }

  /** Items whose search may read the partition's runs (a lookup's items, or a probed push's). Called per segment: no reordering. */
  noteReads(partitionId: number, items: number): void {
    if (!(items > 0)) return;
    const s = this.stats.get(partitionId);
    if (s !== undefined) s.reads += items;
    else this.stats.set(partitionId, { built: 0, reads: items });
  }

  /** Hashes a compaction step built into a new run of the partition (the partition becomes the most recently compacted). */
  noteBuilt(partitionId: number, hashes: number): void {
    if (!(hashes > 0)) return;
    const s = this.stats.get(partitionId) ?? { built: 0, reads: 0 };
    this.stats.set(partitionId, s);
    s.built += hashes;
    while (s.built > MergeWidth.HORIZON) {
      s.built /= 2;
      s.reads /= 2;
    }
  }

  /** The merge width for the partition's next step. */
  widthFor(partitionId: number): number {
    const s = this.stats.get(partitionId);
    if (s === undefined || s.built < this.minEvidence) return this.fanout;
    return s.reads < MergeWidth.WIDE_BELOW * s.built ? this.fanout * MergeWidth.WIDE_FACTOR : this.fanout;
  }

  get trackedPartitions(): number {
    return this.stats.size;
  }
}
