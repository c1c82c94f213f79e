import {
  BLOCK_BYTES,
  BLOCK_HASHES,
  BLOCK_OFFSET_BYTES,
  BLOCK_OVERHEAD_BYTES,
  HASH_BYTES,
  HOT_INITIAL_HASHES,
  UNKNOWN_OFFSET_DELTA,
} from './constants.js';
import { compareAt, lowerBound, sortedContains, sortRecordsInPlace, viewOf } from './hashRecords.js';
import type { SlotFilter } from './bloomFront.js';

/** An immutable, sorted block of exactly BLOCK_HASHES hashes (one 64 KiB Buffer). */
export interface SealedBlock {
  /** BLOCK_HASHES records in ascending bytewise order. Never written after the seal. */
  readonly hashes: Buffer;
  /** DataView over `hashes` (built once at the seal, for fast word reads). */
  readonly view: DataView;
  /**
   * offsets[j] + minOffset is the log offset of record j (UNKNOWN_OFFSET_DELTA:
   * not representable). Permuted with the records at the seal.
   */
  readonly offsets: Uint32Array;
  /** Lowest and highest log offset of the hashes it holds. */
  readonly minOffset: number;
  readonly maxOffset: number;
  /** Latest commit time (ms) of any row that contributed a hash: its whole span is older than this. */
  readonly maxCreatedMs: number;
  /** Its number: the ring's seals so far when it was sealed (the k-th hash ever appended lies in block floor(k / BLOCK_HASHES)). */
  readonly seq: number;
}

/**
 * The exact store of one partition: a time-ordered ring of sealed blocks plus
 * one hot buffer. There is no per-hash map and no refcount; membership is
 * "present in some surviving block or in the hot buffer".
 *
 * States and transitions:
 * - empty: no blocks, no hot buffer (hot = null).
 * - append: hashes are copied, in arrival (= offset) order, onto the end of
 *   the hot buffer. The hot buffer is allocated small (HOT_INITIAL_HASHES)
 *   and grows by doubling (power-of-two capacities only), never past
 *   BLOCK_HASHES.
 * - index: the hot buffer is searched through a small open-addressing index
 *   of its record positions (hotIndex, twice its capacity, linear probing on
 *   the record's last word), brought up to date with every record appended
 *   so far before each lookup (ensureIndexed); appends themselves only copy.
 *   So a lookup in the hot buffer is one or two probes of a 16 KiB table
 *   plus a 16-byte compare per candidate, and nothing is moved until the
 *   seal. (It replaced a sorted prefix plus an arrival-order tail merged into
 *   it every 256 appends: ~140 ns per appended hash of record moves.)
 * - seal: the instant the hot buffer holds BLOCK_HASHES hashes it is sorted
 *   in place, offsets carried along, and that same Buffer becomes the newest
 *   sealed block (no copy); its index is dropped and the next append starts a
 *   fresh hot buffer. Because BLOCK_HASHES is a power of two, a buffer that
 *   reached it by doubling is exactly full.
 * - expire(cutoff): front blocks are dropped while their maxCreatedMs is
 *   before the cutoff; the hot buffer (the newest data) is dropped only after
 *   every sealed block has gone and its own maxCreatedMs is before the cutoff.
 *
 * Invariants:
 * - Offsets only grow along the ring: every hash of block i has a lower offset
 *   than every hash of block i+1 and of the hot buffer (append() enforces
 *   strictly increasing offsets), so the front block also holds the lowest
 *   offsets. That is what lets the entry raise hydratedFrom to a dropped
 *   block's maxOffset.
 * - No refcounts needed: a hash lives independently in every block holding
 *   it, and expiry drops whole blocks, so a hash held by two blocks stays
 *   known until the later one drops.
 * - Largest allocation: one block (BLOCK_BYTES). The hot buffer's capacities
 *   are powers of two <= BLOCK_HASHES and sealed blocks are exactly
 *   BLOCK_BYTES; nothing else holds hashes (the hot index holds 2-byte
 *   positions, 16 KiB at most). Each unit also holds one offset
 *   delta per hash (a Uint32Array a quarter of its size), permuted with the
 *   hashes at the seal, so a hit can name where it was committed.
 */
export class BlockRing {
  private readonly blocks: SealedBlock[] = [];
  private hot: Buffer | null = null;
  private hotView: DataView | null = null;
  /** Parallel to `hot`: each record's offset as a delta from hotMinOffset. */
  private hotOffsets: Uint32Array | null = null;
  private hotCount = 0;
  /**
   * Open-addressing index of the hot buffer: slot -> record position + 1
   * (0 = free), 2 x the hot capacity slots, linear probing from the record's
   * last word. Records 0 .. hotIndexed-1 are in it.
   */
  private hotIndex: Uint16Array | null = null;
  private hotIndexed = 0;
  private hotMinOffset = 0;
  private hotMaxOffset = 0;
  private hotMaxCreatedMs = -Infinity;
  /** Highest offset ever appended (-Infinity when none): appends must go above it. */
  private lastOffset = -Infinity;
  /** Blocks sealed so far: the next seal's number, and so the hot buffer's block number. */
  private sealed = 0;

  /**
   * Appends `count` hashes read from `src` at byte `srcAt`, carrying offsets
   * firstOffset .. firstOffset + count - 1, committed at or before createdMs.
   * `upcoming` = hashes the caller already knows will follow at once (a
   * hydration): the hot buffer is then sized for them in one step instead of
   * doubling through every intermediate size. Capacities stay powers of two
   * <= BLOCK_HASHES either way.
   */
  append(src: Buffer, srcAt: number, count: number, firstOffset: number, createdMs: number, upcoming = 0): void {
    if (count <= 0) return;
    if (!(firstOffset > this.lastOffset)) {
      throw new RangeError(`BlockRing.append: offset ${firstOffset} not above ${this.lastOffset} (offsets must grow along the ring)`);
    }
    if (src.length < srcAt + count * HASH_BYTES) throw new RangeError('BlockRing.append: hashes buffer too short');
    let i = 0;
    while (i < count) {
      this.ensureRoom(count - i + upcoming);
      const hot = this.hot!;
      const room = hot.length / HASH_BYTES - this.hotCount;
      const take = Math.min(count - i, room);
      src.copy(hot, this.hotCount * HASH_BYTES, srcAt + i * HASH_BYTES, srcAt + (i + take) * HASH_BYTES);
      if (this.hotCount === 0) this.hotMinOffset = firstOffset + i;
      const offs = this.hotOffsets!;
      const delta0 = firstOffset + i - this.hotMinOffset;
      for (let k = 0; k < take; k++) {
        const d = delta0 + k;
        offs[this.hotCount + k] = d < UNKNOWN_OFFSET_DELTA ? d : UNKNOWN_OFFSET_DELTA;
      }
      this.hotCount += take;
      this.hotMaxOffset = firstOffset + i + take - 1;
      if (createdMs > this.hotMaxCreatedMs) this.hotMaxCreatedMs = createdMs;
      i += take;
      if (this.hotCount === BLOCK_HASHES) this.seal();
    }
    this.lastOffset = firstOffset + count - 1;
  }

  /**
   * Makes room in the hot buffer for up to `need` more hashes, growing it by
   * doubling (to the smallest power of two that fits, capped at one block).
   * When it is already a full block's capacity, the caller fills it and seals.
   */
  private ensureRoom(need: number): void {
    const cap = this.hot === null ? 0 : this.hot.length / HASH_BYTES;
    if (cap - this.hotCount >= need || cap === BLOCK_HASHES) return;
    let next = Math.max(cap, HOT_INITIAL_HASHES);
    while (next < this.hotCount + need && next < BLOCK_HASHES) next *= 2;
    // allocUnsafeSlow: a buffer of its own, never a slice of Node's shared
    // pool (a pool slice would keep a whole 8 KiB pool alive and be
    // misaccounted). Every byte below hotCount is copied in before it is read.
    const grown = Buffer.allocUnsafeSlow(next * HASH_BYTES);
    const grownOffsets = new Uint32Array(next);
    if (this.hot !== null && this.hotCount > 0) {
      this.hot.copy(grown, 0, 0, this.hotCount * HASH_BYTES);
      grownOffsets.set(this.hotOffsets!.subarray(0, this.hotCount));
    }
    this.hot = grown;
    this.hotView = viewOf(grown);
    this.hotOffsets = grownOffsets;
    // The index is sized by the capacity: rebuilt (lazily) for the new one.
    this.hotIndex = null;
    this.hotIndexed = 0;
  }

  /** The hot buffer is exactly one block: sort it in place (offsets along) and hand the same Buffer to the ring. */
  private seal(): void {
    const hot = this.hot!;
    const offsets = this.hotOffsets!;
    sortRecordsInPlace(hot, BLOCK_HASHES, offsets);
    this.blocks.push({
      hashes: hot,
      view: this.hotView!,
      offsets,
      minOffset: this.hotMinOffset,
      maxOffset: this.hotMaxOffset,
      maxCreatedMs: this.hotMaxCreatedMs,
      seq: this.sealed++,
    });
    this.dropHot();
  }

  private dropHot(): void {
    this.hot = null;
    this.hotView = null;
    this.hotOffsets = null;
    this.hotIndex = null;
    this.hotIndexed = 0;
    this.hotCount = 0;
    this.hotMaxCreatedMs = -Infinity;
  }

  /** Brings the hot index up to date with every record of the hot buffer. */
  private ensureIndexed(): Uint16Array {
    const hv = this.hotView!;
    let index = this.hotIndex;
    if (index === null) {
      index = new Uint16Array((this.hot!.length / HASH_BYTES) * 2);
      this.hotIndex = index;
      this.hotIndexed = 0;
    }
    const mask = index.length - 1;
    for (let j = this.hotIndexed; j < this.hotCount; j++) {
      let s = hv.getUint32(j * HASH_BYTES + 12) & mask;
      while (index[s] !== 0) s = (s + 1) & mask;
      index[s] = j + 1;
    }
    this.hotIndexed = this.hotCount;
    return index;
  }

  /** Exact membership in the hot buffer (through its index). */
  private hotHas(q0: number, q1: number, q2: number, q3: number): boolean {
    if (this.hotCount === 0) return false;
    const index = this.ensureIndexed();
    const hv = this.hotView!;
    const mask = index.length - 1;
    for (let s = q3 & mask; ; s = (s + 1) & mask) {
      const e = index[s]!;
      if (e === 0) return false;
      if (compareAt(hv, (e - 1) * HASH_BYTES, q0, q1, q2, q3) === 0) return true;
    }
  }

  /**
   * Every offset at which the hot buffer holds each of the queries order[k]
   * (k < n) whose mask (if any) has `bit`, pushed to out[i]; false when one
   * is not representable. One index probe per query: equal records are all
   * in the query's probe run (each was inserted along it).
   */
  private collectHot(
    q: DataView,
    order: Int32Array,
    n: number,
    out: (number[] | undefined)[],
    masks: Int32Array | null,
    bit: number,
  ): boolean {
    const index = this.ensureIndexed();
    const hv = this.hotView!;
    const offs = this.hotOffsets!;
    const base = this.hotMinOffset;
    const mask = index.length - 1;
    let known = true;
    for (let k = 0; k < n; k++) {
      const i = order[k]!;
      if (masks !== null && (masks[i]! & bit) === 0) continue;
      const qo = i * HASH_BYTES;
      const q0 = q.getUint32(qo);
      const q1 = q.getUint32(qo + 4);
      const q2 = q.getUint32(qo + 8);
      const q3 = q.getUint32(qo + 12);
      for (let s = q3 & mask; ; s = (s + 1) & mask) {
        const e = index[s]!;
        if (e === 0) break;
        if (compareAt(hv, (e - 1) * HASH_BYTES, q0, q1, q2, q3) !== 0) continue;
        const d = offs[e - 1]!;
        if (d === UNKNOWN_OFFSET_DELTA) known = false;
        else (out[i] ??= []).push(base + d);
      }
    }
    return known;
  }

  /** Exact membership of the hash with big-endian words q0..q3. */
  has(q0: number, q1: number, q2: number, q3: number): boolean {
    const blocks = this.blocks;
    for (const block of blocks) {
      if (sortedContains(block.view, BLOCK_HASHES, q0, q1, q2, q3)) return true;
    }
    return this.hotView !== null && this.hotHas(q0, q1, q2, q3);
  }

  /**
   * Exact membership restricted to the units (sealed blocks, hot buffer)
   * whose offset span meets [lo, hi]. Any hash held at an offset in [lo, hi]
   * is found: the unit holding that offset meets the range. Blocks are in
   * offset order, so the first candidate is found by binary search.
   */
  hasInRange(q0: number, q1: number, q2: number, q3: number, lo: number, hi: number, slots?: SlotFilter, item = 0): boolean {
    // The slot filter as in collectManyInRange: units whose slot the item's mask lacks cannot hold it.
    const mask = slots === undefined ? -1 : slots.masks[item]!;
    const blocks = this.blocks;
    for (let i = this.firstBlockReaching(lo); i < blocks.length; i++) {
      const blk = blocks[i]!;
      if (blk.minOffset > hi) return false;
      if ((mask & slotBit(slots, blk.seq)) === 0) continue;
      if (sortedContains(blk.view, BLOCK_HASHES, q0, q1, q2, q3)) return true;
    }
    return (
      this.hotView !== null &&
      this.hotCount > 0 &&
      this.hotMinOffset <= hi &&
      this.hotMaxOffset >= lo &&
      (mask & slotBit(slots, this.sealed)) !== 0 &&
      this.hotHas(q0, q1, q2, q3)
    );
  }

  /**
   * Every offset at which the units (sealed blocks, hot buffer) meeting
   * [lo, hi] hold query `order[k]` (k < n; the hash of item i is at byte
   * i * 16 of `q`, and `order` lists items in ascending hash order), pushed
   * to out[i] (created on first use; unordered; an occurrence outside
   * [lo, hi] inside such a unit is pushed too: extra true occurrences are
   * harmless). Returns false when an occurrence's offset is not
   * representable (UNKNOWN_OFFSET_DELTA): the caller then cannot name every
   * occurrence and must not hint.
   *
   * Completeness is hasInRange's argument: the unit holding an offset in
   * [lo, hi] meets the range, and within a sorted block equal records are
   * adjacent, so the first one at or above the query starts them all.
   *
   * Why many queries at once: a bloom generation can span dozens of sealed
   * blocks, and a replay's hits all name it; one query at a time, each block
   * cost a few cache misses per query (~11 us per hit over 53 blocks,
   * measured). Queries in ascending order walk each block once, forwards,
   * each starting where the previous one stopped.
   */
  collectManyInRange(
    q: DataView,
    order: Int32Array,
    n: number,
    lo: number,
    hi: number,
    out: (number[] | undefined)[],
    slots?: SlotFilter,
  ): boolean {
    const blocks = this.blocks;
    // With a slot filter (the bloom generation's answer per item), a unit is
    // searched only for the queries whose mask names its slot: a hash in
    // block b was added to slot (b - firstBlock) >> slotShift, and every
    // sub-filter is free of false negatives (bloomFront.ts), so a query whose
    // mask lacks that slot is not in the unit. A unit whose slot no query
    // names is skipped whole.
    let any = -1;
    const masks = slots === undefined ? null : slots.masks;
    if (masks !== null) {
      any = 0;
      for (let k = 0; k < n; k++) any |= masks[order[k]!]!;
    }
    let known = true;
    for (let b = this.firstBlockReaching(lo); b < blocks.length; b++) {
      const blk = blocks[b]!;
      if (blk.minOffset > hi) break;
      const bit = slotBit(slots, blk.seq);
      if ((any & bit) === 0) continue;
      if (!collectSortedMany(blk.view, BLOCK_HASHES, blk.offsets, blk.minOffset, q, order, n, out, masks, bit)) known = false;
    }
    const hv = this.hotView;
    if (hv !== null && this.hotCount > 0 && this.hotMinOffset <= hi && this.hotMaxOffset >= lo) {
      const bit = slotBit(slots, this.sealed);
      if ((any & bit) === 0) return known;
      if (!this.collectHot(q, order, n, out, masks, bit)) known = false;
    }
    return known;
  }

  /** Index of the first sealed block whose span reaches offset `lo` (blocks are in offset order): binary search. */
  private firstBlockReaching(lo: number): number {
    const blocks = this.blocks;
    let a = 0;
    let b = blocks.length;
    while (a < b) {
      const m = (a + b) >>> 1;
      if (blocks[m]!.maxOffset < lo) a = m + 1;
      else b = m;
    }
    return a;
  }

  /**
   * Drops whole front blocks whose every hash was committed before cutoffMs
   * (and then the hot buffer, under the same rule, once no block is left).
   * Returns the highest offset dropped, or undefined when nothing dropped.
   *
   * Soundness: ring order is time order, and a unit is dropped only when its
   * maxCreatedMs is before the cutoff, so every hash committed at or after the
   * cutoff sits in a retained unit: the resident set stays a superset of the
   * hashes committed since the cutoff. We stop at the first retained block
   * rather than skipping it, so the dropped units are always a prefix of the
   * ring, i.e. all offsets up to the returned one.
   */
  expire(cutoffMs: number): number | undefined {
    let dropped: number | undefined;
    while (this.blocks.length > 0 && this.blocks[0]!.maxCreatedMs < cutoffMs) {
      dropped = this.blocks.shift()!.maxOffset;
    }
    if (this.blocks.length === 0 && this.hot !== null && this.hotCount > 0 && this.hotMaxCreatedMs < cutoffMs) {
      dropped = this.hotMaxOffset;
      this.dropHot();
    }
    return dropped;
  }

  get blockCount(): number {
    return this.blocks.length;
  }
  get hotHashes(): number {
    return this.hotCount;
  }
  /**
   * The hot buffer's block number (the seals so far): the next appended hash
   * lands as record hotHashes of this block, and a block's number never
   * changes. An expiry that drops a part-filled hot buffer keeps the number
   * for the next one (nothing of the dropped one is left to confuse it with).
   */
  get hotBlock(): number {
    return this.sealed;
  }
  get hashCount(): number {
    return this.blocks.length * BLOCK_HASHES + this.hotCount;
  }
  /** Accounted bytes: every byte of every Buffer and offset array held, plus a coarse per-block overhead. */
  get bytes(): number {
    return (
      this.blocks.length * (BLOCK_BYTES + BLOCK_OFFSET_BYTES + BLOCK_OVERHEAD_BYTES) +
      (this.hot === null ? 0 : this.hot.length + this.hotOffsets!.byteLength + (this.hot.length / HASH_BYTES) * 4)
    );
  }

  /** Read-only views for tests and assertions. */
  sealedBlocks(): readonly SealedBlock[] {
    return this.blocks;
  }
  *buffers(): IterableIterator<Buffer> {
    for (const b of this.blocks) yield b.hashes;
    if (this.hot !== null) yield this.hot;
  }
  hotInfo(): { count: number; capacity: number; minOffset: number; maxOffset: number; maxCreatedMs: number } | undefined {
    if (this.hot === null || this.hotCount === 0) return undefined;
    return {
      count: this.hotCount,
      capacity: this.hot.length / HASH_BYTES,
      minOffset: this.hotMinOffset,
      maxOffset: this.hotMaxOffset,
      maxCreatedMs: this.hotMaxCreatedMs,
    };
  }
}

/**
 * The slot bit of block number `seq` under the filter; -1 (every slot) without
 * one, or for a block outside the generation's slots (not expected: the
 * caller passes the generation's offset range, which only its own blocks
 * meet; searching all queries there is merely slower, never wrong).
 */
function slotBit(slots: SlotFilter | undefined, seq: number): number {
  if (slots === undefined) return -1;
  const s = (seq - slots.firstBlock) >> slots.slotShift;
  return s >= 0 && s < 31 ? 1 << s : -1;
}

/**
 * Every offset at which the first `count` records of a sorted run hold each
 * query, pushed to out[i]; false when one is not representable. Queries come
 * in ascending hash order (see collectManyInRange): a query's first equal
 * record is the lower bound from where the previous query's search ended
 * (equal queries find the same records: the start does not pass them), and
 * its occurrences follow it.
 */
function collectSortedMany(
  view: DataView,
  count: number,
  offsets: Uint32Array,
  minOffset: number,
  q: DataView,
  order: Int32Array,
  n: number,
  out: (number[] | undefined)[],
  masks: Int32Array | null,
  bit: number,
): boolean {
  let known = true;
  let from = 0;
  for (let k = 0; k < n && from < count; k++) {
    const i = order[k]!;
    if (masks !== null && (masks[i]! & bit) === 0) continue;
    const qo = i * HASH_BYTES;
    const q0 = q.getUint32(qo);
    const q1 = q.getUint32(qo + 4);
    const q2 = q.getUint32(qo + 8);
    const q3 = q.getUint32(qo + 12);
    from = lowerBound(view, from, count, q0, q1, q2, q3);
    for (let j = from; j < count && compareAt(view, j * HASH_BYTES, q0, q1, q2, q3) === 0; j++) {
      const d = offsets[j]!;
      if (d === UNKNOWN_OFFSET_DELTA) known = false;
      else (out[i] ??= []).push(minOffset + d);
    }
  }
  return known;
}
