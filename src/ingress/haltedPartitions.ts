import type { Consumer } from 'kafkajs';
import type { Logger } from '../telemetry/logger.js';
import type { HaltedPartition } from './supervisor.js';

/** What the halts need of the component around them. */
export interface HaltHost {
  /** The current consumer (the supervisor replaces it after a crash). */
  consumer(): Consumer;
  /** Whether a resumed partition may fetch again: fetching not paused as a whole, and the consumer a group member. */
  mayResume(): boolean;
  /** A partition just halted: batches of it waiting for room in its lane must stop waiting. */
  onHalted(): void;
}

/**
 * The partitions the ingress has stopped, by "topic\x1fpartition", never
 * silently: each halt is logged, pauses the partition's fetching (the others
 * go on), and the supervisor reports it in readiness and the halted-partitions
 * metric.
 *
 * States of one partition: flowing -> halted (halt()) with a cause:
 * - bad-record: a record under errorsTolerance 'none' or missingId 'fail';
 *   terminal until a restart (the pause is re-applied to a restarted
 *   consumer: kafkaIngress.ts runConsumer).
 * - dead-letter-write: a dead-letter write failed; halted -> flowing
 *   (resume()) once the write succeeds, or once the chunk is abandoned (a
 *   restart or rebalance reads the record again, and halts it again at once
 *   if the write still fails).
 * A second halt() of a halted partition only updates its reason and time.
 */
export class HaltedPartitions {
  private readonly halted = new Map<string, HaltedPartition>();

  constructor(
    private readonly host: HaltHost,
    private readonly log: Logger,
  ) {}

  has(key: string): boolean {
    return this.halted.has(key);
  }

  values(): IterableIterator<HaltedPartition> {
    return this.halted.values();
  }

  /**
   * Stops one partition visibly (log, metric, readiness), never silently: a
   * bad record under errorsTolerance 'none' or missingId 'fail' (until a
   * restart), or a dead-letter write that keeps failing (until it succeeds,
   * resume()). Fetching of the partition pauses; the others go on.
   */
  halt(h: HaltedPartition): void {
    const key = `${h.topic}\x1f${h.partition}`;
    const first = !this.halted.has(key);
    this.halted.set(key, h);
    if (!first) return;
    try {
      this.host.consumer().pause([{ topic: h.topic, partitions: [h.partition] }]);
    } catch {
      // No group right now (a crash): runConsumer re-applies the pause.
    }
    // A batch of this partition waiting for room in its lane must not hold up fetching for the others.
    this.host.onHalted();
    const { topic, partition, offset, reason } = h;
    if (h.cause === 'schema-registry')
      this.log.error(
        { topic, partition, offset, reason },
        'partition halted: the schema registry does not answer; retrying with backoff, resumes by itself once it does',
      );
    else if (h.cause === 'dead-letter-write')
      this.log.error(
        { topic, partition, offset, reason },
        'partition halted: a dead-letter write failed; retrying with backoff, resumes by itself once it succeeds (QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE=all skips such records instead)',
      );
    else
      this.log.error(
        { topic, partition, offset, reason },
        'partition halted: a record cannot be stored and the settings say halt (QUEEN_INGRESS_ERRORS_TOLERANCE=none or QUEEN_INGRESS_MISSING_ID=fail); not committed; fix the cause or move the group offset past it, then restart',
      );
  }

  /** Ends a dead-letter or schema-registry halt: the write went through (the registry answered), or the chunk was abandoned (a restart or rebalance reads it again). */
  resume(topic: string, partition: number, why: 'written' | 'abandoned'): void {
    const key = `${topic}\x1f${partition}`;
    const cause = this.halted.get(key)?.cause;
    if (cause !== 'dead-letter-write' && cause !== 'schema-registry') return;
    this.halted.delete(key);
    if (this.host.mayResume()) {
      try {
        this.host.consumer().resume([{ topic, partitions: [partition] }]);
      } catch {
        // No group right now: the restarted consumer starts unpaused.
      }
    }
    if (why === 'written')
      this.log.info(
        { topic, partition },
        cause === 'schema-registry' ? 'schema registry answered; partition resumed' : 'dead-letter write succeeded; partition resumed',
      );
  }
}
