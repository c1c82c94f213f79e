import { HASH_BYTES } from '../util/txnHash.js';

const WORDS = HASH_BYTES / 4;
const INITIAL_SLOTS = 64;

/**
 * One partition's leaders within one bundle, found by their 16-byte hash:
 * the writer's layers 1 and 2 (docs/deduplication.md, "Three layers").
 *
 * The hashes live in one bundle-wide word array (item k's hash at words
 * 4k .. 4k+3, the stored big-endian bytes read as native words: any fixed
 * reading compares equal exactly when the 16 bytes do). The table holds item
 * numbers (k + 1; 0 = empty) in open addressing with linear probing, keyed by
 * the hash's first word; a hit is confirmed on all four words, so a hash that
 * merely shares a first word is never taken for another.
 *
 * Why not Map<bigint> (and a Map<string> in front of it): the two maps cost
 * ~180 ns per item (measured, 6 400 ids); this table ~10 ns. Equal keys have
 * equal hashes, so one lookup by hash finds every leader the key map would
 * have found, and the leader a broker-local collision must follow; the
 * writer then tells the two apart by comparing the transactionIds.
 *
 * States: empty -> holding n leaders (n < half the slots: the table doubles
 * and re-inserts before it gets fuller). Nothing is ever removed.
 */
export class LeaderTable {
  private slots = new Int32Array(INITIAL_SLOTS);
  private mask = INITIAL_SLOTS - 1;
  private size = 0;

  constructor(private readonly words: Uint32Array) {}

  get count(): number {
    return this.size;
  }

  /**
   * The item already holding item k's hash (its number k'), or -1 after
   * recording k as the holder of that hash.
   */
  findOrAdd(k: number): number {
    const w = this.words;
    const at = k * WORDS;
    const w0 = w[at]!;
    const w1 = w[at + 1]!;
    const w2 = w[at + 2]!;
    const w3 = w[at + 3]!;
    const slots = this.slots;
    const mask = this.mask;
    for (let s = w0 & mask; ; s = (s + 1) & mask) {
      const held = slots[s]!;
      if (held === 0) {
        slots[s] = k + 1;
        if (++this.size * 2 > mask) this.grow();
        return -1;
      }
      const h = (held - 1) * WORDS;
      if (w[h] === w0 && w[h + 1] === w1 && w[h + 2] === w2 && w[h + 3] === w3) return held - 1;
    }
  }

  private grow(): void {
    const old = this.slots;
    const slots = new Int32Array(old.length * 2);
    const mask = slots.length - 1;
    const w = this.words;
    for (const held of old) {
      if (held === 0) continue;
      let s = w[(held - 1) * WORDS]! & mask;
      while (slots[s] !== 0) s = (s + 1) & mask;
      slots[s] = held;
    }
    this.slots = slots;
    this.mask = mask;
  }
}
