import { randomFillSync } from 'node:crypto';

/**
 * A blocked bloom filter over 16-byte transactionId hashes: the store of a
 * filter-tier cache entry (entry.ts), about 2.7 bytes a hash at the default
 * density (constants.ts, FILTER_BITS_PER_HASH), fewer under pressure.
 *
 * It answers one question, "may this hash have been added?", with no false
 * negative: every bit an add() sets stays set (nothing is ever cleared), and
 * mayHave() tests exactly the bits add() set for the same 16 bytes and the
 * same secret. A "maybe" for a hash never added (a false positive) only
 * sends that item to PostgreSQL's lookup; it never decides anything.
 *
 * Layout: `blocks` blocks of 512 bits, one 64-byte cache line each. A hash picks one block from its first word and sets K bits in
 * it from its first two words, so an answer costs one cache line. Only the
 * first 8 bytes count, which is what the occurrence table keys on: an exact
 * entry can be turned into a filter from its table alone (entry.ts,
 * demote). The words are mixed with per-filter secret words first:
 * client-chosen transactionIds (whose xxh3 anyone can compute) cannot aim at
 * a block.
 *
 * The block of a hash is floor(m x n / 2^32) for its mixed first word m and
 * n blocks (computed exactly, blockOf), so any block count works, and for
 * an even n the block at n / 2 is floor(its block at n / 2): the filter with
 * half the blocks is the OR of adjacent pairs (2j | 2j + 1), and it answers
 * "maybe" for every hash the larger one did. fold() does that in place when
 * memory is short: half the bytes, a higher false-positive rate, never a
 * false negative. Sizes are rounded up to c x 2^k blocks with c in 8..15
 * (blocksFor), so a filter is within 12.5 % of its target and folds k times.
 *
 * False positives, for n hashes in b = 512 x blocks bits: about
 * (1 - e^(-K n / b))^K, a little more for blocks of 512 bits (the load
 * varies by block). K = 5 suits the 4-16 bits a hash the cache uses,
 * including a filter folded down to them: ~0.17 % at 16, ~2.3 % at 8,
 * ~10 % at 5 (falsePositiveModel(); with the blocks' uneven load).
 *
 * A filter may instead set DENSE_K = 8 bits a hash (the constructor's k):
 * at 16-20 bits a hash it has about half K = 5's false positives (~0.09 %
 * against ~0.17 % at 16, ~0.025 % against ~0.07 % at 20), the same at
 * 8-10, and more once folded below that (~17 % against ~10 % at 5). The
 * cache gives it only to generations it grows while it builds at full
 * density (cache.ts, growFilter), which stay there unless memory runs
 * short later. A fold keeps K: it moves blocks, never bits within one.
 */
export class PresenceFilter {
  /** Bits set per hash, all in one block, by default. */
  static readonly K = 5;
  /** Bits set per hash by a filter built to stay dense (see the class comment). */
  static readonly DENSE_K = 8;
  /** Words (32 bits) per block: 512 bits, one cache line. */
  static readonly BLOCK_WORDS = 16;
  static readonly BLOCK_BYTES = 64;
  /** Fixed accounted overhead of one filter (object, secrets, typed array header; a filter entry's total was measured in test/unit/dedup/accounting.test.ts). */
  static readonly OVERHEAD_BYTES = 64;

  private words: Uint32Array;
  /** Blocks. */
  private n: number;
  /** Hashes added (with repeats): the load that sets the false-positive rate. */
  added = 0;
  private readonly s0: number;
  private readonly s1: number;
  private readonly s2: number;
  /** Bits set per hash: K or DENSE_K. */
  readonly k: number;

  /** A filter of `blocks` blocks (an integer in [1, 2^26]) setting `k` bits a hash (K or DENSE_K). */
  constructor(blocks: number, secret?: Uint32Array, k: number = PresenceFilter.K) {
    if (!Number.isInteger(blocks) || blocks < 1 || blocks > 2 ** 26) {
      throw new RangeError(`PresenceFilter: blocks must be an integer in [1, 2^26], got ${blocks}`);
    }
    if (k !== PresenceFilter.K && k !== PresenceFilter.DENSE_K) {
      throw new RangeError(`PresenceFilter: k must be ${PresenceFilter.K} or ${PresenceFilter.DENSE_K}, got ${k}`);
    }
    this.k = k;
    this.words = new Uint32Array(blocks * PresenceFilter.BLOCK_WORDS);
    this.n = blocks;
    const s = secret ?? randomFillSync(new Uint32Array(3));
    this.s0 = s[0]! | 0;
    this.s1 = s[1]! | 0;
    this.s2 = s[2]! | 0;
  }

  /**
   * The block count that gives at least `bitsPerHash` bits to each of
   * `hashes` hashes: rounded up to c x 2^k with c in 8..15 (within 12.5 %,
   * and foldable k times), at most 2^26.
   */
  static blocksFor(hashes: number, bitsPerHash: number): number {
    const want = Math.max(1, Math.ceil((Math.max(0, hashes) * bitsPerHash) / 512));
    if (want <= 8) return want;
    const k = Math.floor(Math.log2(want)) - 3;
    return Math.min(2 ** 26, Math.ceil(want / 2 ** k) * 2 ** k);
  }

  /** Accounted bytes of a filter of `blocks` blocks. */
  static bytesFor(blocks: number): number {
    return blocks * PresenceFilter.BLOCK_BYTES + PresenceFilter.OVERHEAD_BYTES;
  }

  get blocks(): number {
    return this.n;
  }

  /**
   * floor(m x n / 2^32), exactly (m x n needs up to 58 bits, past a double's
   * 53): with m = mh x 2^16 + ml, it is floor((mh x n + floor(ml x n / 2^16)) / 2^16),
   * every term below 2^43. Exactness is what fold() relies on.
   */
  private blockOf(m: number): number {
    const n = this.n;
    return Math.floor(((m >>> 16) * n + Math.floor(((m & 0xffff) * n) / 65536)) / 65536);
  }
  get bytes(): number {
    return PresenceFilter.bytesFor(this.blocks);
  }
  /** Bits per added hash (Infinity when empty). */
  get bitsPerHash(): number {
    return (this.blocks * 512) / this.added;
  }

  /**
   * Adds the hash whose first two big-endian words are w0, w1. A key of
   * (0, 0) is taken as (0, 1), as the occurrence table stores it, so a
   * filter built from a table and one built from hashes agree.
   */
  add(w0: number, w1: number): void {
    if (w0 === 0 && w1 === 0) w1 = 1;
    const m = fmix(w0 ^ this.s0);
    const base = this.blockOf(m) * PresenceFilter.BLOCK_WORDS;
    const a = fmix(w1 ^ this.s1);
    // The block is read from m's high bits; its low bits join w1's in the
    // second position word.
    const b = fmix(a ^ (m & 0xffff) ^ this.s2);
    const w = this.words;
    let p = a & 511;
    w[base + (p >>> 5)]! |= 1 << (p & 31);
    p = (a >>> 9) & 511;
    w[base + (p >>> 5)]! |= 1 << (p & 31);
    p = (a >>> 18) & 511;
    w[base + (p >>> 5)]! |= 1 << (p & 31);
    p = b & 511;
    w[base + (p >>> 5)]! |= 1 << (p & 31);
    p = (b >>> 9) & 511;
    w[base + (p >>> 5)]! |= 1 << (p & 31);
    if (this.k === PresenceFilter.DENSE_K) {
      const c = fmix(b ^ this.s1 ^ DENSE_SALT);
      p = c & 511;
      w[base + (p >>> 5)]! |= 1 << (p & 31);
      p = (c >>> 9) & 511;
      w[base + (p >>> 5)]! |= 1 << (p & 31);
      p = (c >>> 18) & 511;
      w[base + (p >>> 5)]! |= 1 << (p & 31);
    }
    this.added++;
  }

  /** False only if no hash with these first two words was ever added. */
  mayHave(w0: number, w1: number): boolean {
    if (w0 === 0 && w1 === 0) w1 = 1;
    const m = fmix(w0 ^ this.s0);
    const base = this.blockOf(m) * PresenceFilter.BLOCK_WORDS;
    const a = fmix(w1 ^ this.s1);
    const b = fmix(a ^ (m & 0xffff) ^ this.s2);
    const w = this.words;
    let p = a & 511;
    if ((w[base + (p >>> 5)]! & (1 << (p & 31))) === 0) return false;
    p = (a >>> 9) & 511;
    if ((w[base + (p >>> 5)]! & (1 << (p & 31))) === 0) return false;
    p = (a >>> 18) & 511;
    if ((w[base + (p >>> 5)]! & (1 << (p & 31))) === 0) return false;
    p = b & 511;
    if ((w[base + (p >>> 5)]! & (1 << (p & 31))) === 0) return false;
    p = (b >>> 9) & 511;
    if ((w[base + (p >>> 5)]! & (1 << (p & 31))) === 0) return false;
    if (this.k !== PresenceFilter.DENSE_K) return true;
    const c = fmix(b ^ this.s1 ^ DENSE_SALT);
    p = c & 511;
    if ((w[base + (p >>> 5)]! & (1 << (p & 31))) === 0) return false;
    p = (c >>> 9) & 511;
    if ((w[base + (p >>> 5)]! & (1 << (p & 31))) === 0) return false;
    p = (c >>> 18) & 511;
    return (w[base + (p >>> 5)]! & (1 << (p & 31))) !== 0;
  }

  /** Whether fold() can halve it (an even block count). */
  get canFold(): boolean {
    return this.n % 2 === 0;
  }

  /**
   * Halves the filter in place: block j becomes block 2j | block 2j + 1.
   * Every hash that mapped to either maps to j now (floor(x / 2) =
   * floor(floor(x) / 2) for x = m x n / 2^32), with the same bits set, so
   * nothing that answered "maybe" answers "absent" afterwards. Returns false
   * (and does nothing) for an odd block count.
   */
  fold(): boolean {
    const blocks = this.n;
    if (blocks % 2 !== 0) return false;
    const W = PresenceFilter.BLOCK_WORDS;
    const next = new Uint32Array((blocks / 2) * W);
    const w = this.words;
    for (let j = 0; j < blocks / 2; j++) {
      const a = 2 * j * W;
      for (let i = 0; i < W; i++) next[j * W + i] = w[a + i]! | w[a + W + i]!;
    }
    this.words = next;
    this.n = blocks / 2;
    return true;
  }

  /** Share of bits set (tests, diagnostics). */
  fillRatio(): number {
    let set = 0;
    for (const x of this.words) set += popcount(x);
    return set / (this.words.length * 32);
  }
}

/** The textbook false-positive rate of a bloom filter with k hashes at `bitsPerHash` (blocking adds a little). */
export function falsePositiveModel(bitsPerHash: number, k: number = PresenceFilter.K): number {
  return (1 - Math.exp(-k / bitsPerHash)) ** k;
}

/**
 * What halving a filter of `bitsPerHash` bits a hash of its load adds to its
 * false-positive rate, by the model: the price of a fold, by which the cache
 * picks what to fold (cache.ts, foldToFree). Every generation of an entry is
 * read for every item, so a fold adds its price to that entry's rate.
 * For one k the price falls as the bits rise, so among filters of one k the
 * densest is the cheapest to fold. Across k it is what decides: at ~21 bits a
 * hash a DENSE_K filter's fold costs a little less than a K one's (0.0064
 * against 0.0074), at ~10.5 far more (0.134 against 0.079; measured
 * after the fold: 14.5 % against 9.0 %, test/unit/dedup/presenceFilter.test.ts).
 */
export function foldCost(bitsPerHash: number, k: number): number {
  return falsePositiveModel(bitsPerHash / 2, k) - falsePositiveModel(bitsPerHash, k);
}

/** Mixed into a DENSE_K filter's third position word, so it is not the second's. */
const DENSE_SALT = 0x5bd1e995;

/** murmur3's 32-bit finaliser: a bijection that spreads every input bit over the output. */
function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  x = (x + (x >>> 4)) & 0x0f0f0f0f;
  return Math.imul(x, 0x01010101) >>> 24;
}
