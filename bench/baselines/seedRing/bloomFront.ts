import { BLOCK_HASHES, BLOOM_MIN_GENERATIONS_PER_WINDOW, BLOOM_TIERS, GENERATION_OVERHEAD_BYTES } from './constants.js';
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
  /** The exact store's block number (BlockRing.hotBlock numbering) of its first hash. */
  readonly firstBlock: number;
  /** A hash in block b sits in slot (b - firstBlock) >> slotShift of the bloom. */
  readonly slotShift: number;
  /**
   * It spans a single block (the 4 096 tier): there is nothing to name, so
   * each hash takes the slot its own bits pick (oneBlockSlot) and a query
   * asks only that slot: the slot bytes then work as two more filter bits,
   * and an absent hash passes ~0.1 % instead of ~0.5 %. Its mask is 1 or 0.
   */
  readonly oneBlock: boolean;
}

/** The slot a hash takes in a single-block generation: w0's bits 16..18 (clear of the block index and the slot bytes' bits; bloom.ts). */
const oneBlockSlot = (w0: number): number => (w0 >>> 16) & 7;

/** Which blocks of a "maybe" generation can hold the hash (BlockRing.collectManyInRange). */
export interface SlotFilter {
  /** Per item (by item index): the slot mask its generation answered. */
  readonly masks: Int32Array;
  readonly firstBlock: number;
  readonly slotShift: number;
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
 * Block naming: the exact store (BlockRing) receives the same hashes in the
 * same order and numbers its blocks (sealed ones and the hot buffer) as it
 * seals them; the entry passes each hash's block number along (add()). Each
 * generation records the block number of its first hash and adds every hash
 * to the bloom slot of its block (bloom.ts), so a "maybe" also says which
 * blocks can hold the hash.
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
  /** Hashes ever added (the default block numbering of add()). */
  private added = 0;
  /** Slot mask of the generation nextMaybe last answered. */
  lastMask = 0;

  /**
   * @param windowMs the partition's window, for the rate-aware tier choice.
   * @param minGensPerWindow 0 = the plain ladder; K > 0 = rate-aware (see nextTier).
   */
  constructor(
    private readonly windowMs: number,
    private readonly minGensPerWindow: number = BLOOM_MIN_GENERATIONS_PER_WINDOW,
  ) {}

  /**
   * Adds a hash committed at createdMs at log offset `offset` (offsets only
   * grow, like the ring's), which the exact store holds as record `pos` of
   * its block number `block` (PartitionEntry passes the ring's numbering; a
   * front on its own numbers its hashes in runs of 4 096 itself).
   */
  add(
    w0: number,
    w1: number,
    w2: number,
    createdMs: number,
    offset: number,
    block = Math.floor(this.added / BLOCK_HASHES),
    pos = this.added % BLOCK_HASHES,
  ): void {
    let g = this.gens.length === 0 ? undefined : this.gens[this.gens.length - 1]!;
    // A full generation, or (never expected: a generation's hashes fill its
    // blocks in order) a hash beyond its last slot or its one block, starts
    // a new one: a slot must always name the hash's block.
    if (
      g === undefined ||
      g.bloom.full ||
      (g.oneBlock ? block !== g.firstBlock : (block - g.firstBlock) >> g.slotShift >= BlockedBloom.SLOTS)
    ) {
      const tier = g === undefined ? 0 : this.nextTier(g);
      const capacity = BLOOM_TIERS[tier]!;
      // Blocks its hashes can land in, from record `pos` of `block` on (one
      // more than capacity / 4 096 when it starts inside a block, as after
      // an expiry dropped a part-filled hot buffer), named by the bloom's 8
      // slots of 2^slotShift blocks each.
      const span = Math.floor((pos + capacity - 1) / BLOCK_HASHES) + 1;
      let slotShift = 0;
      while (BlockedBloom.SLOTS << slotShift < span) slotShift++;
      g = {
        bloom: new BlockedBloom(capacity),
        tier,
        firstCreatedMs: createdMs,
        maxCreatedMs: createdMs,
        minOffset: offset,
        maxOffset: offset,
        firstBlock: block,
        slotShift,
        oneBlock: span === 1,
      };
      this.gens.push(g);
    }
    g.bloom.add(w0, w1, w2, g.oneBlock ? oneBlockSlot(w0) : (block - g.firstBlock) >> g.slotShift);
    this.added++;
    if (createdMs > g.maxCreatedMs) g.maxCreatedMs = createdMs;
    g.maxOffset = offset;
  }

  /**
   * add() for `count` hashes at once: hash i (words 4i .. 4i + 2 of `words`)
   * was committed at or before createdMs at offset firstOffset + i and sits
   * in the exact store as record pos0 + i counted from the start of block
   * block0 (blocks of BLOCK_HASHES records, numbered on). The same bits,
   * generations and watermarks as calling add() for each hash in order; the
   * per-generation bookkeeping runs once per run of hashes that share a
   * generation, so the inner loop is only the bloom writes, whose cache
   * misses then overlap (as in scanMaybe).
   */
  addMany(words: Uint32Array, count: number, createdMs: number, firstOffset: number, block0: number, pos0: number): void {
    let i = 0;
    while (i < count) {
      const at = pos0 + i;
      const block = block0 + Math.floor(at / BLOCK_HASHES);
      // One add() opens the run: it starts a generation when needed, exactly as a single add would.
      this.add(words[4 * i]!, words[4 * i + 1]!, words[4 * i + 2]!, createdMs, firstOffset + i, block, at % BLOCK_HASHES);
      i++;
      const g = this.gens[this.gens.length - 1]!;
      const bloom = g.bloom;
      // How far the same generation takes the rest: its free capacity, and
      // (it names blocks by slot) its last block: a single-block generation
      // ends with its block, a sloted one after SLOTS << slotShift blocks.
      const lastBlock = g.oneBlock ? g.firstBlock : g.firstBlock + (BlockedBloom.SLOTS << g.slotShift) - 1;
      const blockRoom = (lastBlock - block0 + 1) * BLOCK_HASHES - (pos0 + i);
      const n = Math.min(count - i, bloom.capacity - bloom.count, blockRoom);
      if (n <= 0) continue;
      const firstBlock = g.firstBlock;
      const shift = g.slotShift;
      if (g.oneBlock) {
        for (let k = i; k < i + n; k++) {
          const w0 = words[4 * k]!;
          bloom.add(w0, words[4 * k + 1]!, words[4 * k + 2]!, oneBlockSlot(w0));
        }
      } else {
        for (let k = i; k < i + n; k++) {
          const b = block0 + Math.floor((pos0 + k) / BLOCK_HASHES);
          bloom.add(words[4 * k]!, words[4 * k + 1]!, words[4 * k + 2]!, (b - firstBlock) >> shift);
        }
      }
      this.added += n;
      if (createdMs > g.maxCreatedMs) g.maxCreatedMs = createdMs;
      i += n;
      g.maxOffset = firstOffset + i - 1;
    }
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
    return this.nextMaybe(w0, w1, w2, this.gens.length - 1) >= 0;
  }

  /**
   * Index of the newest generation at or below `from` that answers "maybe"
   * for the hash, or -1; `lastMask` is then that generation's slot mask.
   * Lets the caller confirm each "maybe" in the exact store only across that
   * generation's offset range, and there only in the blocks it names.
   */
  nextMaybe(w0: number, w1: number, w2: number, from: number): number {
    const gens = this.gens;
    for (let i = from; i >= 0; i--) {
      const g = gens[i]!;
      let mask = g.bloom.slotMask(w0, w1, w2);
      if (mask !== 0 && g.oneBlock) mask = (mask >>> oneBlockSlot(w0)) & 1;
      if (mask !== 0) {
        this.lastMask = mask;
        return i;
      }
    }
    return -1;
  }
  /**
   * Every live generation's answer for `count` hashes at once: for each
   * generation g that answers "maybe" for item i (words 4i .. 4i + 2 of
   * `words` are its w0..w2), i is appended to perGen[g] and its slot mask to
   * perGenMasks[g] (both in ascending item order, created on first use), and
   * maybe[i] is set to 1. Returns how many items got at least one "maybe".
   *
   * The same answers as nextMaybe() per item and generation, in a different
   * loop order: generations outside, items inside. The bloom blocks of
   * different items are independent reads, so with items inside the
   * processor keeps many of those cache misses in flight at once; walking
   * one item's generations first made each miss wait for the one before.
   * Measured on 64 partitions of 80 k hashes (3 generations): 450-490 ns per
   * hash one item at a time, 90-100 ns batched (docs/deduplication.md, "What
   * the cache costs per message").
   */
  scanMaybe(
    words: Uint32Array,
    count: number,
    perGen: (number[] | undefined)[],
    perGenMasks: (number[] | undefined)[],
    maybe: Uint8Array,
  ): number {
    let any = 0;
    const gens = this.gens;
    for (let g = gens.length - 1; g >= 0; g--) {
      const gen = gens[g]!;
      const bloom = gen.bloom;
      const oneBlock = gen.oneBlock;
      let items: number[] | undefined;
      let masks: number[] | undefined;
      for (let i = 0; i < count; i++) {
        const w0 = words[4 * i]!;
        let mask = bloom.slotMask(w0, words[4 * i + 1]!, words[4 * i + 2]!);
        if (mask === 0) continue;
        if (oneBlock) {
          mask = (mask >>> oneBlockSlot(w0)) & 1;
          if (mask === 0) continue;
        }
        (items ??= perGen[g] ??= []).push(i);
        (masks ??= perGenMasks[g] ??= []).push(mask);
        if (maybe[i] === 0) {
          maybe[i] = 1;
          any++;
        }
      }
    }
    return any;
  }

  /** The block numbering of generation i's slots (see SlotFilter). */
  firstBlockOf(i: number): number {
    return this.gens[i]!.firstBlock;
  }
  slotShiftOf(i: number): number {
    return this.gens[i]!.slotShift;
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
