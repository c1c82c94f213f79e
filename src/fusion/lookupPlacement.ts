import { SoftCappedMap } from '../util/softCappedMap.js';

/**
 * Where a segment's maybe items are looked up: `apart`, in a lookup call of
 * their own before the push (what it finds goes to the push as hints), or
 * `in-push`, in the push's own call (queen.log_push_looked_v1), which saves
 * a round trip when the lookup finds nothing and pays a full probe of the
 * segment and a second round when it finds something.
 *
 * Which is cheaper depends on whether the lookup will find anything: a maybe
 * item is a filter's false positive (found nothing) or a re-sent id (found).
 * So this keeps, per partition, how often its recent lookups found
 * something (an average that halves each older outcome's weight), and a
 * partition's segments go in the push while that is under a quarter: two
 * empty lookups in a row after one that found bring it back, one that finds
 * sends the next ones apart. A partition it has not seen (or has forgotten)
 * takes the average over every partition's lookups, which moves by 1/64 a
 * lookup. Placement decides no verdict: either way the push is exact
 * (sql/functions/push.sql); it only decides which of two exact paths a
 * segment takes.
 */
export type LookupMode = 'adaptive' | 'apart' | 'in-push';

/** A partition's segments go in the push while its share of lookups that found something is below this. */
const IN_PUSH_BELOW = 0.25;
/** Weight of a partition's newest outcome. */
const PARTITION_WEIGHT = 0.5;
/** Weight of any partition's newest outcome in the fleet-wide share. */
const GLOBAL_WEIGHT = 1 / 64;
/** Partitions remembered; a forgotten one falls back to the global share. */
const REMEMBERED = 65_536;

export class LookupPlacement {
  private readonly shares = new SoftCappedMap<number, number>(REMEMBERED);
  private global = 0;

  constructor(readonly mode: LookupMode = 'adaptive') {}

  /** Whether pid's maybe items should be looked up in the push's call. */
  inPush(pid: number): boolean {
    if (this.mode !== 'adaptive') return this.mode === 'in-push';
    return (this.shares.get(pid) ?? this.global) < IN_PUSH_BELOW;
  }

  /** A lookup of pid's items (either way) found `found` occurrences. */
  record(pid: number, found: number): void {
    const x = found > 0 ? 1 : 0;
    const prior = this.shares.get(pid) ?? this.global;
    this.shares.set(pid, prior + PARTITION_WEIGHT * (x - prior));
    this.global += GLOBAL_WEIGHT * (x - this.global);
  }
}
