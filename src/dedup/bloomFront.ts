import { BLOOM_MIN_GENERATIONS_PER_WINDOW, BLOOM_TIERS, GENERATION_OVERHEAD_BYTES } from './constants.js';
import { BlockedBloom } from './bloom.js';

interface Generation {
  readonly bloom: BlockedBloom;
  /** Index into BLOOM_TIERS. */
  readonly tier: number;
  /** Commit time of the first and the latest hash added (ms). */
  readonly firstCreatedMs: number;
  maxCreatedMs: number;
  /** Lowest and highest log offset of the hashes added (the exact store is searched only there on "maybe"). */
  readonly minOffset: number;
  maxOffset: number;
}

/**
 * The bloom front of one partition: a temporal ring of generational blocked
 * bloom filters in front of the exact store.
 *
 * States and transitions:
 * - empty: no generation (fresh entry, or every generation expired).
 * - add: goes to the newest generation; if there is none, a new one starts at
 *   the smallest tier (4096 hashes). When the newest is full, a new one starts
 *   with the next capacity from the tier ladder 4096 -> 32768 -> 262144 ->
 *   1048576 (x8, capped at the ceiling). See nextTier() for the rate-aware
 *   refinement of "next".
 * - expire(cutoff): front generations are dropped while their maxCreatedMs is
 *   before the cutoff (oldest first, stopping at the first one kept).
 *
 * Invariant (no false negatives for in-window hashes): a generation is
 * dropped only when every hash in it was committed before the cutoff, and
 * blooms never forget an added hash, so every hash committed at or after the
 * cutoff answers "maybe" in some live generation. A definitive miss reads one
 * 64-byte block per live generation and nothing else.
 */
export class BloomFront {
  private readonly gens: Generation[] = [];
  /** Highest tier a new generation may take (limitTiers: a hydration). */
  private maxTier = BLOOM_TIERS.length - 1;

  /**
   * @param windowMs the partition's window, for the rate-aware tier choice.
   * @param minGensPerWindow 0 = the plain ladder; K > 0 = rate-aware (see nextTier).
   */
  constructor(
    private readonly windowMs: number,
    private readonly minGensPerWindow: number = BLOOM_MIN_GENERATIONS_PER_WINDOW,
  ) {}

  /** Adds a hash committed at createdMs at log offset `offset` (offsets only grow, like the ring's). */
  add(w0: number, w1: number, w2: number, createdMs: number, offset: number): void {
    let g = this.gens.length === 0 ? undefined : this.gens[this.gens.length - 1]!;
    if (g === undefined || g.bloom.full) {
      const tier = g === undefined ? 0 : this.nextTier(g);
      g = {
        bloom: new BlockedBloom(BLOOM_TIERS[tier]!),
        tier,
        firstCreatedMs: createdMs,
        maxCreatedMs: createdMs,
        minOffset: offset,
        maxOffset: offset,
      };
      this.gens.push(g);
    }
    g.bloom.add(w0, w1, w2);
    if (createdMs > g.maxCreatedMs) g.maxCreatedMs = createdMs;
    g.maxOffset = offset;
  }

  /**
   * The tier of the generation that follows a full one.
   *
   * Plain ladder (minGensPerWindow = 0): one tier up, capped at the ceiling.
   *
   * Rate-aware (K = minGensPerWindow > 0): the full generation's fill time
   * measures the partition's rate, so windowMs / fill is how many generations
   * of its tier a window holds. Step up (x8) only if a window would still
   * hold >= K generations of the next tier (fill x 8K <= window); step down
   * if it holds < K of this one (fill x K > window); else stay. Live bloom
   * capacity averages about (in-window hashes + one generation), so keeping
   * >= K generations per window bounds the bloom's share at about
   * 2 x (1 + 1/K) bytes per hash, while a burst or a high-rate window still
   * climbs the same x8 ladder to the 1M ceiling. The stable band is
   * [K, 8K) generations per window, so the choice does not oscillate. The
   * price is probe work: a definitive miss reads one block per live
   * generation, up to about 8K + 1 of them (constants.ts has the numbers).
   * Soundness does not depend on any of this: expiry is per generation and
   * by max created time, whatever the capacities.
   */
  private nextTier(full: Generation): number {
    const top = this.maxTier;
    const k = this.minGensPerWindow;
    if (k <= 0) return Math.min(full.tier + 1, top);
    const fill = Math.max(0, full.maxCreatedMs - full.firstCreatedMs);
    if (full.tier < top && fill * 8 * k <= this.windowMs) return full.tier + 1;
    if (full.tier > 0 && fill * k > this.windowMs) return Math.min(full.tier - 1, top);
    return Math.min(full.tier, top);
  }

  /**
   * A hydration of `total` hashes is about to be added: until unlimitTiers(),
   * a new generation takes at most the 32 768-hash tier (8 sealed blocks),
   * or the smallest tier that keeps the window within the rule's 8K
   * generations.
   *
   * Why: the rate-aware rule reads a rate from commit times, and a hydration
   * replays a window's hashes in one go, often with equal or close commit
   * times (a bulk load, a burst), so it reads an unbounded rate and climbs
   * to the largest tier: a 190 k-hash window went into one 262 144-hash
   * generation spanning 53 sealed blocks. A miss reads one bloom block per
   * generation, but a hit searches every sealed block of its generation's
   * span: measured ~8-11 us per hit there, ~2 us with generations of at most
   * 32 768 hashes (misses 0.14-0.2 -> 0.34-0.5 us; 3 -> 8 generations).
   * Hydration knows the count, so it bounds both: spans of at most 8 blocks
   * while that leaves at most 8K generations, larger tiers only beyond.
   * Live appends afterwards are tiered by rate again.
   */
  limitTiers(total: number): void {
    const k = this.minGensPerWindow;
    if (k <= 0) return;
    let t = Math.min(1, BLOOM_TIERS.length - 1);
    while (t + 1 < BLOOM_TIERS.length && total > BLOOM_TIERS[t]! * 8 * k) t++;
    this.maxTier = t;
  }
  unlimitTiers(): void {
    this.maxTier = BLOOM_TIERS.length - 1;
  }

  /** false = the hash is in no live generation (definitive); true = maybe. */
  mayContain(w0: number, w1: number, w2: number): boolean {
    const gens = this.gens;
    for (let i = gens.length - 1; i >= 0; i--) {
      if (gens[i]!.bloom.mayContain(w0, w1, w2)) return true;
    }
    return false;
  }

  /**
   * Index of the newest generation at or below `from` that answers "maybe"
   * for the hash, or -1. Lets the caller confirm each "maybe" in the exact
   * store only across that generation's offset range.
   */
  nextMaybe(w0: number, w1: number, w2: number, from: number): number {
    const gens = this.gens;
    for (let i = from; i >= 0; i--) {
      if (gens[i]!.bloom.mayContain(w0, w1, w2)) return i;
    }
    return -1;
  }
  minOffsetOf(i: number): number {
    return this.gens[i]!.minOffset;
  }
  maxOffsetOf(i: number): number {
    return this.gens[i]!.maxOffset;
  }

  /** Drops front generations wholly committed before cutoffMs; returns how many. */
  expire(cutoffMs: number): number {
    let n = 0;
    while (this.gens.length > 0 && this.gens[0]!.maxCreatedMs < cutoffMs) {
      this.gens.shift();
      n++;
    }
    return n;
  }

  get generations(): number {
    return this.gens.length;
  }
  get bytes(): number {
    let b = 0;
    for (const g of this.gens) b += g.bloom.bytes + GENERATION_OVERHEAD_BYTES;
    return b;
  }
  /** Capacities of the live generations, oldest first (tests, bench). */
  capacities(): number[] {
    return this.gens.map((g) => g.bloom.capacity);
  }
  *arrays(): IterableIterator<Uint32Array> {
    for (const g of this.gens) yield* g.bloom.arrays();
  }
}
