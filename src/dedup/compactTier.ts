// One file (~550 lines), on purpose: the compact tier is one data structure
// (28-bit slots in cuckoo buckets, in generations) whose promise (every live
// occurrence named, false candidates bounded) depends on the bit layout,
// placement, displacement, stash and generation rules together;
// invariantViolation() and falseCandidateModel() check them in one place.
// Argued below and in docs/dedup-compact-tier.md.

/**
 * One partition's in-window hash occurrences in ~3.7 bytes each: for every
 * occurrence, a keyed fingerprint of its hash and its offset as a delta,
 * together 28 bits, in cuckoo buckets, in generations that each cover a
 * contiguous range of offsets. A superset index, never an authority.
 *
 * What a lookup promises: it names every live occurrence of the queried hash
 * (no false negatives), plus, for each live generation, each stored entry in
 * the query's two buckets whose fingerprint happens to equal the query's
 * (a false candidate). The names are exact offsets (spanBits 0, what
 * log_push_v11's positional check takes) or, with spanBits s > 0, the first
 * offset of a span of 2^s offsets that holds the occurrence. SQL's
 * positional 16-byte compare refutes every false candidate; see
 * docs/dedup-compact-tier.md for what a false candidate costs there and the
 * SQL change that makes it cheap.
 *
 * Why that is all 3.7 bytes can say: naming an exact offset among a window
 * of W offsets takes log2(W) bits, and a false-candidate rate f takes about
 * log2(1/f) more, so bits per hash >= log2(W) + log2(1/f) whatever the
 * layout. Here a generation of capacity C spends ceil(log2 C) + 1 bits (at
 * most deltaBits, 16 by default) on the delta and the rest of the 28 on the
 * fingerprint; a lookup compares 8 slots per live generation, so f is about
 * 8 x load / 2^(28 - delta bits) per generation, and about 15 x W / 2^28 in
 * all once generations are full-size.
 *
 * Layout. A slot is 28 bits, v = fp << db | delta (db the generation's
 * delta bits, fp in 1..2^(28 - db) - 1; v = 0 marks a free slot). A bucket
 * is 4 slots in 7 16-bit words (14 bytes): the slots' low 16 bits in words
 * 0..3, their high 12 bits packed in words 4..6. A page is a Uint16Array of
 * at most 4 681 buckets (64 KiB, the largest allocation); a generation is
 * 2^pageBits pages, allocated once when it opens, never resized, rehashed
 * or rebuilt.
 *
 * Placement is keyed, as in the occurrence table: the page and the first
 * bucket come from m1 = mix(first 8 bytes, secret), the fingerprint from
 * m2 = mix(last 8 bytes, another secret) folded with m1, and the second
 * bucket is (tag(fp) - b1) mod nb, which is its own inverse, so an entry
 * can move between its two buckets knowing only its fingerprint
 * (partial-key cuckoo hashing). Client-chosen ids cannot aim at a bucket or a fingerprint
 * without the secret words; only equal hashes share both, and a lookup must
 * name all of those anyway.
 *
 * Insertion: a free slot of b1 or b2, else up to MAX_KICKS displacements
 * (a random slot of the bucket is swapped out and moved to its other
 * bucket); an entry still homeless goes to the generation's stash (at most
 * STASH_MAX), which every lookup of the generation reads. A full stash, a
 * full generation or an offset beyond the delta's range seals the
 * generation; the next append opens a new one starting at its offset.
 *
 * Invariants (what makes a lookup complete):
 * - I1: every entry ever appended to a live generation sits in one of its
 *   two buckets (of its page, by its fingerprint) or in that generation's
 *   stash: a placement or a displacement only ever writes an entry into
 *   one of its own two buckets, and the one entry a failed walk leaves
 *   homeless goes to the stash with one of its buckets.
 * - I2: an entry's fingerprint and (lo + delta << spanBits) are those of
 *   the occurrence it was appended for: displacement copies whole slots.
 * - I3: generations are in offset order and disjoint: appends come in
 *   increasing offset order and a new generation starts at the offset that
 *   opened it.
 * - I4: a generation is dropped only when the floor is at or above its last
 *   offset (all its entries are dead); an entry of a live generation is
 *   skipped only when its offset (its span's last offset) is at or below the
 *   floor.
 * So a lookup that reads both buckets and the stash of every live
 * generation, and compares fingerprints, names every live occurrence.
 *
 * States: empty -> (append) open generation filling -> sealed (full, stash
 * full or out of delta range) -> a new generation opens on the next append
 * -> (raiseFloor past its last offset) dropped. Only the newest generation
 * is ever open; older ones are read-only.
 */

import { randomFillSync } from 'node:crypto';
import { mix } from './occurrenceTable.js';

/** Bits per slot: fingerprint + delta. */
export const COMPACT_SLOT_BITS = 28;
const SLOTS = 4;
const WORDS_PER_BUCKET = 7;
export const COMPACT_BUCKET_BYTES = WORDS_PER_BUCKET * 2;
/** 64 KiB of buckets: the largest allocation the tier makes. */
export const COMPACT_MAX_PAGE_BUCKETS = Math.floor(65536 / COMPACT_BUCKET_BYTES);
/** A generation is sized for its entries at this load (4-slot cuckoo buckets fill to ~95 % before walks start failing). */
export const COMPACT_TARGET_LOAD = 0.95;
/** Displacements before an entry goes to the stash. */
const MAX_KICKS = 500;
/** Homeless entries a generation keeps; when full, the generation seals. */
export const STASH_MAX = 8;
/** Most delta bits a generation uses by default: it spans at most 2^16 offsets, and its fingerprint has at least 12 bits. */
export const DEFAULT_DELTA_BITS = 16;
/** Fewest delta bits a generation uses (at most 2^20 fingerprint values). */
const MIN_DELTA_BITS = 8;
/** Smallest and largest generation (entries). */
const MIN_GEN_ENTRIES = 256;
const MAX_GEN_ENTRIES = 1 << 20;
/**
 * A generation opened by live appends is sized for 1/GEN_FRACTION of the
 * live entries: the newest generation's unfilled part and the oldest one's
 * dead part each average half a generation, so they add ~1/GEN_FRACTION to
 * the bytes per live hash, and a lookup reads ~GEN_FRACTION generations.
 */
export const GEN_FRACTION = 16;
/** Accounted overhead of a page (typed array object) and of a generation. */
export const COMPACT_PAGE_OVERHEAD_BYTES = 96;
export const COMPACT_GEN_OVERHEAD_BYTES = 160;

interface Gen {
  /** Offset of delta 0. */
  readonly lo: number;
  /** Delta bits of its slots (the fingerprint has the other 28 - db): just enough for its capacity. */
  readonly db: number;
  /** Fingerprint values 1..fpValues. */
  readonly fpValues: number;
  /** Offsets it can cover: 2^(db + spanBits). */
  readonly span: number;
  /** Highest offset appended (lo - 1 while empty). */
  last: number;
  /** Entries it takes before it seals. */
  readonly capacity: number;
  /** Entries appended (in slots and stash; dead ones included). */
  count: number;
  readonly pageBits: number;
  /** Buckets per page. */
  readonly nb: number;
  readonly pages: Uint16Array[];
  /** Homeless entries: (page, one of its two buckets, slot value) triples. */
  readonly stash: number[];
  sealed: boolean;
}

export interface CompactTierOptions {
  /** Placement and fingerprint secrets (tests: a reproducible layout); fresh random words by default. */
  secret?: readonly [number, number, number, number, number];
  /** Offsets are named as spans of 2^spanBits (0: exact offsets, what log_push_v11 takes). */
  spanBits?: number;
  /** Most bits of the (scaled) offset delta (a generation uses just enough for its capacity; the fingerprint gets 28 minus these). */
  deltaBits?: number;
  /** Tests: fingerprints take only values 1..fingerprintValues (forced collisions). */
  fingerprintValues?: number;
  /** Tests: the largest generation (entries), to reach many generations with few entries. */
  maxGenEntries?: number;
}

/** murmur3's 32-bit finaliser: the bucket tag of a fingerprint under a secret word. */
function fmix(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** Slot j of the bucket whose words start at `at`: low 16 bits in word j, high 12 bits packed in words 4..6. */
function slotGet(w: Uint16Array, at: number, j: number): number {
  let hi: number;
  if (j === 0) hi = w[at + 4]! & 0xfff;
  else if (j === 1) hi = (w[at + 4]! >>> 12) | ((w[at + 5]! & 0xff) << 4);
  else if (j === 2) hi = (w[at + 5]! >>> 8) | ((w[at + 6]! & 0xf) << 8);
  else hi = w[at + 6]! >>> 4;
  return w[at + j]! | (hi << 16);
}

function slotSet(w: Uint16Array, at: number, j: number, v: number): void {
  w[at + j] = v & 0xffff;
  const hi = v >>> 16;
  if (j === 0) w[at + 4] = (w[at + 4]! & 0xf000) | hi;
  else if (j === 1) {
    w[at + 4] = (w[at + 4]! & 0x0fff) | ((hi & 0xf) << 12);
    w[at + 5] = (w[at + 5]! & 0xff00) | (hi >>> 4);
  } else if (j === 2) {
    w[at + 5] = (w[at + 5]! & 0x00ff) | ((hi & 0xff) << 8);
    w[at + 6] = (w[at + 6]! & 0xfff0) | (hi >>> 8);
  } else w[at + 6] = (w[at + 6]! & 0x000f) | (hi << 4);
}

/** Puts v in the first free slot of bucket b; false if it has none. */
function tryPut(w: Uint16Array, b: number, v: number): boolean {
  const at = b * WORDS_PER_BUCKET;
  for (let j = 0; j < SLOTS; j++) {
    if (slotGet(w, at, j) === 0) {
      slotSet(w, at, j, v);
      return true;
    }
  }
  return false;
}

/**
 * The other bucket of an entry in bucket b whose fingerprint's tag is t
 * (mod nb): (t - b) mod nb, its own inverse, so either bucket leads to the
 * other knowing only the fingerprint.
 */
const otherBucket = (b: number, t: number, nb: number): number => (t - b < 0 ? t - b + nb : t - b);

/**
 * Counts (and pushes to out) the slots of the bucket at `at` holding
 * fingerprint fp whose span ends above the floor: the high 12 bits of the
 * four slots are unpacked from words 4..6 at once, then each slot is
 * compared.
 */
function matchBucket(
  w: Uint16Array,
  at: number,
  fp: number,
  db: number,
  lo: number,
  unit: number,
  floor: number,
  out: number[] | undefined,
): number {
  const w4 = w[at + 4]!;
  const w5 = w[at + 5]!;
  const w6 = w[at + 6]!;
  let n = 0;
  for (let j = 0; j < SLOTS; j++) {
    const hi = j === 0 ? w4 & 0xfff : j === 1 ? (w4 >>> 12) | ((w5 & 0xff) << 4) : j === 2 ? (w5 >>> 8) | ((w6 & 0xf) << 8) : w6 >>> 4;
    const v = w[at + j]! | (hi << 16);
    if (v >>> db !== fp) continue;
    const first = lo + (v & ((1 << db) - 1)) * unit;
    if (first + unit - 1 <= floor) continue;
    n++;
    out?.push(first);
  }
  return n;
}

/** Five fresh secret words (crypto-random: placement and fingerprints cannot be predicted from outside). */
function freshSecret(): [number, number, number, number, number] {
  const w = randomFillSync(new Uint32Array(5));
  return [w[0]!, w[1]!, w[2]!, w[3]!, w[4]!];
}

/** First bucket of placement word m1 in a page of nb buckets (m1's low 16 bits; pages use its top bits). */
const firstBucket = (m1: number, nb: number): number => ((m1 & 0xffff) * nb) >>> 16;

/**
 * States: empty (no live generation) -> open (the newest generation takes
 * appends) -> sealed (full, stash full, or the next offset past its span;
 * the next append opens a new generation) -> dropped (raiseFloor at or past
 * its last offset). Only the newest generation is ever open. Every
 * transition keeps I1-I4 (file header), which make every lookup complete.
 */
export class CompactTier {
  private readonly s0: number;
  private readonly s1: number;
  private readonly s2: number;
  private readonly s3: number;
  private readonly s4: number;
  readonly spanBits: number;
  readonly deltaBits: number;
  /** The test option narrowing fingerprints (Infinity: none). */
  private readonly fpCap: number;
  private readonly maxGen: number;
  /** Live generations are gens[head..]. */
  private gens: Gen[] = [];
  private head = 0;
  /** Entries at offsets <= floor are dead. */
  private floor = -Infinity;
  private lastOffset = -Infinity;
  /** Entries announced by expect() and not yet appended (a hydration sizes its generations with it). */
  private pending = 0;
  /** Entries in live generations (dead ones in the oldest included). */
  private stored = 0;
  private pageBytes = 0;
  private pageCount = 0;
  /** xorshift32 state for choosing displacement victims. */
  private rng: number;

  constructor(opts: CompactTierOptions = {}) {
    const [s0, s1, s2, s3, s4] = opts.secret ?? freshSecret();
    [this.s0, this.s1, this.s2, this.s3, this.s4] = [s0, s1, s2, s3, s4];
    this.rng = (this.s4 ^ 0x6d2b79f5) >>> 0 || 1;
    this.spanBits = opts.spanBits ?? 0;
    this.deltaBits = opts.deltaBits ?? DEFAULT_DELTA_BITS;
    if (!(this.deltaBits >= 8 && this.deltaBits <= 20) || !(this.spanBits >= 0 && this.spanBits <= 10))
      throw new RangeError('CompactTier: deltaBits must be in 8..20 and spanBits in 0..10');
    this.fpCap = opts.fingerprintValues ?? Infinity;
    if (!(this.fpCap >= 1)) throw new RangeError('CompactTier: fingerprintValues must be >= 1');
    this.maxGen = Math.max(1, Math.min(opts.maxGenEntries ?? MAX_GEN_ENTRIES, MAX_GEN_ENTRIES));
  }

  /** Entries held (in live generations; dead ones of the oldest included). */
  get size(): number {
    return this.stored;
  }
  get generations(): number {
    return this.gens.length - this.head;
  }
  get pages(): number {
    return this.pageCount;
  }
  /** Accounted bytes: every page's words plus per-page and per-generation overheads and stashes. */
  get bytes(): number {
    let stash = 0;
    for (let g = this.head; g < this.gens.length; g++) stash += this.gens[g]!.stash.length * 8;
    return this.pageBytes + this.pageCount * COMPACT_PAGE_OVERHEAD_BYTES + this.generations * COMPACT_GEN_OVERHEAD_BYTES + stash;
  }
  /** The offset of the latest append (-Infinity before any). */
  get last(): number {
    return this.lastOffset;
  }
  /** Candidate offsets a lookup names per occurrence: 1 (exact) or a span of 2^spanBits. */
  get spanLength(): number {
    return 2 ** this.spanBits;
  }

  /** A hydration is about to append n entries: the generations it opens are sized for them (fewer, fuller ones). */
  expect(n: number): void {
    this.pending = Math.max(0, Math.floor(n));
  }

  /**
   * Adds the occurrence of the hash whose four big-endian 32-bit words are
   * (k0, k1, k2, k3) at `offset`. Offsets must increase strictly from one
   * append to the next (the log's order); an offset at or below the floor is
   * dead already and is not stored.
   */
  append(k0: number, k1: number, k2: number, k3: number, offset: number): void {
    if (!(offset > this.lastOffset) || !Number.isSafeInteger(offset))
      throw new RangeError(`CompactTier: append at ${offset} after ${this.lastOffset} (offsets must increase)`);
    if (offset <= this.floor) {
      // Dead on arrival (a hydrated row straddling the floor): never named, so not stored.
      this.lastOffset = offset;
      if (this.pending > 0) this.pending--;
      return;
    }
    const m1 = mix(k0, k1, this.s0, this.s1);
    const fw = this.fingerprintWord(m1, k2, k3);
    let gen = this.gens.length > this.head ? this.gens[this.gens.length - 1]! : undefined;
    if (gen === undefined || gen.sealed || gen.count >= gen.capacity || offset - gen.lo >= gen.span) {
      if (gen !== undefined) gen.sealed = true;
      gen = this.openGen(offset);
    }
    const fp = 1 + (fw % gen.fpValues);
    const v = (fp << gen.db) | Math.floor((offset - gen.lo) / 2 ** this.spanBits);
    this.place(gen, m1, fp, v);
    gen.count++;
    gen.last = offset;
    this.lastOffset = offset;
    this.stored++;
    if (this.pending > 0) this.pending--;
  }

  /**
   * The fingerprint word: a keyed mix of the last 8 bytes folded with m1
   * (the first 8 bytes' placement word), so it depends on all 16 bytes and
   * on the secret; hashes sharing any chosen bytes still spread over
   * fingerprints. A generation's fingerprint is 1 + word mod its fpValues.
   */
  private fingerprintWord(m1: number, k2: number, k3: number): number {
    return fmix(mix(k2, k3, this.s2, this.s3) ^ Math.imul(m1, 0x9e3779b1));
  }

  /** Entries at or below `offset` are dead from now on (the floor only rises); generations wholly below it are dropped. */
  raiseFloor(offset: number): void {
    if (!(offset > this.floor)) return;
    this.floor = offset;
    while (this.head < this.gens.length && this.gens[this.head]!.last <= offset) this.drop(this.gens[this.head++]!);
    if (this.head > 32 && this.head * 2 > this.gens.length) {
      this.gens = this.gens.slice(this.head);
      this.head = 0;
    }
  }

  /** Whether a lookup of the hash names anything (a live occurrence, or a false candidate). */
  has(k0: number, k1: number, k2: number, k3: number): boolean {
    return this.scan(k0, k1, k2, k3, undefined) > 0;
  }

  /**
   * Appends to `out` the first offset of every candidate the lookup names
   * (generation order, then bucket order; a span of spanLength offsets each);
   * returns how many. Includes every live occurrence of the hash.
   */
  collect(k0: number, k1: number, k2: number, k3: number, out: number[]): number {
    return this.scan(k0, k1, k2, k3, out);
  }

  private scan(k0: number, k1: number, k2: number, k3: number, out: number[] | undefined): number {
    const m1 = mix(k0, k1, this.s0, this.s1);
    const fw = this.fingerprintWord(m1, k2, k3);
    const unit = 2 ** this.spanBits;
    const floor = this.floor;
    let n = 0;
    for (let g = this.head; g < this.gens.length; g++) {
      const gen = this.gens[g]!;
      const db = gen.db;
      const fp = 1 + (fw % gen.fpValues);
      const tag = fmix(fp ^ this.s4);
      const p = gen.pageBits === 0 ? 0 : m1 >>> (32 - gen.pageBits);
      const w = gen.pages[p]!;
      const nb = gen.nb;
      const b1 = firstBucket(m1, nb);
      const b2 = otherBucket(b1, tag % nb, nb);
      n += matchBucket(w, b1 * WORDS_PER_BUCKET, fp, db, gen.lo, unit, floor, out);
      if (b2 !== b1) n += matchBucket(w, b2 * WORDS_PER_BUCKET, fp, db, gen.lo, unit, floor, out);
      const st = gen.stash;
      for (let i = 0; i < st.length; i += 3) {
        if (st[i] !== p || (st[i + 1] !== b1 && st[i + 1] !== b2) || st[i + 2]! >>> db !== fp) continue;
        const first = gen.lo + (st[i + 2]! & ((1 << db) - 1)) * unit;
        if (first + unit - 1 <= floor) continue;
        n++;
        out?.push(first);
      }
    }
    return n;
  }

  /**
   * Puts slot value v (fingerprint fp) into one of its two buckets of its
   * page in gen, displacing entries along a random walk if both are full;
   * a walk that ends homeless stashes the last displaced entry (I1).
   */
  private place(gen: Gen, m1: number, fp: number, v: number): void {
    const p = gen.pageBits === 0 ? 0 : m1 >>> (32 - gen.pageBits);
    const w = gen.pages[p]!;
    const nb = gen.nb;
    const b1 = firstBucket(m1, nb);
    const b2 = otherBucket(b1, fmix(fp ^ this.s4) % nb, nb);
    if (tryPut(w, b1, v) || tryPut(w, b2, v)) return;
    let b = this.next() & 1 ? b1 : b2;
    let cur = v;
    for (let kick = 0; kick < MAX_KICKS; kick++) {
      const at = b * WORDS_PER_BUCKET;
      const j = this.next() & 3;
      const out = slotGet(w, at, j);
      slotSet(w, at, j, cur);
      cur = out;
      b = otherBucket(b, fmix((cur >>> gen.db) ^ this.s4) % nb, nb);
      if (tryPut(w, b, cur)) return;
    }
    gen.stash.push(p, b, cur);
    if (gen.stash.length >= STASH_MAX * 3) gen.sealed = true;
  }

  /** A new generation starting at `offset`, sized for the hydration's remaining entries or a share of the live ones. */
  private openGen(offset: number): Gen {
    const share = Math.ceil(this.stored / GEN_FRACTION);
    const want = this.pending > 0 ? this.pending : 2 ** Math.ceil(Math.log2(Math.max(1, share)));
    const capacity = Math.min(this.maxGen, 2 ** (this.deltaBits + this.spanBits), Math.max(MIN_GEN_ENTRIES, want));
    // Delta bits for twice its capacity (room for offset holes), no more:
    // every bit it does not need goes to the fingerprint.
    const db = Math.max(MIN_DELTA_BITS, Math.min(this.deltaBits, Math.ceil(Math.log2(capacity / 2 ** this.spanBits)) + 1));
    const fpValues = Math.min(2 ** (COMPACT_SLOT_BITS - db) - 1, this.fpCap);
    const buckets = Math.max(2, Math.ceil(capacity / COMPACT_TARGET_LOAD / SLOTS));
    const pageBits = Math.ceil(Math.log2(Math.ceil(buckets / COMPACT_MAX_PAGE_BUCKETS)));
    const nb = Math.max(2, Math.ceil(buckets / 2 ** pageBits));
    const pages: Uint16Array[] = [];
    for (let i = 0; i < 2 ** pageBits; i++) {
      const w = new Uint16Array(nb * WORDS_PER_BUCKET);
      pages.push(w);
      this.pageBytes += w.byteLength;
      this.pageCount++;
    }
    const span = 2 ** (db + this.spanBits);
    const gen: Gen = {
      lo: offset,
      db,
      fpValues,
      span,
      last: offset - 1,
      capacity,
      count: 0,
      pageBits,
      nb,
      pages,
      stash: [],
      sealed: false,
    };
    this.gens.push(gen);
    return gen;
  }

  private drop(gen: Gen): void {
    for (const w of gen.pages) this.pageBytes -= w.byteLength;
    this.pageCount -= gen.pages.length;
    this.stored -= gen.count;
  }

  private next(): number {
    let x = this.rng;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.rng = x >>> 0;
    return this.rng;
  }

  /**
   * Structural invariants, for tests: generations in offset order and
   * disjoint (I3), each one's count equal to its occupied slots plus stash
   * entries, every delta inside its span, the stash within bounds, the page
   * tally right. Returns the first violation, or undefined.
   */
  invariantViolation(): string | undefined {
    let stored = 0;
    let pages = 0;
    let bytes = 0;
    let prevLast = -Infinity;
    for (let g = this.head; g < this.gens.length; g++) {
      const gen = this.gens[g]!;
      if (gen.lo <= prevLast) return `generation ${g} starts at ${gen.lo}, at or below the previous one's last offset ${prevLast}`;
      if (gen.last <= this.floor) return `generation ${g} is wholly below the floor but live`;
      prevLast = gen.last;
      let occupied = 0;
      for (const w of gen.pages) {
        if (w.length !== gen.nb * WORDS_PER_BUCKET) return `generation ${g}: a page of ${w.length} words for ${gen.nb} buckets`;
        for (let b = 0; b < gen.nb; b++) {
          for (let j = 0; j < SLOTS; j++) {
            const v = slotGet(w, b * WORDS_PER_BUCKET, j);
            if (v === 0) continue;
            occupied++;
            if (gen.lo + (v & ((1 << gen.db) - 1)) * 2 ** this.spanBits > gen.last) return `generation ${g}: a delta past its last offset`;
            if (v >>> gen.db > gen.fpValues) return `generation ${g}: a fingerprint out of range`;
          }
        }
        pages++;
        bytes += w.byteLength;
      }
      if (gen.stash.length > STASH_MAX * 3) return `generation ${g}: stash of ${gen.stash.length / 3}`;
      if (occupied + gen.stash.length / 3 !== gen.count)
        return `generation ${g}: count ${gen.count}, ${occupied} slots + ${gen.stash.length / 3} stashed`;
      if (gen.count > gen.capacity) return `generation ${g}: ${gen.count} entries over its capacity ${gen.capacity}`;
      stored += gen.count;
    }
    if (stored !== this.stored) return `stored ${this.stored}, generations hold ${stored}`;
    if (pages !== this.pageCount || bytes !== this.pageBytes)
      return `tally: ${this.pageCount} pages / ${this.pageBytes} B, found ${pages} / ${bytes}`;
    return undefined;
  }

  /**
   * The expected false candidates of an absent lookup: for each live
   * generation, 8 slots read at its load, each matching with probability
   * 1 / fpValues (tests, bench: the model a measured rate is held to).
   */
  falseCandidateModel(): number {
    let f = 0;
    for (let g = this.head; g < this.gens.length; g++) {
      const gen = this.gens[g]!;
      const slots = gen.pages.length * gen.nb * SLOTS;
      f += (2 * SLOTS * Math.min(1, gen.count / slots)) / gen.fpValues;
    }
    return f;
  }

  /** The largest typed array the tier holds (tests: the allocation bound). */
  largestArrayBytes(): number {
    let max = 0;
    for (let g = this.head; g < this.gens.length; g++) for (const w of this.gens[g]!.pages) max = Math.max(max, w.byteLength);
    return max;
  }
}
