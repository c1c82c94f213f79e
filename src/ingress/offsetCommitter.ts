/** One partition's next offset to read, as Kafka's OffsetCommit takes it. */
export interface PartitionOffset {
  topic: string;
  partition: number;
  offset: string;
}

/**
 * Commits a consumer's Kafka offsets off the critical path, all partitions
 * in one request.
 *
 * States: idle (nothing in flight) -> committing (one OffsetCommit in flight;
 * offsets advanced meanwhile wait, the newest per partition) -> idle.
 * `advance()` is only called, per partition, with increasing offsets whose
 * records all have verdicts, so whatever this class commits is behind the
 * log; it only coalesces. While one request is in flight, the offsets of
 * every partition that advanced meanwhile go together in the next one: a
 * consumer of 8 partitions sends one request per round trip, not 8 that the
 * broker answers one after another on the group coordinator's connection
 * (kafkajs 2.2.4 gives fetches a connection of their own; heartbeats and
 * commits share the other).
 * `flush()` resolves when everything advanced so far was sent (stop() calls
 * it before the consumer leaves its group). `retryRefused()` sends once more
 * the newest refused offset of each partition that no later commit covered:
 * stop() calls it after flush(), so a commit refused by a passing fault (a
 * timed-out request on a loaded broker) does not cost a redelivery of what
 * was verified. Still behind the log, so never a loss; a partition the
 * group moved away is refused again (a stale generation), and that is all.
 */
export class OffsetCommitter {
  private inFlight: Promise<void> | undefined;
  private waiting = new Map<string, { at: PartitionOffset; done: ((ok: boolean) => void)[] }>();
  /** Per partition, the newest offset whose commit was refused and that no later commit covered. */
  private refused = new Map<string, PartitionOffset>();

  constructor(private readonly send: (offsets: PartitionOffset[]) => Promise<boolean>) {}

  /** Records `offset` (next offset to read) of one partition as committable; resolves with whether its commit landed. */
  advance(topic: string, partition: number, offset: string): Promise<boolean> {
    return new Promise((resolve) => {
      const key = `${topic}\x1f${partition}`;
      const w = this.waiting.get(key);
      if (w) {
        w.at = { topic, partition, offset };
        w.done.push(resolve);
      } else {
        this.waiting.set(key, { at: { topic, partition, offset }, done: [resolve] });
      }
      this.inFlight ??= this.drain();
    });
  }

  flush(): Promise<void> {
    return this.inFlight ?? Promise.resolve();
  }

  /** Sends the refused offsets once more (see the class comment); resolves with whether that landed (true when none were left). */
  async retryRefused(): Promise<boolean> {
    await this.flush();
    if (this.refused.size === 0) return true;
    const again = [...this.refused.values()];
    this.refused.clear();
    return this.send(again);
  }

  private async drain(): Promise<void> {
    // One turn of the event loop first, so partitions finishing together share the request.
    await new Promise<void>((r) => setImmediate(r));
    while (this.waiting.size > 0) {
      const batch = this.waiting;
      this.waiting = new Map();
      const ok = await this.send([...batch.values()].map((w) => w.at));
      for (const [key, w] of batch) {
        if (ok) this.refused.delete(key);
        else this.refused.set(key, w.at);
        for (const d of w.done) d(ok);
      }
    }
    this.inFlight = undefined;
  }
}
