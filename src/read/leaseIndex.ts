import type { LeaseSpan } from '../engine/acks.js';

/**
 * The spans of the leases this broker's pops handed out, by lease id, so an
 * ack of one resolves its transactionIds against the frames the pop already
 * decoded instead of reading the span's log_txns hashes back (applyAcks
 * checks, under the cursor's row lock, that the live lease is this one and
 * its span end unchanged; anything else goes to SQL as before).
 *
 * States per lease id: absent -> held (put, at a pop that took a lease) ->
 * absent (drop, when an ack ended the lease; or evicted, oldest first, when
 * the held offsets pass the budget). An absent lease costs nothing but the
 * SQL path; a held one is never wrong, since segments never change.
 */
export class LeaseIndex {
  private readonly spans = new Map<string, LeaseSpan>();
  private offsets = 0;

  /** @param maxOffsets budget: offsets held over all leases (each ~100 bytes with its key). */
  constructor(private readonly maxOffsets: number) {}

  put(leaseId: string, span: LeaseSpan): void {
    const n = span.to - span.from + 1;
    if (n > this.maxOffsets) return;
    this.drop(leaseId);
    this.spans.set(leaseId, span);
    this.offsets += n;
    for (const [id, s] of this.spans) {
      if (this.offsets <= this.maxOffsets) break;
      this.spans.delete(id);
      this.offsets -= s.to - s.from + 1;
    }
  }

  readonly get = (leaseId: string): LeaseSpan | undefined => this.spans.get(leaseId);

  drop(leaseId: string): void {
    const s = this.spans.get(leaseId);
    if (!s) return;
    this.spans.delete(leaseId);
    this.offsets -= s.to - s.from + 1;
  }
}
