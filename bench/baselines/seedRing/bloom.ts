import { BLOOM_BITS_PER_HASH, BLOOM_BLOCK_BYTES, BLOOM_BLOCK_WORDS, BLOOM_PAGE_BLOCKS } from './constants.js';

/** Plain bits per block (bytes 0..47); the 16 slot bytes follow. */
const PLAIN_BITS = 384;
const SLOT_BYTES_AT = PLAIN_BITS / 8;
/** w0's bits 24..31 pick the two slot bytes, so the block index must stay below bit 24. */
const W0_SLOT_SHIFT = 24;
/** Plain positions (0..383): 9-bit fields of a word (bits 0..26) scaled by 3/4, and a 10-bit field of both words' top five bits. */
const plainA = (w: number): number => ((w & 511) * 3) >>> 2;
const plainB = (w: number): number => (((w >>> 9) & 511) * 3) >>> 2;
const plainC = (w: number): number => (((w >>> 18) & 511) * 3) >>> 2;
const plainD = (w1: number, w2: number): number => (((w1 >>> 27) | ((w2 >>> 27) << 5)) * 3) >>> 3;

/**
 * A blocked bloom filter over 128-bit hashes that also names the exact-store
 * block a hash lives in: 16 bits per hash of capacity, all of a hash's bits
 * inside one 64-byte block, so a query reads one cache line.
 *
 * No rehash: the hashes are already uniform (xxh3_128), so the block index
 * comes from w0's low bits (masked to the power-of-two block count), the
 * seven plain positions from w1 and w2, and the two slot bytes from w0's
 * top byte. The bits that choose the block, the positions and the slot bytes
 * are disjoint, which keeps them independent.
 *
 * Slots (block naming). A generation of the bloom front spans up to eight
 * sealed blocks of the exact store, and a plain "maybe" can only say
 * "somewhere in these eight", so every local hit (a re-sent id, a replay)
 * searched all eight (~3 cache misses each). The front knows, when it adds a
 * hash, which of its generation's blocks the hash will sit in (the ring seals
 * every 4 096 hashes in the same order; bloomFront.ts), and passes it as the
 * slot (0..7). Layout of one 64-byte block:
 * - bytes 0..47 (384 bits): a plain filter, seven bits per hash;
 * - bytes 48..63: 16 slot bytes; slot s is bit s of each. A hash of slot s
 *   sets bit s in two of them.
 * A query tests the seven plain bits first (an absent hash usually fails at
 * the first), then ANDs its two slot bytes: the mask of the slots that answer
 * "maybe", 0 a definitive miss. The exact store is then searched only in the
 * named blocks (BlockRing.collectManyInRange): about 2 of 8 for a hit.
 *
 * The price: an absent hash passes ~0.5 % of the time against ~0.1 % for
 * seven bits anywhere in the 512 (tested), each such pass costing the search
 * of ~2 blocks instead of 8. Measured on 16 hydrated partitions of 80 k
 * hashes (docs/deduplication.md, "Blooms that name the block"): misses
 * ~+30 ns per item, a hit 1.3-1.5 -> 0.9-1.0 us in a replayed segment and
 * 2.7-3.7 -> 1.5-1.6 us per hit at 10 % re-sent. Slicing all 64 bytes (slot s =
 * bit s of every byte) named blocks exactly but let ~3 % of absent hashes
 * through; one class per layout made the front's call site polymorphic,
 * +45 ns per miss: both measured slower.
 *
 * Storage is paged: 1024 blocks (64 KiB) per page, a page allocated on its
 * first insert. So the largest allocation is 64 KiB, like an exact block, and
 * an unallocated page is all zeroes by definition: a query landing there is a
 * definitive miss without touching memory.
 *
 * States: filling (count < capacity) -> full (count == capacity; the owner
 * starts a new generation). Bits are only ever set, never cleared, so there
 * are no false negatives: every added hash keeps its seven plain bits and its
 * slot's bit in its two slot bytes, so its mask always holds its slot.
 */
export class BlockedBloom {
  /** Slots a hash can be added in (its block within the generation). */
  static readonly SLOTS = 8;
  readonly capacity: number;
  private readonly blockMask: number;
  private readonly pageBlocks: number;
  private readonly pages: (Uint32Array | undefined)[];
  /** The same pages as bytes (the slot bytes). */
  private readonly bytePages: (Uint8Array | undefined)[];
  private allocatedBytes = 0;
  count = 0;

  constructor(capacity: number) {
    const blocks = (capacity * BLOOM_BITS_PER_HASH) / (BLOOM_BLOCK_BYTES * 8);
    if (!Number.isInteger(blocks) || blocks < 1 || (blocks & (blocks - 1)) !== 0) {
      throw new RangeError(`BlockedBloom: capacity ${capacity} must give a power-of-two block count`);
    }
    if (blocks > 1 << W0_SLOT_SHIFT) throw new RangeError(`BlockedBloom: capacity ${capacity} is too large`);
    this.capacity = capacity;
    this.blockMask = blocks - 1;
    this.pageBlocks = Math.min(blocks, BLOOM_PAGE_BLOCKS);
    this.pages = new Array<Uint32Array | undefined>(Math.ceil(blocks / this.pageBlocks)).fill(undefined);
    this.bytePages = new Array<Uint8Array | undefined>(this.pages.length).fill(undefined);
  }

  get full(): boolean {
    return this.count >= this.capacity;
  }
  /** Bytes actually allocated (pages touched so far). */
  get bytes(): number {
    return this.allocatedBytes;
  }
  /** Bytes once every page is touched: capacity x 2 B. */
  get fullBytes(): number {
    return (this.capacity * BLOOM_BITS_PER_HASH) / 8;
  }

  /** Adds the hash with big-endian words w0..w2 (w3 is not needed) in slot `slot` (0..7). */
  add(w0: number, w1: number, w2: number, slot = 0): void {
    if (!(slot >= 0 && slot < 8)) throw new RangeError(`BlockedBloom.add: slot ${slot}`);
    const block = w0 & this.blockMask;
    const p = (block / BLOOM_PAGE_BLOCKS) | 0;
    let page = this.pages[p];
    if (page === undefined) {
      page = new Uint32Array(this.pageBlocks * BLOOM_BLOCK_WORDS);
      this.pages[p] = page;
      this.bytePages[p] = new Uint8Array(page.buffer);
      this.allocatedBytes += page.byteLength;
    }
    const base = (block % BLOOM_PAGE_BLOCKS) * BLOOM_BLOCK_WORDS;
    let b = plainA(w1);
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = plainB(w1);
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = plainC(w1);
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = plainA(w2);
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = plainB(w2);
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = plainC(w2);
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = plainD(w1, w2);
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    const bytes = this.bytePages[p]!;
    const at = base * 4 + SLOT_BYTES_AT;
    const bit = 1 << slot;
    bytes[at + (w0 >>> 28)]! |= bit;
    bytes[at + ((w0 >>> W0_SLOT_SHIFT) & 15)]! |= bit;
    this.count++;
  }

  /** false = definitely never added; true = maybe (confirm exactly). */
  mayContain(w0: number, w1: number, w2: number): boolean {
    return this.slotMask(w0, w1, w2) !== 0;
  }

  /** Bit s set = slot s answers "maybe"; 0 = definitely never added. Reads one 64-byte block at most. */
  slotMask(w0: number, w1: number, w2: number): number {
    const block = w0 & this.blockMask;
    const pi = (block / BLOOM_PAGE_BLOCKS) | 0;
    const page = this.pages[pi];
    if (page === undefined) return 0;
    const base = (block % BLOOM_PAGE_BLOCKS) * BLOOM_BLOCK_WORDS;
    let b = plainA(w1);
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return 0;
    b = plainB(w1);
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return 0;
    b = plainC(w1);
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return 0;
    b = plainA(w2);
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return 0;
    b = plainB(w2);
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return 0;
    b = plainC(w2);
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return 0;
    b = plainD(w1, w2);
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return 0;
    const bytes = this.bytePages[pi]!;
    const at = base * 4 + SLOT_BYTES_AT;
    return bytes[at + (w0 >>> 28)]! & bytes[at + ((w0 >>> W0_SLOT_SHIFT) & 15)]!;
  }

  /** Every typed array held (tests: no allocation over 64 KiB). */
  *arrays(): IterableIterator<Uint32Array> {
    for (const p of this.pages) if (p !== undefined) yield p;
  }
}
