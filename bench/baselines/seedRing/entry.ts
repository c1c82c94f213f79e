import { ENTRY_OVERHEAD_BYTES, HASH_BYTES, SKEW_SLACK_MS } from './constants.js';
import { BlockRing } from './blockRing.js';
import { BloomFront } from './bloomFront.js';
import { readWords, sortItemsByHash, viewOf } from './hashRecords.js';

/** anyLocalHit's one-item slot mask (single-threaded; filled right before each use). */
const ONE_MASK = new Int32Array(1);
/** collectHits' per-item slot masks by item index (single-threaded; only the current generation's items are read). */
let slotMasks = new Int32Array(256);
/** collectHits' scratch: w0..w2 of each item (4 words per item), and which items got a "maybe". */
let scanWords = new Uint32Array(1024);
let scanMaybeFlags = new Uint8Array(256);
/** addHashes' scratch: w0..w2 of each appended hash (4 words per hash). */
let addWords = new Uint32Array(1024);
/** One row of queen.log_txns as the hydration fetch returns it. */
export interface TxnRow {
  baseOffset: number;
  endOffset: number;
  /** created_at in ms (the database's clock). */
  createdMs: number;
  /** (endOffset - baseOffset + 1) x 16 bytes, frame order. */
  hashes: Buffer;
}

export type EntryState = 'vouching' | 'gap' | 'rebuild';
export type RebuildReason = 'window' | 'overlap' | 'unknown';

/**
 * A local hit named precisely: frame `index` of the segment has its hash at
 * each of `offsets` (ascending, distinct) among what the entry holds.
 */
export interface LocalHit {
  index: number;
  offsets: number[];
}

/** Counters a lookup feeds (the cache's stats object satisfies this). */
export interface LookupStats {
  localHits: number;
  localMisses: number;
  bloomMaybe: number;
  bloomFalsePositives: number;
}

/**
 * The seed's layout of one partition's cache entry (sorted blocks behind a
 * bloom front), as the broker ran it up to commit 65d755c. Kept only as the
 * baseline bench/suites/dedupCache.ts measures the occurrence table against;
 * the service uses src/dedup/entry.ts.
 *
 * What the broker knows about one partition's in-window hashes.
 *
 * Fields: windowSeconds (fixed for the entry's life; a change means a new
 * entry), verifiedUpto (V), hydratedFrom (H), the exact BlockRing and the
 * BloomFront in front of it, and two flags.
 *
 * The vouch rule: the entry may vouch V ("no hash of the segment occurs at or
 * below V") only if it knows every in-window hash at offsets in (H, V] and
 * everything at or below H is pre-window (or below the purge watermark, where
 * SQL never looks). Then a segment whose hashes all miss the entry has no
 * in-window duplicate at or below V, and SQL may narrow its probe to
 * (V, last_offset].
 *
 * How the code keeps it: the knowledge is the resident set itself (ring and
 * bloom front, always fed together). hydrate() and append() only add to it,
 * and expire() only removes whole units that are provably pre-window, so it
 * stays a superset of the in-window hashes in (H, V]. H records where that
 * knowledge provably starts (it is reported and tested); a lookup never
 * needs it, because it searches everything resident.
 *
 * States and transitions:
 * - vouching: born by hydrate() (entries are only born complete); stays
 *   vouching while append() sees base == V + 1 (the watermark advances over
 *   hashes it just added, so (H, V] stays fully known).
 * - gap: append() saw base > V + 1: another broker wrote (V, base - 1], which
 *   this entry never saw. Terminal: it answers -1 until replaced by a new
 *   hydration.
 * - rebuild: marked by the cache (window change, push outcome unknown) or by
 *   append() seeing base <= V (an overlap: impossible under a monotone
 *   allocator, so the entry's picture is wrong). Terminal, like gap, but the
 *   replacing hydration is gated by the memory policy.
 * - expire(now) runs in every state: it drops whole pre-window blocks and
 *   generations and raises H, which never makes a vouch unsound (below).
 */
export class SeedRingEntry {
  readonly windowMs: number;
  readonly ring = new BlockRing();
  readonly front: BloomFront;
  verifiedUpto: number;
  hydratedFrom: number;
  gap = false;
  rebuild = false;
  rebuildReason: RebuildReason | undefined;
  /** Last time (ms) a flush used this entry: LRU order and the recent-use eviction guard. */
  lastUsedMs = 0;
  /** Bytes last reported to the resident total (maintained by ResidentSet). */
  accountedBytes = 0;

  private constructor(
    readonly windowSeconds: number,
    verifiedUpto: number,
    hydratedFrom: number,
    readonly hydratedAtMs: number,
    minGensPerWindow: number | undefined,
  ) {
    this.windowMs = windowSeconds * 1000;
    this.verifiedUpto = verifiedUpto;
    this.hydratedFrom = hydratedFrom;
    this.front = new BloomFront(this.windowMs, minGensPerWindow);
  }

  /**
   * Builds a complete entry from a full-window fetch: every log_txns row of
   * the partition with created_at >= (fetch time - window - 5 s), ascending
   * offsets, read in the same snapshot as the allocator (lastOffset) and the
   * purge watermark (txnsStart).
   *
   * V = lastOffset. H = max(lowest kept base - 1, txnsStart - 1), or
   * lastOffset when no row is kept. Why H is at or below the window start:
   * - Rows ending below txnsStart are skipped: SQL's probe never looks below
   *   txnsStart - 1 and txnsStart only grows, so they can never matter.
   * - Any other row ending at or below H existed in the snapshot
   *   (H < V = lastOffset) and was not returned, so it was committed before
   *   fetch time - window - 5 s: pre-window now and at every later push,
   *   with 5 s to spare for clock skew. (This holds even if commit times were
   *   not monotone in offset: the argument is about which rows were fetched,
   *   not about their order.)
   * - Every in-window row at offsets in (H, V] was fetched (same argument),
   *   and all of its hashes are added below, so (H, V] is fully known.
   * Extra old rows (the slack, a lazily purged row straddling txnsStart) only
   * widen what is known: a superset can cause a false local hit (one extra
   * probe), never a false "no duplicate".
   *
   * Hashes go through the same append path as live pushes, so hydration also
   * builds blocks of exactly 4096 and never allocates more than one block.
   */
  static hydrate(
    windowSeconds: number,
    lastOffset: number,
    txnsStart: number,
    rows: readonly TxnRow[],
    fetchedAtMs: number,
    minGensPerWindow?: number,
  ): SeedRingEntry {
    let prevEnd = -Infinity;
    let firstKept: number | undefined;
    for (const r of rows) {
      const n = r.endOffset - r.baseOffset + 1;
      if (!Number.isSafeInteger(r.baseOffset) || !Number.isSafeInteger(r.endOffset) || n < 1) {
        throw new RangeError(`dedup install: bad row [${r.baseOffset}, ${r.endOffset}]`);
      }
      if (r.baseOffset <= prevEnd) throw new RangeError('dedup install: rows must be in ascending, non-overlapping offset order');
      if (r.endOffset > lastOffset) {
        throw new RangeError(
          `dedup install: row ends at ${r.endOffset} above last_offset ${lastOffset} (rows and allocator must come from one snapshot)`,
        );
      }
      if (r.hashes.length !== n * HASH_BYTES)
        throw new RangeError(`dedup install: row [${r.baseOffset}, ${r.endOffset}] has ${r.hashes.length} hash bytes`);
      prevEnd = r.endOffset;
      if (firstKept === undefined && r.endOffset >= txnsStart) firstKept = r.baseOffset;
    }
    const hydratedFrom = firstKept === undefined ? lastOffset : Math.max(firstKept - 1, txnsStart - 1);
    const e = new SeedRingEntry(windowSeconds, lastOffset, hydratedFrom, fetchedAtMs, minGensPerWindow);
    let remaining = 0;
    for (const r of rows) if (r.endOffset >= txnsStart) remaining += r.endOffset - r.baseOffset + 1;
    e.front.limitTiers(remaining);
    for (const r of rows) {
      if (r.endOffset < txnsStart) continue;
      const n = r.endOffset - r.baseOffset + 1;
      remaining -= n;
      e.addHashes(r.hashes, n, r.baseOffset, r.createdMs, remaining);
    }
    e.front.unlimitTiers();
    return e;
  }

  get state(): EntryState {
    return this.rebuild ? 'rebuild' : this.gap ? 'gap' : 'vouching';
  }

  /** Structural part of the vouch rule; the caller adds "no local hit". */
  get canVouch(): boolean {
    return !this.gap && !this.rebuild && this.windowSeconds > 0 && this.hydratedFrom <= this.verifiedUpto;
  }

  markRebuild(reason: RebuildReason): void {
    if (!this.rebuild) this.rebuildReason = reason;
    this.rebuild = true;
  }

  /**
   * A segment SQL appended at `base` (count hashes, committed at or before
   * createdMs). Returns what it did; the caller counts.
   * - base == V + 1: add the hashes, V = base + count - 1. (H, V] stays fully
   *   known: the new offsets' hashes were just added.
   * - base > V + 1: someone else wrote (V, base - 1]; the entry can no longer
   *   vouch for anything at or above V + 1 and it never learns what was there,
   *   so it becomes gap (answers -1 until rebuilt).
   * - base <= V: impossible under a monotone allocator; mark for rebuild.
   * A gap or rebuild entry ignores appends: it is waiting to be replaced.
   */
  append(base: number, hashes: Buffer, count: number, createdMs: number): 'appended' | 'gap' | 'overlap' | 'ignored' {
    if (this.gap || this.rebuild) return 'ignored';
    if (base === this.verifiedUpto + 1) {
      this.addHashes(hashes, count, base, createdMs);
      this.verifiedUpto = base + count - 1;
      return 'appended';
    }
    if (base > this.verifiedUpto + 1) {
      this.gap = true;
      return 'gap';
    }
    this.markRebuild('overlap');
    return 'overlap';
  }

  /** Exact store and bloom front always receive the same hashes, together. */
  private addHashes(hashes: Buffer, count: number, firstOffset: number, createdMs: number, upcoming = 0): void {
    if (hashes.length < count * HASH_BYTES)
      throw new RangeError(`dedup: ${count} hashes need ${count * HASH_BYTES} bytes, got ${hashes.length}`);
    // Where the ring puts each hash: from record `pos0` of its hot buffer
    // (block `block0`) on, sealing every BLOCK_HASHES. The bloom's slots
    // name these blocks (bloomFront.ts).
    const block0 = this.ring.hotBlock;
    const pos0 = this.ring.hotHashes;
    this.ring.append(hashes, 0, count, firstOffset, createdMs, upcoming);
    const view = viewOf(hashes);
    if (addWords.length < count * 4) addWords = new Uint32Array(Math.max(count * 4, addWords.length * 2));
    const ws = addWords;
    for (let i = 0; i < count; i++) {
      const o = i * HASH_BYTES;
      ws[4 * i] = view.getUint32(o);
      ws[4 * i + 1] = view.getUint32(o + 4);
      ws[4 * i + 2] = view.getUint32(o + 8);
    }
    this.front.addMany(ws, count, createdMs, firstOffset, block0, pos0);
  }

  /**
   * Drops what is provably pre-window at broker time nowMs. The cutoff is
   * nowMs - window - 5 s: a unit whose newest commit is before it was
   * committed more than a window before any later push's database clock, as
   * long as the broker's clock is at most 5 s ahead of the database's (a
   * constant offset the other way cancels: appended units carry broker times,
   * so their commit times and "now" shift together).
   *
   * H rises to the highest offset of the dropped prefix of the ring. Sound:
   * the dropped units hold all remaining offsets in (H, new H] (ring offsets
   * only grow, and offsets there that were never added were pre-window or
   * below the purge watermark at hydration), and all of them are pre-window,
   * so "everything at or below H is pre-window" still holds. Dropped bloom
   * generations are likewise wholly pre-window, so no in-window hash loses
   * its "maybe".
   */
  expire(nowMs: number): void {
    const cutoff = nowMs - this.windowMs - SKEW_SLACK_MS;
    const dropped = this.ring.expire(cutoff);
    if (dropped !== undefined && dropped > this.hydratedFrom) this.hydratedFrom = dropped;
    this.front.expire(cutoff);
  }

  /**
   * True when any of the segment's hashes is a local hit: a bloom "maybe"
   * confirmed by the exact store. Stops at the first hit (one is enough to
   * route the segment to SQL with -1). A definitive bloom miss never touches
   * the exact store.
   *
   * This is where the vouch rule's "knows every hash" is cashed in, so the
   * search must find every in-window hash in (H, V]: such a hash, at offset o,
   * was added to the ring and to the bloom generation whose offset range
   * holds o; that generation is live (it holds an in-window hash) and has no
   * false negatives, so it answers "maybe"; and the ring unit holding o is
   * retained and meets that generation's range. Confirming each "maybe" only
   * across its generation's offset range therefore loses nothing, and it
   * keeps a false positive from costing a search of every block.
   */
  anyLocalHit(hashes: Buffer, count: number, stats: LookupStats): boolean {
    const ring = this.ring;
    const front = this.front;
    const top = front.generations - 1;
    const view = viewOf(hashes);
    for (let i = 0; i < count; i++) {
      const w = readWords(view, i * HASH_BYTES);
      const w0 = w[0]!;
      const w1 = w[1]!;
      const w2 = w[2]!;
      const w3 = w[3]!;
      let g = front.nextMaybe(w0, w1, w2, top);
      if (g < 0) {
        stats.localMisses++;
        continue;
      }
      stats.bloomMaybe++;
      while (g >= 0) {
        ONE_MASK[0] = front.lastMask;
        const slots = { masks: ONE_MASK, firstBlock: front.firstBlockOf(g), slotShift: front.slotShiftOf(g) };
        if (ring.hasInRange(w0, w1, w2, w3, front.minOffsetOf(g), front.maxOffsetOf(g), slots, 0)) {
          stats.localHits++;
          return true;
        }
        g = front.nextMaybe(w0, w1, w2, g - 1);
      }
      stats.bloomFalsePositives++;
      stats.localMisses++;
    }
    return false;
  }

  /**
   * Every local hit of the segment, each with every offset the entry holds
   * for it, appended to `hits` in frame order. Returns false when some hit's
   * offset is not representable (the caller must then not hint at all).
   *
   * Completeness over (H, V] is anyLocalHit's argument applied to every
   * "maybe" generation instead of stopping at the first confirmation: an
   * in-window occurrence at offset o sits in the live generation whose range
   * holds o (which answers "maybe") and in the retained ring unit holding o
   * (which meets that range), so collecting over every "maybe" generation's
   * range names every in-window occurrence in (H, V]. Offsets found through
   * two overlapping generations are merged. Anything extra it names is still
   * a true occurrence (the ring never holds a hash at an offset it was not
   * committed at), which SQL checks positionally anyway.
   */
  collectHits(hashes: Buffer, count: number, stats: LookupStats, hits: LocalHit[]): boolean {
    const ring = this.ring;
    const front = this.front;
    const view = viewOf(hashes);
    // 1. Bloom: every generation answering "maybe" for each item (its items
    //    listed per generation, with the slot mask it answered); an item with
    //    none is a definitive miss. One pass over all items per generation
    //    (scanMaybe: the reads of different items overlap).
    if (scanWords.length < count * 4) scanWords = new Uint32Array(Math.max(count * 4, scanWords.length * 2));
    if (scanMaybeFlags.length < count) scanMaybeFlags = new Uint8Array(Math.max(count, scanMaybeFlags.length * 2));
    const ws = scanWords;
    for (let i = 0; i < count; i++) {
      const o = i * HASH_BYTES;
      ws[4 * i] = view.getUint32(o);
      ws[4 * i + 1] = view.getUint32(o + 4);
      ws[4 * i + 2] = view.getUint32(o + 8);
    }
    const flags = scanMaybeFlags;
    flags.fill(0, 0, count);
    const perGen: (number[] | undefined)[] = [];
    const perGenMasks: (number[] | undefined)[] = [];
    const nMaybe = front.scanMaybe(ws, count, perGen, perGenMasks, flags);
    stats.bloomMaybe += nMaybe;
    stats.localMisses += count - nMaybe;
    const maybeItems: number[] = [];
    if (nMaybe > 0) for (let i = 0; i < count; i++) if (flags[i] === 1) maybeItems.push(i);
    if (maybeItems.length === 0) return true;
    // 2. Exact store: per generation, its items in ascending hash order in
    //    one walk over the units its offset range meets, each item searched
    //    only in the blocks its slot mask names. The same occurrences as one
    //    search per (item, generation) over every unit (blockRing.ts).
    const found: (number[] | undefined)[] = new Array<number[] | undefined>(count);
    if (slotMasks.length < count) slotMasks = new Int32Array(Math.max(count, slotMasks.length * 2));
    const masks = slotMasks;
    let known = true;
    for (let g = 0; g < perGen.length; g++) {
      const items = perGen[g];
      if (items === undefined) continue;
      const gm = perGenMasks[g]!;
      for (let k = 0; k < items.length; k++) masks[items[k]!] = gm[k]!;
      const order = sortItemsByHash(view, items); // scratch: used before the next sort
      const slots = { masks, firstBlock: front.firstBlockOf(g), slotShift: front.slotShiftOf(g) };
      if (!ring.collectManyInRange(view, order, items.length, front.minOffsetOf(g), front.maxOffsetOf(g), found, slots)) known = false;
    }
    // 3. Hits in item order, offsets ascending and distinct (overlapping
    //    generations may find one occurrence twice).
    for (const i of maybeItems) {
      const offsets = found[i];
      if (offsets === undefined) {
        stats.bloomFalsePositives++;
        stats.localMisses++;
        continue;
      }
      stats.localHits++;
      if (offsets.length > 1) {
        offsets.sort((x, y) => x - y);
        let k = 0;
        for (let j = 0; j < offsets.length; j++) if (j === 0 || offsets[j] !== offsets[k - 1]) offsets[k++] = offsets[j]!;
        offsets.length = k;
      }
      hits.push({ index: i, offsets });
    }
    return known;
  }

  /** Exact membership without the bloom front (bench baseline, tests). */
  knowsExact(hash: Buffer, at = 0): boolean {
    const w = readWords(viewOf(hash), at);
    return this.ring.has(w[0]!, w[1]!, w[2]!, w[3]!);
  }
  /** Bloom front alone (tests: no false negatives). */
  bloomMaybe(hash: Buffer, at = 0): boolean {
    const w = readWords(viewOf(hash), at);
    return this.front.mayContain(w[0]!, w[1]!, w[2]!);
  }

  get bytes(): number {
    return ENTRY_OVERHEAD_BYTES + this.ring.bytes + this.front.bytes;
  }
  get hashCount(): number {
    return this.ring.hashCount;
  }
}
