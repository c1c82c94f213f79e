import { SoftCappedMap } from '../util/softCappedMap.js';

/**
 * Where a bundle's maybe items are looked up: `apart`, in a lookup call of
 * their own before the push (what it finds goes to the push as hints), or
 * `in-push`, in the push's own call (queen.log_push_looked_v1), which saves
 * the bundle a round trip and pays, for each segment whose lookup finds
 * something, a full probe of that segment under the row lock and, for the
 * segment's other items, a second round.
 *
 * So in the push is cheaper only where few segments' lookups will find
 * anything: a maybe item is a filter's false positive (found nothing) or a
 * re-sent id (found). This keeps, per partition, the share of its recent
 * lookups that found something (an average in which each older outcome
 * weighs half the next; a partition not seen yet, or forgotten, takes the
 * share over every partition's lookups, which moves by 1/64 a lookup), and
 * a bundle's lookups go in the push while the sum of its segments' shares,
 * the segments expected to find something, is under one half. A
 * duplicate-free stream past the budget (only false positives) goes in the
 * push; a partition that found a re-sent id sends its bundles apart until
 * its share has halved below the bound again; 1 000 one-item segments of
 * which a tenth are re-sent go apart. Placement decides no verdict: either
 * way the push is exact (sql/functions/push.sql).
 */
export type LookupMode = 'adaptive' | 'apart' | 'in-push';

/** A bundle's lookups go in the push while its segments' expected finds sum to less than this. */
const EXPECTED_FINDS_BELOW = 0.5;
/** Weight of a partition's newest outcome. */
const PARTITION_WEIGHT = 0.5;
/** Weight of any partition's newest outcome in the share over every partition. */
const GLOBAL_WEIGHT = 1 / 64;
/** Partitions remembered; a forgotten one falls back to the global share. */
const REMEMBERED = 65_536;

export class LookupPlacement {
  private readonly shares = new SoftCappedMap<number, number>(REMEMBERED);
  private global = 0;

  constructor(readonly mode: LookupMode = 'adaptive') {}

  /** Whether the lookups of a bundle's segments (their partitions) go in the push's call. */
  inPush(partitionIds: readonly number[]): boolean {
    if (this.mode !== 'adaptive') return this.mode === 'in-push';
    let expected = 0;
    for (const pid of partitionIds) {
      expected += this.shares.get(pid) ?? this.global;
      if (expected >= EXPECTED_FINDS_BELOW) return false;
    }
    return true;
  }

  /** A lookup of pid's items (either way) found `found` occurrences. */
  record(pid: number, found: number): void {
    const x = found > 0 ? 1 : 0;
    const prior = this.shares.get(pid) ?? this.global;
    this.shares.set(pid, prior + PARTITION_WEIGHT * (x - prior));
    this.global += GLOBAL_WEIGHT * (x - this.global);
  }
}
