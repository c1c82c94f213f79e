import { BLOOM_BITS_PER_HASH, BLOOM_BLOCK_BYTES, BLOOM_BLOCK_WORDS, BLOOM_PAGE_BLOCKS } from './constants.js';

/**
 * A blocked bloom filter over 128-bit hashes: 16 bits per hash of capacity,
 * k = 7, with all seven probe bits inside one 64-byte (512-bit) block, so a
 * query reads one cache line.
 *
 * No rehash: the hashes are already uniform (xxh3_128), so the block index
 * comes from the first word (w0, masked to the power-of-two block count) and
 * the seven 9-bit bit positions from the next 63 bits (w1 and w2). The bits
 * that choose the block and the bits that choose positions are disjoint,
 * which keeps the in-block positions independent of the block choice.
 *
 * Storage is paged: 1024 blocks (64 KiB) per page, a page allocated on its
 * first insert. So the largest allocation is 64 KiB, like an exact block, and
 * an unallocated page is all zeroes by definition: a query landing there is a
 * definitive miss without touching memory.
 *
 * States: filling (count < capacity) -> full (count == capacity; the owner
 * starts a new generation). Bits are only ever set, never cleared, so there
 * are no false negatives: every added hash keeps all its seven bits set.
 */
export class BlockedBloom {
  readonly capacity: number;
  private readonly blockMask: number;
  private readonly pageBlocks: number;
  private readonly pages: (Uint32Array | undefined)[];
  private allocatedBytes = 0;
  count = 0;

  constructor(capacity: number) {
    const blocks = (capacity * BLOOM_BITS_PER_HASH) / (BLOOM_BLOCK_BYTES * 8);
    if (!Number.isInteger(blocks) || blocks < 1 || (blocks & (blocks - 1)) !== 0) {
      throw new RangeError(`BlockedBloom: capacity ${capacity} must give a power-of-two block count`);
    }
    this.capacity = capacity;
    this.blockMask = blocks - 1;
    this.pageBlocks = Math.min(blocks, BLOOM_PAGE_BLOCKS);
    this.pages = new Array<Uint32Array | undefined>(Math.ceil(blocks / this.pageBlocks)).fill(undefined);
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

  /** Adds the hash with big-endian words w0..w2 (w3 is not needed). */
  add(w0: number, w1: number, w2: number): void {
    const block = w0 & this.blockMask;
    const p = (block / BLOOM_PAGE_BLOCKS) | 0;
    let page = this.pages[p];
    if (page === undefined) {
      page = new Uint32Array(this.pageBlocks * BLOOM_BLOCK_WORDS);
      this.pages[p] = page;
      this.allocatedBytes += page.byteLength;
    }
    const base = (block % BLOOM_PAGE_BLOCKS) * BLOOM_BLOCK_WORDS;
    let b = w1 & 511;
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = (w1 >>> 9) & 511;
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = (w1 >>> 18) & 511;
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = ((w1 >>> 27) | (w2 << 5)) & 511;
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = (w2 >>> 4) & 511;
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = (w2 >>> 13) & 511;
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    b = (w2 >>> 22) & 511;
    page[base + (b >>> 5)]! |= 1 << (b & 31);
    this.count++;
  }

  /** false = definitely never added; true = maybe (confirm exactly). Reads one 64-byte block at most. */
  mayContain(w0: number, w1: number, w2: number): boolean {
    const block = w0 & this.blockMask;
    const page = this.pages[(block / BLOOM_PAGE_BLOCKS) | 0];
    if (page === undefined) return false;
    const base = (block % BLOOM_PAGE_BLOCKS) * BLOOM_BLOCK_WORDS;
    let b = w1 & 511;
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return false;
    b = (w1 >>> 9) & 511;
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return false;
    b = (w1 >>> 18) & 511;
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return false;
    b = ((w1 >>> 27) | (w2 << 5)) & 511;
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return false;
    b = (w2 >>> 4) & 511;
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return false;
    b = (w2 >>> 13) & 511;
    if (((page[base + (b >>> 5)]! >>> (b & 31)) & 1) === 0) return false;
    b = (w2 >>> 22) & 511;
    return ((page[base + (b >>> 5)]! >>> (b & 31)) & 1) !== 0;
  }

  /** Every typed array held (tests: no allocation over 64 KiB). */
  *arrays(): IterableIterator<Uint32Array> {
    for (const p of this.pages) if (p !== undefined) yield p;
  }
}
