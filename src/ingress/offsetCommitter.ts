/**
 * Commits one Kafka partition's offsets off the critical path.
 *
 * States per partition: idle (nothing in flight) -> committing (one commit in
 * flight, a newer offset possibly waiting) -> idle. `advance(o)` is only
 * called with offsets whose records all have verdicts, in increasing order,
 * so whatever this class commits is behind the log; it only coalesces: while
 * one commit is in flight, later offsets wait and the newest one is sent
 * next. The next chunk therefore does not wait for the broker's commit round
 * trip. `flush()` resolves when everything advanced so far was sent (used by
 * stop() before the consumer leaves its group).
 */
export class OffsetCommitter {
  private inFlight: Promise<void> | undefined;
  private waiting: { offset: string; done: ((ok: boolean) => void)[] } | undefined;

  constructor(private readonly send: (offset: string) => Promise<boolean>) {}

  /** Records `offset` (next offset to read) as committable; resolves with whether its commit landed. */
  advance(offset: string): Promise<boolean> {
    return new Promise((resolve) => {
      if (this.waiting) {
        this.waiting.offset = offset;
        this.waiting.done.push(resolve);
      } else {
        this.waiting = { offset, done: [resolve] };
      }
      this.inFlight ??= this.drain();
    });
  }

  flush(): Promise<void> {
    return this.inFlight ?? Promise.resolve();
  }

  private async drain(): Promise<void> {
    while (this.waiting) {
      const { offset, done } = this.waiting;
      this.waiting = undefined;
      const ok = await this.send(offset);
      for (const d of done) d(ok);
    }
    this.inFlight = undefined;
  }
}
