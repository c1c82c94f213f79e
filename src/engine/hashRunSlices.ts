import { HASH_BYTES } from '../util/txnHash.js';

/**
 * The slices of one hash run (sql/000093), built in the broker: the same
 * rows log_compact_v1 writes (sql/functions/compaction.sql), from the same
 * (hash, offset) pairs.
 *
 * What a reader relies on, and this keeps: every pair given goes into the
 * slice whose bucket is queen.log_hash_bucket(hash, bits), the hash's
 * leading `bits` bits, for the `bits` the run's row records; a slice holds
 * its pairs' hashes concatenated and their offsets aligned, in ascending
 * offset. Nothing is dropped, so the run holds every hash it was built
 * from; the bucket is the one key a probe or lookup computes, so each hash
 * is found in the one slice it reads. A pair's creation time moves with it,
 * and a slice has times only if every pair in it has one: a lookup trusts
 * a slice's time as its row's created_at (sql/functions/lookup.sql).
 */

export interface Slice {
  bucket: number;
  /** 16-byte hashes, concatenated, in ascending offset. */
  hashes: Buffer;
  /** Their offsets, aligned. */
  offs: number[];
  /**
   * Their rows' created_at in microseconds since the Unix epoch, aligned
   * (sql/000094); null when some pair of the slice has none.
   */
  createdUs: number[] | null;
}

/** Pairs a run is built from: hashes concatenated, offsets and creation times aligned (null: none known). */
export interface HashPairs {
  hashes: Buffer;
  offs: readonly number[];
  createdUs: readonly number[] | null;
}

/** Pairs a slice aims at (one heap tuple of ~1 kB with its times), as log_compact_v1: bits = ceil(log2(n / 32)), in 0..24. */
const PAIRS_PER_SLICE = 32;
const MAX_BITS = 24;

/** The bucket width of a run of n pairs (any value is exact; this one keeps slices near PAIRS_PER_SLICE). */
export function runBits(n: number): number {
  return Math.min(MAX_BITS, Math.max(0, Math.ceil(Math.log2(Math.max(n, 1) / PAIRS_PER_SLICE))));
}

/** The size tier of a new run of n pairs: floor(log_fanout(n / minTail)), at least 0 (policy only: which runs merge together). */
export function runLevel(n: number, minTail: number, fanout: number): number {
  return Math.max(0, Math.floor(Math.log(Math.max(n, 1) / minTail) / Math.log(fanout) + 1e-9));
}

/** queen.log_hash_bucket(h, bits): the hash's first 32 bits, big-endian, shifted down to `bits` bits. */
export function bucketOf(hashes: Buffer, at: number, bits: number): number {
  return bits === 0 ? 0 : hashes.readUInt32BE(at) >>> (32 - bits);
}

/**
 * The slices of a run of `bits` over the pairs of `parts`, by ascending
 * bucket. A counting sort by bucket keeps each part's order; a bucket that
 * then is not in ascending offset (pairs from several parts, as a merge
 * has) is sorted. The pairs are first gathered into one word array and the
 * slices' hashes are views of one buffer: a pair's 16 bytes move as four
 * words, with no call and no allocation per pair (this runs on the
 * broker's main thread, once for every hash built and merged).
 */
export function buildSlices(parts: readonly HashPairs[], bits: number): Slice[] {
  let n = 0;
  for (const p of parts) {
    if (p.hashes.length !== p.offs.length * HASH_BYTES) throw new RangeError('buildSlices: hashes and offsets differ in length');
    if (p.createdUs !== null && p.createdUs.length !== p.offs.length) {
      throw new RangeError('buildSlices: offsets and creation times differ in length');
    }
    n += p.offs.length;
  }
  if (n === 0) return [];
  // Every pair, in input order: its hash as 4 words, its offset, its bucket.
  const inBytes = Buffer.allocUnsafeSlow(n * HASH_BYTES);
  const inWords = new Uint32Array(inBytes.buffer, inBytes.byteOffset, n * 4);
  const offs = new Float64Array(n);
  // NaN: no time known for the pair.
  const created = new Float64Array(n);
  const bucket = new Uint32Array(n);
  const buckets = 2 ** bits;
  const counts = new Uint32Array(buckets + 1);
  let i = 0;
  for (const p of parts) {
    p.hashes.copy(inBytes, i * HASH_BYTES);
    for (let j = 0; j < p.offs.length; j++, i++) {
      offs[i] = p.offs[j]!;
      created[i] = p.createdUs === null ? NaN : p.createdUs[j]!;
      const b = bucketOf(inBytes, i * HASH_BYTES, bits);
      bucket[i] = b;
      counts[b + 1]!++;
    }
  }
  for (let b = 0; b < buckets; b++) counts[b + 1]! += counts[b]!;
  // Stable placement: pair k goes to position next[bucket]++.
  const next = counts.slice(0, buckets);
  const order = new Uint32Array(n);
  for (let k = 0; k < n; k++) order[next[bucket[k]!]!++] = k;
  const outBytes = Buffer.allocUnsafeSlow(n * HASH_BYTES);
  const outWords = new Uint32Array(outBytes.buffer, outBytes.byteOffset, n * 4);
  const out: Slice[] = [];
  for (let b = 0; b < buckets; b++) {
    const from = counts[b]!;
    const to = counts[b + 1]!;
    if (from === to) continue;
    const ks = order.subarray(from, to);
    for (let x = 1; x < ks.length; x++) {
      if (offs[ks[x - 1]!]! > offs[ks[x]!]!) {
        ks.set(Array.from(ks).sort((a, c) => offs[a]! - offs[c]!));
        break;
      }
    }
    const sliceOffs = new Array<number>(ks.length);
    let sliceCreated: number[] | null = new Array<number>(ks.length);
    for (let x = 0; x < ks.length; x++) {
      const k = ks[x]!;
      const to4 = (from + x) * 4;
      const from4 = k * 4;
      outWords[to4] = inWords[from4]!;
      outWords[to4 + 1] = inWords[from4 + 1]!;
      outWords[to4 + 2] = inWords[from4 + 2]!;
      outWords[to4 + 3] = inWords[from4 + 3]!;
      sliceOffs[x] = offs[k]!;
      if (sliceCreated !== null) {
        const at = created[k]!;
        if (Number.isNaN(at)) sliceCreated = null;
        else sliceCreated[x] = at;
      }
    }
    out.push({ bucket: b, hashes: outBytes.subarray(from * HASH_BYTES, to * HASH_BYTES), offs: sliceOffs, createdUs: sliceCreated });
  }
  return out;
}
