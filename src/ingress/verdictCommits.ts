import type { Consumer } from 'kafkajs';
import type { Logger } from '../telemetry/logger.js';
import type { IngressMetrics } from './ingressMetrics.js';
import type { CommittedChunk, KafkaIngressOptions } from './ingressOptions.js';
import { OffsetCommitter, type PartitionOffset } from './offsetCommitter.js';

/** What one verified submission hands to its commit: each record's verdict (for an observer only) and its stage times. */
export interface VerifiedChunk {
  records: CommittedChunk['records'];
  /** process.hrtime.bigint() when its oldest chunk was fetched: the commit latency is measured from it. */
  fetchedAt: bigint;
  fetchedAtMs: number;
  startedAtMs: number;
  verdictsAtMs: number;
}

/**
 * The commit stage of the ingress: a verified submission's offset goes to
 * Kafka through the current consumer's OffsetCommitter, and its observer
 * (onCommitted) and metrics hear how it went.
 *
 * States: bound to one consumer (bind() at start and after each restart, once
 * the old consumer's chunks are idle and its committer flushed). A chunk of a
 * replaced consumer can never commit through its successor: each committer
 * holds the consumer it was made for. A commit a rebalance refuses is not an
 * error: the partition's new owner re-reads from the last committed offset
 * and gets duplicates of what was verified here, never a loss.
 * Only advance() is called after every record of the submission has a
 * PostgreSQL verdict or an acknowledged dead letter (chunkVerifier.ts).
 */
export class VerdictCommits {
  /** The current consumer's committer: commits leave the critical path, all partitions in one request. */
  private committer: OffsetCommitter;

  constructor(
    consumer: Consumer,
    private readonly opts: KafkaIngressOptions,
    private readonly log: Logger,
    private readonly m: IngressMetrics,
  ) {
    this.committer = this.newCommitter(consumer);
  }

  /** Commits of the (new) consumer go through a committer of its own from here on. */
  bind(consumer: Consumer): void {
    this.committer = this.newCommitter(consumer);
  }

  /** Resolves when everything advanced so far was sent. */
  flush(): Promise<void> {
    return this.committer.flush();
  }

  /** On stop, before leaving the group: everything advanced is sent, and a refused commit is tried once more. */
  async flushForStop(): Promise<void> {
    await this.committer.retryRefused();
  }

  /** Commits `next` (the offset after the submission's last record) and tells the observer; never waited for. */
  advance(topic: string, partition: number, next: string, c: VerifiedChunk): void {
    const { records, fetchedAt, fetchedAtMs, startedAtMs, verdictsAtMs } = c;
    void this.committer.advance(topic, partition, next).then((committed) => {
      this.m.verdicts?.inc();
      if (committed) this.m.commitLatency?.observe(Number(process.hrtime.bigint() - fetchedAt) / 1e9);
      this.opts.onCommitted?.({
        topic,
        partition,
        records,
        committed,
        fetchedAtMs,
        startedAtMs,
        verdictsAtMs,
        committedAtMs: Date.now(),
      });
    });
  }

  /** A committer bound to the current consumer: a chunk of a replaced consumer can never commit through its successor. */
  private newCommitter(consumer: Consumer): OffsetCommitter {
    return new OffsetCommitter((offsets) => this.commit(consumer, offsets));
  }

  /** Commits each partition's next offset to read; false when a rebalance (or a stopped consumer) refused it. */
  private async commit(consumer: Consumer, offsets: PartitionOffset[]): Promise<boolean> {
    try {
      await consumer.commitOffsets(offsets);
      return true;
    } catch (err) {
      // A rebalance took the partitions: their new owner re-reads from the
      // last committed offsets and gets duplicates for what we verified. No loss.
      this.m.commits?.inc();
      this.log.info({ offsets, err: (err as Error).message }, 'offset commit refused; records will be redelivered');
      return false;
    }
  }
}
