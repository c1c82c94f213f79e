// One file (~580 lines), on purpose: the paged open-addressing table is one
// data structure whose invariants (no false negatives, keyed placement,
// probe runs inside a page, expiry by floor) hold across insert, lookup,
// split and compaction together; invariantViolation() checks them all in
// one place. Its design is argued in the comment below.

/**
 * One partition's known hash occurrences: a paged open-addressing table with
 * one entry per occurrence, (key, offset).
 *
 * The key is the first 8 bytes of the 16-byte xxh3_128 hash, as two
 * big-endian 32-bit words (k0, k1). The table is a superset index, never an
 * authority: a lookup names every live occurrence whose key equals the
 * query's, which includes every occurrence of the query's full hash (no
 * false negatives), and, with probability about (entries) / 2^64, one of
 * another hash sharing those 8 bytes. That can only make the broker name an
 * offset SQL then refutes (it compares all 16 stored bytes positionally) or
 * send -1, both exact, never a verdict. (A 32-bit key was tried first: equal
 * keys share a probe run, so a lookup matched by chance with probability
 * (entries) / 2^32, 40 false names in 4.6 M lookups against 80 k entries,
 * each a second SQL round for its segment.)
 *
 * Placement is keyed. Every placement decision (which page, which home
 * slot, which side of a split) comes from m = a mix of (k0, k1) with two
 * secret words drawn per table, never from the key bits themselves. The
 * hashes are unkeyed xxh3 of client-chosen ids, so anyone can search for
 * ids whose hashes share chosen bits (one in 2^16 shares a 16-bit home);
 * placed by raw bits, such ids would pile into one probe run (every lookup
 * in the page O(run)) or one page no split separates. Behind the secret
 * mix only equal 64-bit keys share a run, and those are what a lookup must
 * name anyway. (Randomised, not cryptographic: nothing outside the process
 * observes m but timing.)
 *
 * Layout. A directory of 2^depth page references indexed by m's top
 * `depth` bits (extendible hashing). A page holds `cap` slots in two arrays:
 * `keys` (k0, k1 per slot; (0, 0) marks a free slot, so a real key (0, 0) is
 * stored and looked up as (0, 1): one more possible chance match, never a
 * miss) and `deltas` (one word per slot: offset - base, with `base` fixed
 * for the table's life). Linear probing from a home slot picked by m's low
 * 16 bits, wrapping inside the page. A miss reads only `keys` (8 bytes a
 * slot, a probe run usually within one cache line); a hit reads its delta
 * too. Several directory slots share a page whose local depth is below the
 * directory's.
 *
 * Expiry is by offset: the owner raises `floor`, and every entry at or below
 * it is dead. Lookups skip dead entries; they are deleted in place, by
 * backward shift (no tombstones), when an insert finds its page over
 * MAX_LOAD, or by compact() (an incremental sweep that also shrinks pages),
 * so probe runs stay those of a table of live entries.
 *
 * Growth, one page at a time, never a whole-table rehash: a page still over
 * MAX_LOAD after its dead entries went is reallocated with room for its live
 * entries at TARGET_LOAD, up to MAX_PAGE_SLOTS (64 KiB of keys); a
 * full-size page over SPLIT_LOAD splits on m's next bit into two pages
 * (doubling the directory when the page's depth equals the directory's). So
 * the largest allocation is 64 KiB, a rebuild moves at most one page's
 * entries, and pages stay between TARGET_LOAD and MAX_LOAD: 12 bytes per
 * slot is 15 to 21.4 bytes per live occurrence.
 *
 * Why this and not the seed's sorted blocks behind bloom generations: a
 * definitive miss there read one bloom block per live generation (3 to 40+),
 * and a hit searched every sealed block its generation's slot named (8 of
 * them in a 262 144-hash generation, ~3.9 us per scattered hit measured);
 * here both are one probe run (docs/deduplication.md, "The occurrence
 * table", has the side-by-side numbers).
 */

import { randomFillSync } from 'node:crypto';

/** Key words per slot. */
const KEY_WORDS = 2;
/** Bytes per slot: two key words and a delta. */
export const SLOT_BYTES = 12;
/** Largest representable delta (offset - base). */
const MAX_DELTA = 0xffffffff;
/** 8192 slots: 64 KiB of keys (and 32 KiB of deltas), the largest allocation. */
export const MAX_PAGE_SLOTS = 8192;
const MIN_PAGE_SLOTS = 16;
/** An insert that would take a page past this load first deletes its dead entries, then grows or splits it. */
const MAX_LOAD = 0.8;
/** Capacity chosen for a rebuilt page: its live entries at this load (0.56: 12 bytes a slot stays under 21.5 bytes a live entry). */
export const TARGET_LOAD = 0.56;
/** A maximum-size page splits instead of being rebuilt once its live entries exceed this load. */
const SPLIT_LOAD = 0.75;
/** Deepest directory: 2^13 references (64 KiB of them), pages for ~37 M keys. */
const MAX_DEPTH = 13;
/**
 * Accounted overhead of one page: its object and its two typed arrays, each
 * a view and a buffer object (~380 B measured; what makes a one-page table
 * of a few hashes cost ~1.1 KB with its entry, test/unit/dedup/accounting.test.ts).
 * Next to a full page's 96 KiB of slots it is nothing.
 */
export const PAGE_OVERHEAD_BYTES = 384;

interface Page {
  /** k0, k1 of slot s at 2s, 2s + 1. */
  keys: Uint32Array;
  /** Offset - base of slot s (meaningless for a free slot). */
  deltas: Uint32Array;
  cap: number;
  /** Entries stored, dead ones included. */
  count: number;
  /** Key bits this page is responsible for (its local depth). */
  depth: number;
  /** The value of those top `depth` key bits. */
  prefix: number;
}

function newPage(cap: number, depth: number, prefix: number): Page {
  return { keys: new Uint32Array(cap * KEY_WORDS), deltas: new Uint32Array(cap), cap, count: 0, depth, prefix };
}

/** Slots for `n` entries at TARGET_LOAD, clamped to the page limits. */
function capFor(n: number): number {
  return Math.min(MAX_PAGE_SLOTS, Math.max(MIN_PAGE_SLOTS, Math.ceil(n / TARGET_LOAD)));
}

/**
 * Slots a swept page of `n` live entries needs: capFor(n) while that keeps
 * it under SPLIT_LOAD; an oversize page (see makeRoom) that still holds more
 * keeps room for all of them at TARGET_LOAD (a maximum-size page would
 * overfill, and a full page has no free slot to end a probe run).
 */
function sweptCap(n: number): number {
  return n <= MAX_PAGE_SLOTS * SPLIT_LOAD ? capFor(n) : Math.max(MAX_PAGE_SLOTS, Math.ceil(n / TARGET_LOAD));
}

/** The stored second key word: (0, 0) marks a free slot, so a real (0, 0) key becomes (0, 1). */
const keyLow = (k0: number, k1: number): number => (k1 === 0 && k0 === 0 ? 1 : k1);

/**
 * The placement word of a stored key (k1 already through keyLow) under the
 * table's secret (s0, s1): both words xored with a secret, multiplied,
 * combined and passed through murmur3's 32-bit finaliser, so every bit of m
 * depends on every key bit and on the secret.
 */
export function mix(k0: number, k1: number, s0: number, s1: number): number {
  let h = Math.imul(k0 ^ s0, 0xcc9e2d51);
  h = (h << 15) | (h >>> 17);
  h ^= Math.imul(k1 ^ s1, 0x1b873593);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Home slot in a page of `cap` slots: m's low 16 bits, scaled. The
 * directory and splits use m's top 13 bits at most, so the two choices stay
 * independent.
 */
const home = (m: number, cap: number): number =>
  // The shift is exact while the product fits 32 bits (every page up to
  // 65 536 slots); an oversized page (see makeRoom) divides instead.
  cap <= 65536 ? ((m & 0xffff) * cap) >>> 16 : Math.floor(((m & 0xffff) * cap) / 65536);

/** Two fresh secret words (crypto-random: a table's placement cannot be predicted from outside). */
function freshSecret(): [number, number] {
  const w = randomFillSync(new Uint32Array(2));
  return [w[0]!, w[1]!];
}

export interface OccurrenceTableOptions {
  /** The placement secret (tests: a reproducible layout); fresh random words by default. */
  secret?: [number, number];
  /** Deepest directory (tests: reach the oversize-page path with few entries); MAX_DEPTH by default. */
  maxDepth?: number;
}

/**
 * States: empty (no live entry) -> filled by insert(); entries die when the
 * floor passes them (raiseFloor) and are deleted by later inserts into their
 * page or by compact(). The table is never rebuilt whole.
 */
export class OccurrenceTable {
  /** Offsets are stored as offset - base. */
  readonly base: number;
  private readonly s0: number;
  private readonly s1: number;
  private readonly maxDepth: number;
  private dir: Page[];
  private depth: number;
  /** Entries at deltas <= floorDelta are dead. */
  private floorDelta = -1;
  /** Entries stored, dead ones included. */
  private stored = 0;
  private pageBytes = 0;
  private pageCount = 0;
  /** Directory index where the next compact() resumes. */
  private sweepAt = 0;

  /**
   * @param base the lowest offset the table can hold (offsets are kept as 32-bit deltas from it)
   * @param expected entries about to be inserted (a hydration): the directory and pages are sized for them up front
   */
  constructor(base: number, expected = 0, opts: OccurrenceTableOptions = {}) {
    this.base = base;
    [this.s0, this.s1] = opts.secret ?? freshSecret();
    this.maxDepth = Math.min(MAX_DEPTH, opts.maxDepth ?? MAX_DEPTH);
    let depth = 0;
    while (depth < this.maxDepth && expected / 2 ** depth > MAX_PAGE_SLOTS * TARGET_LOAD) depth++;
    this.depth = depth;
    const n = 2 ** depth;
    this.dir = new Array<Page>(n);
    const cap = capFor(expected / n);
    for (let i = 0; i < n; i++) this.dir[i] = this.track(newPage(cap, depth, i));
  }

  /** Entries stored (dead ones not yet deleted included). */
  get size(): number {
    return this.stored;
  }
  get pages(): number {
    return this.pageCount;
  }
  /** Accounted bytes: every page's arrays, a per-page overhead, the directory. */
  get bytes(): number {
    return this.pageBytes + this.pageCount * PAGE_OVERHEAD_BYTES + this.dir.length * 8;
  }
  /** Every page's arrays (tests: the allocation bound). */
  *arrays(): IterableIterator<Uint32Array> {
    for (let i = 0; i < this.dir.length; i += this.span(this.dir[i]!)) {
      yield this.dir[i]!.keys;
      yield this.dir[i]!.deltas;
    }
  }

  /** Whether `offset` can be stored (its delta fits in 32 bits). */
  canHold(offset: number): boolean {
    const d = offset - this.base;
    return d >= 0 && d <= MAX_DELTA;
  }

  /** Entries at or below `offset` are dead from now on (the floor only rises). */
  raiseFloor(offset: number): void {
    const d = Math.min(offset - this.base, MAX_DELTA);
    if (d > this.floorDelta) this.floorDelta = d;
  }

  /** Adds an occurrence of key (k0, k1) at `offset` (canHold(offset) must hold). */
  insert(k0: number, k1: number, offset: number): void {
    const lo = keyLow(k0, k1);
    this.insertKeyed(k0, lo, mix(k0, lo, this.s0, this.s1), offset - this.base);
  }

  /** Adds a stored-form key (k1 through keyLow) with placement word m at delta d: makes room in its page first if needed. */
  private insertKeyed(k0: number, lo: number, m: number, d: number): void {
    let p = this.pageOf(m);
    if (p.count + 1 > p.cap * MAX_LOAD) p = this.makeRoom(p, m);
    place(p, k0, lo, m, d);
    this.stored++;
  }

  /**
   * Inserts n occurrences at once (entry i: key (k0s[i], k1s[i]) at
   * offsets[i]; every offset must satisfy canHold): a hydration. Same result
   * as n insert() calls; they are made page by page (a counting sort on the
   * directory index first), so each page's 96 KiB is written while it is in
   * cache instead of one random page per entry.
   */
  insertMany(k0s: Uint32Array, k1s: Uint32Array, offsets: Float64Array, n: number): void {
    const s0 = this.s0;
    const s1 = this.s1;
    if (this.depth === 0) {
      for (let i = 0; i < n; i++) this.insert(k0s[i]!, k1s[i]!, offsets[i]!);
      return;
    }
    // Counting sort of the entries themselves (not of their indices: reading
    // four arrays at random indices afterwards cost more than it saved).
    const shift = 32 - this.depth;
    const slots = this.dir.length;
    const ms = new Uint32Array(n);
    const start = new Uint32Array(slots + 1);
    for (let i = 0; i < n; i++) {
      const m = mix(k0s[i]!, keyLow(k0s[i]!, k1s[i]!), s0, s1);
      ms[i] = m;
      start[(m >>> shift) + 1]!++;
    }
    for (let d = 0; d < slots; d++) start[d + 1]! += start[d]!;
    const sk0 = new Uint32Array(n);
    const sk1 = new Uint32Array(n);
    const sm = new Uint32Array(n);
    const sd = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const m = ms[i]!;
      const j = start[m >>> shift]!++;
      sk0[j] = k0s[i]!;
      sk1[j] = keyLow(k0s[i]!, k1s[i]!);
      sm[j] = m;
      sd[j] = offsets[i]! - this.base;
    }
    for (let j = 0; j < n; j++) this.insertKeyed(sk0[j]!, sk1[j]!, sm[j]!, sd[j]!);
  }

  /** Whether any live occurrence has key (k0, k1). */
  has(k0: number, k1: number): boolean {
    const lo = keyLow(k0, k1);
    const m = mix(k0, lo, this.s0, this.s1);
    const p = this.pageOf(m);
    const keys = p.keys;
    const cap = p.cap;
    let s = home(m, cap);
    for (;;) {
      const a = keys[2 * s]!;
      const b = keys[2 * s + 1]!;
      if (a === k0 && b === lo) {
        if (p.deltas[s]! > this.floorDelta) return true;
      } else if (a === 0 && b === 0) return false;
      if (++s === cap) s = 0;
    }
  }

  /** Appends to `out` the offset of every live occurrence of key (k0, k1) (table order); returns how many. */
  collect(k0: number, k1: number, out: number[]): number {
    const lo = keyLow(k0, k1);
    const m = mix(k0, lo, this.s0, this.s1);
    const p = this.pageOf(m);
    const keys = p.keys;
    const cap = p.cap;
    const floor = this.floorDelta;
    let s = home(m, cap);
    let n = 0;
    for (;;) {
      const a = keys[2 * s]!;
      const b = keys[2 * s + 1]!;
      if (a === k0 && b === lo) {
        const d = p.deltas[s]!;
        if (d > floor) {
          out.push(this.base + d);
          n++;
        }
      } else if (a === 0 && b === 0) return n;
      if (++s === cap) s = 0;
    }
  }

  /**
   * Calls fn with the stored key of every live entry (k1 through keyLow, as
   * lookups compare it), one call per occurrence: what a filter built from
   * this table must hold (entry.ts, demote).
   */
  forEachLiveKey(fn: (k0: number, k1: number) => void): void {
    const floor = this.floorDelta;
    for (let i = 0; i < this.dir.length; i += this.span(this.dir[i]!)) {
      const p = this.dir[i]!;
      const keys = p.keys;
      for (let s = 0; s < p.cap; s++) {
        const a = keys[2 * s]!;
        const b = keys[2 * s + 1]!;
        if ((a !== 0 || b !== 0) && p.deltas[s]! > floor) fn(a, b);
      }
    }
  }

  /**
   * Deletes dead entries from up to `maxPages` pages, resuming where the
   * last call stopped (a sweep in directory order); a page whose live entries
   * would fit one under half its size is rebuilt at the capacity they need,
   * so memory follows the live set down as well as up. Returns the pages
   * visited.
   */
  compact(maxPages: number): number {
    let done = 0;
    let i = this.sweepAt % this.dir.length;
    const todo = Math.min(maxPages, this.pageCount);
    while (done < todo) {
      let p = this.dir[i]!;
      // Start at the page's first directory slot (the sweep may resume inside a shared run).
      i = p.prefix * this.span(p);
      this.purge(p);
      const cap = sweptCap(p.count);
      if (cap * 2 <= p.cap) p = this.rebuilt(p, cap);
      done++;
      i += this.span(p);
      if (i >= this.dir.length) i = 0;
    }
    this.sweepAt = i;
    return done;
  }

  /**
   * The structural invariants, for tests: each page's directory slots are
   * exactly its aligned run and all point at it; page counts sum to the
   * stored total and count the occupied slots; no page is over MAX_LOAD;
   * the page tally matches. Returns the first violation, or undefined.
   */
  invariantViolation(): string | undefined {
    let stored = 0;
    let pages = 0;
    let bytes = 0;
    for (let i = 0; i < this.dir.length;) {
      const p = this.dir[i]!;
      const span = this.span(p);
      if (p.prefix * span !== i) return `page with prefix ${p.prefix} (depth ${p.depth}) first seen at directory slot ${i}`;
      for (let k = i; k < i + span; k++) if (this.dir[k] !== p) return `directory slot ${k} does not point at its page`;
      let occupied = 0;
      for (let k = 0; k < p.cap; k++) {
        const a = p.keys[2 * k]!;
        const b = p.keys[2 * k + 1]!;
        if (a === 0 && b === 0) continue;
        occupied++;
        const m = mix(a, b, this.s0, this.s1);
        if (p.depth > 0 && m >>> (32 - p.depth) !== p.prefix) return `page at ${i}: slot ${k} holds a key of another page`;
        // Reachable: no free slot between its home and it.
        for (let h = home(m, p.cap); h !== k; h = h + 1 === p.cap ? 0 : h + 1) {
          if (p.keys[2 * h] === 0 && p.keys[2 * h + 1] === 0) return `page at ${i}: slot ${k} is cut off from its home by a free slot`;
        }
      }
      if (occupied !== p.count) return `page at ${i}: count ${p.count}, ${occupied} slots occupied`;
      if (p.count > p.cap * MAX_LOAD) return `page at ${i}: ${p.count} entries in ${p.cap} slots`;
      stored += p.count;
      pages++;
      bytes += p.keys.byteLength + p.deltas.byteLength;
      i += span;
    }
    if (stored !== this.stored) return `stored ${this.stored}, pages hold ${stored}`;
    if (pages !== this.pageCount || bytes !== this.pageBytes)
      return `tally: ${this.pageCount} pages / ${this.pageBytes} B, found ${pages} / ${bytes}`;
    return undefined;
  }

  /** The longest run of occupied slots in any page (tests: what a lookup may walk). */
  longestRun(): number {
    let longest = 0;
    for (let i = 0; i < this.dir.length; i += this.span(this.dir[i]!)) {
      const p = this.dir[i]!;
      let run = 0;
      // Twice round, so a run wrapping past the last slot is counted whole.
      for (let k = 0; k < 2 * p.cap; k++) {
        const s = k % p.cap;
        run = p.keys[2 * s] !== 0 || p.keys[2 * s + 1] !== 0 ? run + 1 : 0;
        longest = Math.max(longest, Math.min(run, p.cap));
      }
    }
    return longest;
  }

  /** The page placement word m maps to. */
  private pageOf(m: number): Page {
    return this.dir[this.depth === 0 ? 0 : m >>> (32 - this.depth)]!;
  }

  /** Directory slots page p covers (contiguous, from p.prefix * span). */
  private span(p: Page): number {
    return 2 ** (this.depth - p.depth);
  }

  /** Deletes page p's dead entries in place (backward-shift deletion). */
  private purge(p: Page): void {
    const keys = p.keys;
    const deltas = p.deltas;
    const cap = p.cap;
    const floor = this.floorDelta;
    let removed = 0;
    for (let s = 0; s < cap; s++) {
      // An entry shifted into s by a deletion is checked again.
      while ((keys[2 * s] !== 0 || keys[2 * s + 1] !== 0) && deltas[s]! <= floor) {
        deleteAt(p, s, this.s0, this.s1);
        removed++;
      }
    }
    p.count -= removed;
    this.stored -= removed;
  }

  /** A new page (cap slots, local depth and prefix given) with p's live entries whose m `bit` equals `want` (all when bit < 0). */
  private copyLive(p: Page, cap: number, depth: number, prefix: number, bit = -1, want = 0): Page {
    const q = this.track(newPage(cap, depth, prefix));
    const keys = p.keys;
    const floor = this.floorDelta;
    for (let s = 0; s < p.cap; s++) {
      const k0 = keys[2 * s]!;
      const k1 = keys[2 * s + 1]!;
      if (k0 === 0 && k1 === 0) continue;
      const d = p.deltas[s]!;
      if (d <= floor) continue;
      const m = mix(k0, k1, this.s0, this.s1);
      if (bit >= 0 && ((m >>> bit) & 1) !== want) continue;
      place(q, k0, k1, m, d);
    }
    return q;
  }

  /**
   * Makes room in page p (which `key` maps to) for one more entry; returns
   * the page `key` maps to afterwards. Dead entries go first, in place; if
   * the page is still over MAX_LOAD, then for its live entries plus the
   * newcomer (n): a page of capFor(n) slots while that is below the maximum,
   * a maximum-size page while n stays under SPLIT_LOAD of it, else two pages
   * one key bit deeper.
   */
  private makeRoom(p: Page, m: number): Page {
    this.purge(p);
    if (p.count + 1 <= p.cap * MAX_LOAD) return p;
    const n = p.count + 1;
    if (capFor(n) < MAX_PAGE_SLOTS || n <= MAX_PAGE_SLOTS * SPLIT_LOAD) return this.rebuilt(p, capFor(n));
    // A split: each half sized for the entries that fall in it (one half may
    // get none, when keys share this bit: the next split tries the next).
    if (p.depth >= this.maxDepth) {
      // No directory bit left to split on (a partition past ~37 M in-window
      // hashes): the page grows past the usual maximum instead, the one
      // allocation over 64 KiB the table ever makes, accounted like any
      // other. (Keys cannot be crafted into this: placement is keyed.)
      return this.rebuilt(p, Math.ceil(n / TARGET_LOAD));
    }
    const bit = 31 - p.depth;
    let n1 = (m >>> bit) & 1;
    for (let s = 0; s < p.cap; s++) {
      const a = p.keys[2 * s]!;
      const b = p.keys[2 * s + 1]!;
      if ((a !== 0 || b !== 0) && (mix(a, b, this.s0, this.s1) >>> bit) & 1) n1++;
    }
    const n0 = n - n1;
    if (p.depth === this.depth) this.doubleDirectory();
    const lo = this.copyLive(p, Math.max(capFor(n0), Math.ceil(n0 / TARGET_LOAD)), p.depth + 1, p.prefix * 2, bit, 0);
    const hi = this.copyLive(p, Math.max(capFor(n1), Math.ceil(n1 / TARGET_LOAD)), p.depth + 1, p.prefix * 2 + 1, bit, 1);
    this.replace(p, [lo, hi]);
    return ((m >>> bit) & 1) === 0 ? lo : hi;
  }

  /** p's live entries in a new page of `cap` slots (same depth and prefix), in p's place. */
  private rebuilt(p: Page, cap: number): Page {
    const q = this.copyLive(p, cap, p.depth, p.prefix);
    this.replace(p, [q]);
    return q;
  }

  private doubleDirectory(): void {
    const old = this.dir;
    const dir = new Array<Page>(old.length * 2);
    for (let i = 0; i < old.length; i++) dir[2 * i] = dir[2 * i + 1] = old[i]!;
    this.dir = dir;
    this.depth++;
    this.sweepAt *= 2;
  }

  /** Points every directory slot of p at its replacement: one page of the same depth, or two halves one bit deeper. */
  private replace(p: Page, by: Page[]): void {
    const span = this.span(p);
    const first = p.prefix * span;
    if (by.length === 1) {
      for (let i = first; i < first + span; i++) this.dir[i] = by[0]!;
    } else {
      const half = span / 2;
      for (let i = first; i < first + half; i++) this.dir[i] = by[0]!;
      for (let i = first + half; i < first + span; i++) this.dir[i] = by[1]!;
    }
    this.stored -= p.count;
    for (const q of by) this.stored += q.count;
    this.untrack(p);
  }

  private track(p: Page): Page {
    this.pageBytes += p.keys.byteLength + p.deltas.byteLength;
    this.pageCount++;
    return p;
  }
  private untrack(p: Page): void {
    this.pageBytes -= p.keys.byteLength + p.deltas.byteLength;
    this.pageCount--;
  }
}

/** Stores an entry (second key word already through keyLow; m its placement word) in a page known to have room. */
function place(p: Page, k0: number, k1: number, m: number, d: number): void {
  const keys = p.keys;
  const cap = p.cap;
  let s = home(m, cap);
  while (keys[2 * s] !== 0 || keys[2 * s + 1] !== 0) if (++s === cap) s = 0;
  keys[2 * s] = k0;
  keys[2 * s + 1] = k1;
  p.deltas[s] = d;
  p.count++;
}

/**
 * Backward-shift deletion of slot s: each later entry of the probe run that
 * may move closer to its home moves into the hole, until a free slot ends
 * the run. Afterwards every entry is still reachable from its home without
 * crossing a free slot.
 */
function deleteAt(p: Page, s: number, s0: number, s1: number): void {
  const keys = p.keys;
  const deltas = p.deltas;
  const cap = p.cap;
  let hole = s;
  let j = s;
  for (;;) {
    if (++j === cap) j = 0;
    const k0 = keys[2 * j]!;
    const k1 = keys[2 * j + 1]!;
    if (k0 === 0 && k1 === 0) break;
    const h = home(mix(k0, k1, s0, s1), cap);
    // The entry at j stays iff its home lies cyclically in (hole, j].
    const stays = hole <= j ? hole < h && h <= j : hole < h || h <= j;
    if (stays) continue;
    keys[2 * hole] = k0;
    keys[2 * hole + 1] = k1;
    deltas[hole] = deltas[j]!;
    hole = j;
  }
  keys[2 * hole] = 0;
  keys[2 * hole + 1] = 0;
}
