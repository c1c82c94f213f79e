/**
 * The work list of one retention pass: partitions that need a step, handed
 * to concurrent workers one at a time (docs/retention.md, "Concurrent steps").
 *
 * Each partition is in exactly one of three states:
 *   unknown --add()--> queued --take()--> in flight --done(more=true)--> queued (at the tail)
 *                                                     --done(more=false)--> finished (unknown again)
 * Invariants it keeps:
 *   - A partition is never in flight twice: take() hands out only queued
 *     partitions, and a partition re-enters the queue only through done().
 *     That is what lets steps run on several sessions at once: two steps on
 *     the same partition would only queue behind each other's row lock.
 *   - Fairness: a partition whose batch was full goes to the TAIL, behind
 *     every partition already waiting, so a hot partition takes one step per
 *     round and cannot starve the others.
 *   - add() ignores a partition that is queued or in flight (pages are
 *     disjoint, so this is only a guard).
 */
export class PartitionQueue {
  private readonly queued: number[] = [];
  private head = 0;
  private readonly known = new Set<number>();
  private readonly inFlight = new Set<number>();

  add(ids: readonly number[]): void {
    for (const id of ids) {
      if (this.known.has(id)) continue;
      this.known.add(id);
      this.queued.push(id);
    }
  }

  /** The next queued partition, now in flight; undefined when none is queued. */
  take(): number | undefined {
    if (this.head === this.queued.length) return undefined;
    const id = this.queued[this.head++]!;
    if (this.head > 1024 && this.head * 2 > this.queued.length) {
      this.queued.splice(0, this.head);
      this.head = 0;
    }
    this.inFlight.add(id);
    return id;
  }

  /** The step on `id` ended: `more` puts it back at the tail, otherwise it is finished for this pass. */
  done(id: number, more: boolean): void {
    if (!this.inFlight.delete(id)) throw new Error(`partition ${id} was not in flight`);
    if (more) this.queued.push(id);
    else this.known.delete(id);
  }

  get queuedCount(): number {
    return this.queued.length - this.head;
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }
}
