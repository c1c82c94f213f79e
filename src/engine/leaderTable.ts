import { HASH_BYTES } from '../util/txnHash.js';

const WORDS = HASH_BYTES / 4;

/**
 * A bundle's leaders, found by (partition, 16-byte hash): the writer's
 * layers 1 and 2 (docs/deduplication.md, "Three layers").
 *
 * The hashes live in one bundle-wide word array (item k's hash at words
 * 4k .. 4k+3, the stored big-endian bytes read as native words: any fixed
 * reading compares equal exactly when the 16 bytes do). The table holds item
 * numbers (k + 1; 0 = empty) in open addressing with linear probing, keyed by
 * the hash's first word and the partition; a hit is confirmed on the
 * partition and all four words, so a hash that merely shares a first word,
 * or the same hash in another partition, is never taken for another.
 *
 * Why not a Map<bigint> per partition (and a Map<string> in front of it):
 * the two maps cost ~180 ns per item (measured, 6 400 ids), this table
 * ~10 ns, and it is allocated once per bundle, sized for every item (at most
 * half full), so it never grows. Equal keys have equal hashes, so one lookup
 * by hash finds every leader the key map would have found, and the leader a
 * broker-local collision must follow.
 *
 * States: empty -> holding n <= capacity leaders. Nothing is ever removed.
 */
export class LeaderTable {
  private readonly slots: Int32Array;
  private readonly partitionOf: Int32Array;
  private readonly mask: number;
  private size = 0;

  /** For up to `capacity` items of one bundle, their hashes in `words`. */
  constructor(
    private readonly words: Uint32Array,
    readonly capacity: number,
  ) {
    let n = 16;
    while (n < capacity * 2) n *= 2;
    this.slots = new Int32Array(n);
    this.mask = n - 1;
    this.partitionOf = new Int32Array(Math.max(1, capacity));
  }

  get count(): number {
    return this.size;
  }

  /**
   * The item already holding item k's hash in `partition` (its number k'),
   * or -1 after recording k as the holder of that hash there.
   */
  findOrAdd(k: number, partition: number): number {
    if (k < 0 || k >= this.capacity) throw new RangeError(`LeaderTable: item ${k} outside 0..${this.capacity - 1}`);
    const w = this.words;
    const at = k * WORDS;
    const w0 = w[at]!;
    const w1 = w[at + 1]!;
    const w2 = w[at + 2]!;
    const w3 = w[at + 3]!;
    const slots = this.slots;
    const mask = this.mask;
    this.partitionOf[k] = partition;
    for (let s = (w0 ^ Math.imul(partition, 0x9e3779b1)) & mask; ; s = (s + 1) & mask) {
      const held = slots[s]!;
      if (held === 0) {
        slots[s] = k + 1;
        this.size++;
        return -1;
      }
      const h = (held - 1) * WORDS;
      if (w[h] === w0 && w[h + 1] === w1 && w[h + 2] === w2 && w[h + 3] === w3 && this.partitionOf[held - 1] === partition) return held - 1;
    }
  }
}
