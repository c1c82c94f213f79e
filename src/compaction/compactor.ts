import type pg from 'pg';
import { compactPartition, type CompactionBuild } from '../engine/compactionStore.js';
import { silentLogger, type Logger } from '../telemetry/logger.js';
import type { Counter, MetricsRegistry } from '../telemetry/metrics.js';
import { Component } from '../util/lifecycle.js';
import { SerialLoop } from '../util/serialLoop.js';
import { MergeWidth } from './mergeWidth.js';

export interface CompactorOptions {
  pool: pg.Pool;
  /** A partition is compacted once at least this many offsets sit above compacted_upto. */
  minTail: number;
  /**
   * Runs of one tier merged into one of the next: at least this many, more
   * (mergeWidth.ts) for a partition whose runs are rarely read.
   */
  fanout: number;
  /**
   * Who sorts a step's pairs into slices: the broker (default) or
   * PostgreSQL (queen.log_compact_v1, the reference). Both write the same
   * runs; only benchmarks choose, to measure one against the other.
   */
  build?: CompactionBuild;
  metrics: MetricsRegistry;
  logger?: Logger;
  /** Pause between passes when nothing is pending (ms). Default 200. */
  idleMs?: number;
  /** false: no background loop, only runOnce() compacts (tests). Default true. */
  loop?: boolean;
  /** Hashes a partition must have built before its reads decide its merge width (tests lower it). Default MergeWidth.MIN_EVIDENCE. */
  mergeEvidence?: number;
}

/** Pending requests kept at most; past this, new ones are dropped (the next long probe asks again). */
const MAX_PENDING = 100_000;
/** Partitions one pass compacts before the loop yields (each is one short transaction). */
const PASS_PARTITIONS = 64;

/**
 * Keeps the cold path cheap (docs/deduplication.md, "The cold path"): the
 * write path asks for a partition's compaction when one of its pushes had to
 * probe a long tail of log_txns, that is when no broker cache vouched for it.
 * A partition the cache keeps warm never probes and is never compacted, so
 * the warm write path pays nothing for this.
 *
 * Compaction never decides a verdict: runs only name candidate offsets that
 * the push verifies against log_txns, and a partition that was never
 * compacted is probed in log_txns as before. So a request that is dropped,
 * fails or comes late costs probe time, never exactness.
 *
 * States (besides the Component lifecycle): waiting (nothing pending, or
 * idleMs between passes) and compacting (one pass over the pending
 * partitions in ascending id, one transaction each). A partition whose step
 * merged runs is asked for again, since another tier may now be full.
 *
 * How wide a partition's merges are follows how often its runs are read
 * (noteReads, fed by compactOnLongProbes in src/pipeline.ts; mergeWidth.ts
 * says why): a window nobody looks up is rewritten about half as often.
 */
export class Compactor extends Component {
  private readonly pending = new Set<number>();
  private readonly loop: SerialLoop<number>;
  private readonly log: Logger;
  private readonly steps: Counter;
  private readonly hashes: Counter;
  private readonly failures: Counter;
  private readonly wideMerges: Counter;
  private readonly widths: MergeWidth;

  constructor(private readonly opts: CompactorOptions) {
    super('Compactor');
    this.log = opts.logger ?? silentLogger;
    this.steps = opts.metrics.counter('queen_compaction_steps_total', 'Compaction steps by what they did (run, merge, drop, none)', [
      'kind',
    ]);
    this.hashes = opts.metrics.counter('queen_compaction_hashes_total', 'Hashes written into runs, by how (run: new, merge: rewritten)', [
      'kind',
    ]);
    this.failures = opts.metrics.counter(
      'queen_compaction_failures_total',
      'Compaction steps that failed (the partition is asked for again)',
    );
    this.wideMerges = opts.metrics.counter(
      'queen_compaction_wide_merges_total',
      'Merges of more runs than the fan-out, for partitions whose runs are rarely read (also counted in steps_total kind="merge")',
    );
    this.widths = new MergeWidth(opts.fanout, opts.mergeEvidence);
    opts.metrics.gauge('queen_compaction_pending_partitions', 'Partitions waiting for a compaction step').collect(() => this.pending.size);
    const idleMs = opts.idleMs ?? 200;
    this.loop = new SerialLoop(
      () => this.pass(),
      (o) => {
        if (!o.ok) {
          this.log.warn({ err: (o.error as Error).message }, 'compaction pass failed; its partitions are asked for again');
          return idleMs;
        }
        return this.pending.size > 0 ? 0 : idleMs;
      },
    );
  }

  /** Asks for a compaction step of this partition (idempotent while pending). */
  request(partitionId: number): void {
    if (this.pending.size >= MAX_PENDING && !this.pending.has(partitionId)) return;
    this.pending.add(partitionId);
  }

  /** Items whose search may read the partition's runs (a lookup's, or a push's probing every item): what keeps its merges narrow. */
  noteReads(partitionId: number, items: number): void {
    this.widths.noteReads(partitionId, items);
  }

  /** How many runs the partition's next merge takes at most (mergeWidth.ts). */
  mergeWidthFor(partitionId: number): number {
    return this.widths.widthFor(partitionId);
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  protected async onStart(): Promise<void> {
    if (this.opts.loop !== false) this.loop.start(0);
  }

  protected async onStop(): Promise<void> {
    await this.loop.halt();
  }

  /** One pass now (serialised with the loop); returns how many partitions it stepped. */
  runOnce(): Promise<number> {
    return this.loop.runNow();
  }

  private async pass(): Promise<number> {
    if (this.pending.size === 0) return 0;
    const ids = [...this.pending].sort((a, b) => a - b).slice(0, PASS_PARTITIONS);
    let failed: Error | undefined;
    for (const id of ids) {
      // Stopping: what is left stays pending (and is dropped with the component).
      if (this.loop.stopping && this.opts.loop !== false) break;
      this.pending.delete(id);
      try {
        const width = this.widths.widthFor(id);
        const o = await compactPartition(this.opts.pool, id, this.opts.minTail, this.opts.fanout, this.opts.build, width);
        if (o.compacted > 0) {
          this.steps.inc(1, 'run');
          this.hashes.inc(o.compacted, 'run');
          this.widths.noteBuilt(id, o.compacted);
        }
        if (o.mergedRuns > this.opts.fanout) this.wideMerges.inc();
        // A long tail is compacted in bounded steps: the next one is asked for at once.
        if (o.more) this.request(id);
        if (o.merged > 0) {
          this.steps.inc(1, 'merge');
          this.hashes.inc(o.merged, 'merge');
          this.request(id);
        }
        if (o.dropped > 0) this.steps.inc(1, 'drop');
        if (o.compacted === 0 && o.merged === 0 && o.dropped === 0) this.steps.inc(1, 'none');
      } catch (err) {
        this.failures.inc();
        this.request(id);
        failed ??= err instanceof Error ? err : new Error(String(err));
      }
    }
    if (failed !== undefined) throw failed;
    return ids.length;
  }
}
