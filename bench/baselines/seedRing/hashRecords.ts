import { BLOCK_HASHES, HASH_BYTES } from './constants.js';

/**
 * Primitives over buffers of packed 16-byte hashes ("records"): reading a
 * hash as four big-endian 32-bit words, exact membership (binary search in a
 * sorted run) and the in-place sort that seals a block.
 *
 * Order is the bytewise (memcmp) order of the 16 bytes, which equals the
 * lexicographic order of the four big-endian words. Every comparison here is
 * a full 16-byte comparison: membership is exact, never a prefix match.
 *
 * Reads go through DataView.getUint32 (big-endian by default), which V8
 * compiles to a single load; Buffer.readUInt32BE is several times slower.
 */

/** A DataView over exactly the bytes of `buf`. */
export function viewOf(buf: Buffer): DataView {
  return new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** The four big-endian words of the hash at byte offset `at` (module scratch, overwritten by the next call). */
export const words = new Uint32Array(4);
export function readWords(view: DataView, at: number): Uint32Array {
  words[0] = view.getUint32(at);
  words[1] = view.getUint32(at + 4);
  words[2] = view.getUint32(at + 8);
  words[3] = view.getUint32(at + 12);
  return words;
}

/** Exact membership in the first `count` records of a sorted run. */
export function sortedContains(view: DataView, count: number, q0: number, q1: number, q2: number, q3: number): boolean {
  let lo = 0;
  let hi = count - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const o = mid * HASH_BYTES;
    let w = view.getUint32(o);
    if (w === q0) {
      w = view.getUint32(o + 4);
      if (w === q1) {
        w = view.getUint32(o + 8);
        if (w === q2) {
          w = view.getUint32(o + 12);
          if (w === q3) return true;
          if (w < q3) lo = mid + 1;
          else hi = mid - 1;
        } else if (w < q2) lo = mid + 1;
        else hi = mid - 1;
      } else if (w < q1) lo = mid + 1;
      else hi = mid - 1;
    } else if (w < q0) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

/** First gallop step of lowerBound, in records (about half the spread of a uniform guess in a 4096 block). */
const GALLOP_STEP = 16;

/**
 * Index of the first record at or above the query among records from ..
 * count-1 of a sorted run (count when there is none).
 *
 * Used for many queries in ascending order against one run, each starting
 * at the previous answer (collectSortedMany): the start is a guess from the
 * query's first word (the records are uniform xxh3-128 hashes), then a
 * gallop towards the answer, then bisection inside the bracket. So
 * consecutive queries touch nearby records, and one query costs a guess and
 * a few probes around it. The bracket [lo, hi] only shrinks and holds the
 * answer on any data (rec[lo - 1] < query or lo = from; rec[hi] >= query or
 * hi = count), so the answer is exact whatever the distribution; a bad
 * guess costs a gallop of O(log n) probes, never a scan.
 */
export function lowerBound(view: DataView, from: number, count: number, q0: number, q1: number, q2: number, q3: number): number {
  let lo = from;
  let hi = count;
  if (lo >= hi) return lo;
  let g = Math.floor((q0 / 4294967296) * count);
  if (g < lo) g = lo;
  else if (g >= hi) g = hi - 1;
  if (compareAt(view, g * HASH_BYTES, q0, q1, q2, q3) < 0) {
    lo = g + 1;
    for (let step = GALLOP_STEP; lo + step < hi; step *= 2) {
      const p = lo + step;
      if (compareAt(view, p * HASH_BYTES, q0, q1, q2, q3) < 0) lo = p + 1;
      else {
        hi = p;
        break;
      }
    }
  } else {
    hi = g;
    for (let step = GALLOP_STEP; hi - step > lo; step *= 2) {
      const p = hi - step;
      if (compareAt(view, p * HASH_BYTES, q0, q1, q2, q3) >= 0) hi = p;
      else {
        lo = p + 1;
        break;
      }
    }
  }
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareAt(view, mid * HASH_BYTES, q0, q1, q2, q3) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Sign of (record at byte `o`) - (query), bytewise. */
export function compareAt(view: DataView, o: number, q0: number, q1: number, q2: number, q3: number): number {
  let w = view.getUint32(o);
  if (w !== q0) return w < q0 ? -1 : 1;
  w = view.getUint32(o + 4);
  if (w !== q1) return w < q1 ? -1 : 1;
  w = view.getUint32(o + 8);
  if (w !== q2) return w < q2 ? -1 : 1;
  w = view.getUint32(o + 12);
  if (w !== q3) return w < q3 ? -1 : 1;
  return 0;
}

/** Items per sort key: sortItemsByHash packs an item's position under this (2^21, so first word x 2^21 + position < 2^53). */
const ITEM_KEY_SPAN = 2097152;

/** sortItemsByHash's scratch (single-threaded, synchronous): grown by doubling, never shrunk. */
let itemKeys = new Float64Array(256);
let itemOrder = new Int32Array(256);

/**
 * The item indexes `items` (hash of item i at byte i * 16 of `view`) in
 * ascending bytewise hash order, ties (equal hashes) in their given order,
 * as the first items.length entries of the returned array. The array is
 * scratch, reused by the next call: use it before calling again.
 *
 * Why not Int32Array#sort with a comparator: V8 calls the comparator per
 * compare (~0.3 us per item for a replayed segment of 200). Here each item
 * becomes one double, first word x 2^21 + its position, and a native numeric
 * sort orders them; items whose first words are equal (rare with uniform
 * hashes, crafted ids included) are then put in full order by insertion.
 * Why scratch: a typed array per call, on the path of every segment with a
 * bloom "maybe", showed up as young-generation garbage.
 */
export function sortItemsByHash(view: DataView, items: readonly number[]): Int32Array {
  const n = items.length;
  if (n >= ITEM_KEY_SPAN) {
    return Int32Array.from(items).sort((x, y) => compareAcross(view, x * HASH_BYTES, view, y * HASH_BYTES) || x - y);
  }
  if (n > itemOrder.length) {
    let size = itemOrder.length;
    while (size < n) size *= 2;
    itemKeys = new Float64Array(size);
    itemOrder = new Int32Array(size);
  }
  const order = itemOrder;
  if (n === 1) {
    order[0] = items[0]!;
    return order;
  }
  const keys = itemKeys.subarray(0, n);
  for (let k = 0; k < n; k++) keys[k] = view.getUint32(items[k]! * HASH_BYTES) * ITEM_KEY_SPAN + k;
  keys.sort();
  for (let k = 0; k < n; k++) order[k] = items[keys[k]! % ITEM_KEY_SPAN]!;
  // Runs of equal first words: insertion sort by the whole hash (stable).
  for (let k = 1; k < n; k++) {
    if (Math.floor(keys[k]! / ITEM_KEY_SPAN) !== Math.floor(keys[k - 1]! / ITEM_KEY_SPAN)) continue;
    const x = order[k]!;
    let j = k - 1;
    while (
      j >= 0 &&
      Math.floor(keys[j]! / ITEM_KEY_SPAN) === Math.floor(keys[k]! / ITEM_KEY_SPAN) &&
      compareAcross(view, order[j]! * HASH_BYTES, view, x * HASH_BYTES) > 0
    ) {
      order[j + 1] = order[j]!;
      j--;
    }
    order[j + 1] = x;
  }
  return order;
}

/** Sign of (record at byte `ao` of a) - (record at byte `bo` of b), bytewise. */
export function compareAcross(a: DataView, ao: number, b: DataView, bo: number): number {
  for (let w = 0; w < HASH_BYTES; w += 4) {
    const x = a.getUint32(ao + w);
    const y = b.getUint32(bo + w);
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

/** Full 16-byte comparison of records i and j of one buffer. */
function compareRecords(buf: Buffer, i: number, j: number): number {
  return buf.compare(buf, j * HASH_BYTES, j * HASH_BYTES + HASH_BYTES, i * HASH_BYTES, i * HASH_BYTES + HASH_BYTES);
}

// Scratch for sortRecordsInPlace, sized for one block and reused by every
// sort: sorting allocates nothing (the process is single-threaded and the
// sort is synchronous, so one set of scratch arrays suffices).
const SORT_MAX_BUCKET_BITS = 12; // 2^12 = BLOCK_HASHES: about one record per bucket in a full block
const sortKeys = new Uint32Array(BLOCK_HASHES);
const sortPerm = new Uint16Array(BLOCK_HASHES);
const sortStarts = new Uint32Array((1 << SORT_MAX_BUCKET_BITS) + 1);
const sortBuf = Buffer.allocUnsafeSlow(BLOCK_HASHES * HASH_BYTES);
const sortWords = new Uint32Array(sortBuf.buffer, sortBuf.byteOffset, sortBuf.byteLength / 4);
const sortOffsets = new Uint32Array(BLOCK_HASHES);
/** A bucket larger than this is sorted by comparison (O(k log k)) rather than by insertion. */
const SORT_INSERTION_MAX = 16;

/**
 * Sorts the first `count` (<= BLOCK_HASHES) records of `buf` in place, and
 * applies the same permutation to `offsets` when given (record i's offset
 * travels with it, so after the seal offsets[j] still belongs to record j).
 * Equal records keep their index order (the sort is stable).
 *
 * How: one bucket pass on the top bits of each record's first big-endian
 * word (about one bucket per record: the hashes are uniform), the record
 * indices scattered into their buckets in index order, then each bucket of
 * two or more ordered by (first word, whole record, index): insertion for a
 * small bucket, a comparison sort for a large one, so records crafted to
 * share their top bits cost O(k log k), not O(k^2). Then the records are
 * gathered in that order through a block-sized scratch and copied back, as
 * 32-bit words when `buf` is 4-byte aligned (every buffer the ring
 * allocates is). So a seal is still a no-copy hand-off of the same Buffer.
 *
 * Measured (scratch micro-benchmark, random records): see
 * docs/deduplication.md ("What deduplication costs the broker's main
 * thread"); the four-pass LSD radix sort this replaced took 24.5 ns per
 * record for a block and 29 ns for a 256-record tail.
 */
export function sortRecordsInPlace(buf: Buffer, count: number, offsets?: Uint32Array): void {
  if (count > BLOCK_HASHES) throw new RangeError(`sortRecordsInPlace: ${count} records exceed one block`);
  if (count < 2) return;
  const view = viewOf(buf);
  const keys = sortKeys;
  const perm = sortPerm;
  const starts = sortStarts;
  let bits = 1;
  while (bits < SORT_MAX_BUCKET_BITS && 1 << bits < count) bits++;
  const shift = 32 - bits;
  const buckets = 1 << bits;
  starts.fill(0, 0, buckets + 1);
  for (let i = 0; i < count; i++) {
    const key = view.getUint32(i * HASH_BYTES);
    keys[i] = key;
    starts[(key >>> shift) + 1]!++;
  }
  for (let d = 1; d <= buckets; d++) starts[d]! += starts[d - 1]!;
  // Scatter in index order (stable); starts[d] then ends where bucket d+1 began.
  for (let i = 0; i < count; i++) perm[starts[keys[i]! >>> shift]!++] = i;

  // Order each bucket by (first word, whole record, index).
  let begin = 0;
  for (let d = 0; d < buckets; d++) {
    const end = starts[d]!;
    if (end - begin > SORT_INSERTION_MAX) {
      perm
        .subarray(begin, end)
        .sort((x, y) => (keys[x]! !== keys[y]! ? (keys[x]! < keys[y]! ? -1 : 1) : compareRecords(buf, x, y) || x - y));
    } else {
      for (let a = begin + 1; a < end; a++) {
        const v = perm[a]!;
        const kv = keys[v]!;
        let b = a - 1;
        while (b >= begin) {
          const u = perm[b]!;
          const ku = keys[u]!;
          if (ku < kv || (ku === kv && compareRecords(buf, u, v) <= 0)) break;
          perm[b + 1] = u;
          b--;
        }
        perm[b + 1] = v;
      }
    }
    begin = end;
  }

  // The offsets follow the records: new[j] = old[perm[j]].
  if (offsets !== undefined) {
    for (let j = 0; j < count; j++) sortOffsets[j] = offsets[perm[j]!]!;
    offsets.set(sortOffsets.subarray(0, count));
  }
  if (buf.byteOffset % 4 === 0) {
    const words = new Uint32Array(buf.buffer, buf.byteOffset, count * (HASH_BYTES / 4));
    for (let j = 0; j < count; j++) {
      const from = perm[j]! * 4;
      const to = j * 4;
      sortWords[to] = words[from]!;
      sortWords[to + 1] = words[from + 1]!;
      sortWords[to + 2] = words[from + 2]!;
      sortWords[to + 3] = words[from + 3]!;
    }
    words.set(sortWords.subarray(0, count * (HASH_BYTES / 4)));
  } else {
    for (let j = 0; j < count; j++) buf.copy(sortBuf, j * HASH_BYTES, perm[j]! * HASH_BYTES, perm[j]! * HASH_BYTES + HASH_BYTES);
    sortBuf.copy(buf, 0, 0, count * HASH_BYTES);
  }
}

/** True when the first `count` records are in non-decreasing order (tests, assertions). */
export function isSorted(buf: Buffer, count: number): boolean {
  for (let i = 1; i < count; i++) if (compareRecords(buf, i - 1, i) > 0) return false;
  return true;
}
