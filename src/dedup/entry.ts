// One file (~610 lines), on purpose: PartitionEntry is one state machine
// (vouching / gap / rebuild) over one partition's hashes, and its append,
// expiry and lookups keep the vouch rule together: it vouches V only while
// it knows every in-window hash of (H, V]. The stores themselves
// (occurrenceTable.ts, presenceFilter.ts) are files of their own.

import { ENTRY_OVERHEAD_BYTES, HASH_BYTES, SKEW_SLACK_MS, UNIT_HASHES, UNIT_OVERHEAD_BYTES } from './constants.js';
import { OccurrenceTable } from './occurrenceTable.js';
import { foldCost, PresenceFilter } from './presenceFilter.js';

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
/**
 * Which store holds the entry's hashes: the occurrence table (exact keys
 * with their offsets, ~21.5 B a hash: a hit is named) or the presence
 * filter (~2.7 B a hash: a hit is only "maybe here", and that item is looked
 * up in PostgreSQL before the push, src/fusion/cacheWatermarks.ts).
 */
export type EntryTier = 'exact' | 'filter';
/** Why an entry waits for a rebuild; 'range': an offset too far above the table's base to store (after ~4.29 billion messages). */
export type RebuildReason = 'window' | 'overlap' | 'unknown' | 'range';

/**
 * A local hit named precisely: frame `index` of the segment has its hash's
 * key at each of `offsets` (ascending, distinct) among what the entry holds.
 */
export interface LocalHit {
  index: number;
  offsets: number[];
}

/** Counters a lookup feeds (the cache's stats object satisfies this). */
export interface LookupStats {
  localHits: number;
  localMisses: number;
}

/** Per maybe item, the span of offsets its in-window occurrences at or below V lie in (maybeItems). */
export interface ItemSpans {
  from: number[];
  to: number[];
}

/**
 * A run of consecutive appended hashes (the expiry unit, UNIT_HASHES of them
 * once closed): its last offset and the latest commit time among them.
 */
interface Unit {
  lastOffset: number;
  maxCreatedMs: number;
  count: number;
}

/** A filter generation no longer appended to: every hash it holds was added at an offset at or below `upto`. */
interface SealedFilter {
  filter: PresenceFilter;
  upto: number;
}

/**
 * What the broker knows about one partition's in-window hashes.
 *
 * Fields: windowSeconds (fixed for the entry's life; a change means a new
 * entry), verifiedUpto (V), hydratedFrom (H), the occurrence table (every
 * hash it was given, keyed by its first 8 bytes, with its offset), the expiry
 * units (which offset ranges are provably pre-window), and two flags.
 *
 * The vouch rule: the entry may vouch V ("no hash of the segment occurs at or
 * below V") only if it knows every in-window hash at offsets in (H, V] and
 * everything at or below H is pre-window (or below the purge watermark, where
 * SQL never looks). Then a segment whose hashes all miss the entry has no
 * in-window duplicate at or below V, and SQL may narrow its probe to
 * (V, last_offset].
 *
 * How the code keeps it: every hash of (H, V] went into the table at its
 * offset (hydrate() and append() only add; a hydrated row straddling the
 * purge watermark goes in whole, as SQL compares whole rows), the table
 * forgets an entry only once expiry has put its offset at or below H (the
 * table's floor follows H from then on), and a lookup answers
 * "absent" only when no live entry has the hash's first word, which every
 * occurrence of the hash has. So an absent answer is true over (H, V]. A
 * present answer may (with probability ~entries / 2^64) be another hash
 * sharing the first 8 bytes: it only costs a -1 or a name SQL refutes,
 * never a verdict (occurrenceTable.ts).
 *
 * A filter entry (tier 'filter') keeps the same fields and rules with a
 * presence filter as its store (presenceFilter.ts): every hash of (H, V]
 * goes in (hydrate and append only add, demote() adds every live key of
 * the table it replaces), and nothing is ever taken out, so "absent" is
 * still true over (H, V]. It names no offsets: an item it cannot clear
 * ("maybe") is reported by maybeItems(), and the caller finds its
 * occurrences in PostgreSQL before it vouches (the lookup's claim,
 * sql/functions/lookup.sql). Expiry still raises H; a filter just keeps
 * answering "maybe" for the expired hashes until it is rebuilt or its
 * generation is dropped (below), which costs lookups, never a verdict.
 *
 * A filter entry's store may be several generations (grow()): the filter
 * appends go to, and sealed ones, each sealed at the V of its sealing, so
 * every hash it holds sits at an offset at or below that V. "Maybe" is any
 * generation's maybe, so the union still holds every hash of (H, V]. A
 * sealed generation is dropped once expiry raises H to its V or above: all
 * its hashes are then at or below H, pre-window, which the vouch rule does
 * not ask the entry to know.
 *
 * States and transitions:
 * - vouching: born by hydrate() (entries are only born complete); stays
 *   vouching while append() sees base == V + 1 (the watermark advances over
 *   hashes it just added, so (H, V] stays fully known).
 * - gap: append() saw base > V + 1: another broker wrote (V, base - 1], which
 *   this entry never saw. Terminal: it answers -1 until replaced by a new
 *   hydration.
 * - rebuild: marked by the cache (window change, push outcome unknown), by
 *   append() seeing base <= V (an overlap: impossible under a monotone
 *   allocator, so the entry's picture is wrong) or an offset its table cannot
 *   store (range). Terminal, like gap, but the replacing hydration is gated
 *   by the memory policy.
 * - expire(now) runs in every state: it forgets whole pre-window units and
 *   raises H, which never makes a vouch unsound (below).
 */
export class PartitionEntry {
  readonly windowMs: number;
  /** Exactly one of the two stores is set, by tier (demote() swaps the table for a filter). */
  private exact: OccurrenceTable | undefined;
  private filter: PresenceFilter | undefined;
  /** Older filter generations, oldest (lowest upto) first; empty for an exact entry. */
  private sealed: SealedFilter[] = [];
  /** Hashes the filter appends go to was sized for (its fold load is at least this, however few it holds yet). */
  private plannedHashes = 0;
  tier: EntryTier;
  verifiedUpto: number;
  hydratedFrom: number;
  gap = false;
  rebuild = false;
  rebuildReason: RebuildReason | undefined;
  /** Last time (ms) a flush used this entry: LRU order and the recent-use eviction guard. */
  lastUsedMs = 0;
  /**
   * How long it was idle before its latest return (ms), -1 if it never
   * returned since it became resident: sizes its eviction guard
   * (ResidentSet). The flush that installs an entry uses it at once; that use
   * is not a return (installUsePending).
   */
  reuseGapMs = -1;
  installUsePending = false;
  /** Bytes last reported to the resident total (maintained by ResidentSet). */
  accountedBytes = 0;
  /** A filter entry asks for its promotion or refresh no earlier than this (ms; the cache's policy). */
  nextRetierMs = 0;
  /** The cache found no room for this filter entry's next generation (the cache's policy: it asks for a refresh instead). */
  growthRefused = false;
  /** Expiry units in offset order (= time order of appends); the last one may still be filling. */
  private readonly units: Unit[] = [];
  /** Units before this index are forgotten (a queue without shifting the array each time). */
  private unitHead = 0;
  /** Hashes in the remembered units. */
  private unitHashes = 0;

  private constructor(
    readonly windowSeconds: number,
    verifiedUpto: number,
    hydratedFrom: number,
    readonly hydratedAtMs: number,
    tableBase: number,
    expected: number,
    tier: EntryTier,
    filterBlocks: number,
  ) {
    this.tier = tier;
    this.windowMs = windowSeconds * 1000;
    this.verifiedUpto = verifiedUpto;
    this.hydratedFrom = hydratedFrom;
    // Nothing is dead at first: a kept row straddling txnsStart is known
    // whole, because SQL compares whole rows (a row ending above
    // txnsStart - 1 is probed in full). The floor rises only with expiry.
    if (tier === 'exact') this.exact = new OccurrenceTable(tableBase, expected);
    else {
      this.filter = new PresenceFilter(filterBlocks);
      this.plannedHashes = expected;
    }
  }

  /** The occurrence table of an exact entry (tests, bench). */
  get table(): OccurrenceTable {
    if (this.exact === undefined) throw new Error('a filter entry has no occurrence table');
    return this.exact;
  }
  /** The presence filter a filter entry appends to (its newest generation; tests, bench, the cache's overload test). */
  get presenceFilter(): PresenceFilter | undefined {
    return this.filter;
  }
  /** Filter generations (the one appended to included; 0 for an exact entry). */
  get filterGenerations(): number {
    return this.filter === undefined ? 0 : 1 + this.sealed.length;
  }
  /** Filter generations that set DENSE_K bits a hash (presenceFilter.ts; grown at full density). */
  get denseGenerations(): number {
    if (this.filter === undefined) return 0;
    let n = this.filter.k === PresenceFilter.DENSE_K ? 1 : 0;
    for (const g of this.sealed) if (g.filter.k === PresenceFilter.DENSE_K) n++;
    return n;
  }
  /** Entries in the store (dead ones not yet deleted included; a filter entry's: hashes added to its generations). */
  get storeSize(): number {
    if (this.exact !== undefined) return this.exact.size;
    let n = this.filter!.added;
    for (const g of this.sealed) n += g.filter.added;
    return n;
  }
  /** Blocks of a filter entry's generations (0 for an exact entry). */
  get filterBlocks(): number {
    if (this.filter === undefined) return 0;
    let n = this.filter.blocks;
    for (const g of this.sealed) n += g.filter.blocks;
    return n;
  }
  /** Pages of the store (a filter entry's: its 64-byte blocks). */
  get storePages(): number {
    return this.exact?.pages ?? this.filterBlocks;
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
   * probe or name), never a false "no duplicate".
   *
   * The table is sized for the kept hashes up front, and they go through the
   * same unit bookkeeping as live appends (units of exactly UNIT_HASHES).
   */
  static hydrate(
    windowSeconds: number,
    lastOffset: number,
    txnsStart: number,
    rows: readonly TxnRow[],
    fetchedAtMs: number,
    tier: EntryTier = 'exact',
    filterBlocks = 1,
  ): PartitionEntry {
    let prevEnd = -Infinity;
    let firstKept: number | undefined;
    let kept = 0;
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
      if (r.endOffset >= txnsStart) {
        firstKept ??= r.baseOffset;
        kept += n;
      }
    }
    const hydratedFrom = firstKept === undefined ? lastOffset : Math.max(firstKept - 1, txnsStart - 1);
    // Offsets are stored from the lowest one kept (or the next to be appended when none is).
    const e = new PartitionEntry(
      windowSeconds,
      lastOffset,
      hydratedFrom,
      fetchedAtMs,
      firstKept ?? lastOffset + 1,
      kept,
      tier,
      filterBlocks,
    );
    if (e.filter !== undefined) {
      for (const r of rows) {
        if (r.endOffset < txnsStart) continue;
        const n = r.endOffset - r.baseOffset + 1;
        e.addToStore(r.hashes, n, r.baseOffset);
        e.addUnits(n, r.baseOffset, r.createdMs);
      }
      return e;
    } // Keys and offsets gathered first, then inserted page by page (insertMany).
    const k0s = new Uint32Array(kept);
    const k1s = new Uint32Array(kept);
    const offsets = new Float64Array(kept);
    let at = 0;
    for (const r of rows) {
      if (r.endOffset < txnsStart) continue;
      if (!e.exact!.canHold(r.endOffset)) {
        // Not expected (a window spanning 2^32 offsets); the entry then never vouches.
        e.markRebuild('range');
        return e;
      }
      const n = r.endOffset - r.baseOffset + 1;
      const view = new DataView(r.hashes.buffer, r.hashes.byteOffset, n * HASH_BYTES);
      for (let i = 0; i < n; i++, at++) {
        k0s[at] = view.getUint32(i * HASH_BYTES);
        k1s[at] = view.getUint32(i * HASH_BYTES + 4);
        offsets[at] = r.baseOffset + i;
      }
      e.addUnits(n, r.baseOffset, r.createdMs);
    }
    e.exact!.insertMany(k0s, k1s, offsets, at);
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
   * - offsets the table cannot store: mark for rebuild (a new hydration
   *   starts a new base).
   * A gap or rebuild entry ignores appends: it is waiting to be replaced.
   */
  append(base: number, hashes: Buffer, count: number, createdMs: number): 'appended' | 'gap' | 'overlap' | 'range' | 'ignored' {
    if (this.gap || this.rebuild) return 'ignored';
    if (base === this.verifiedUpto + 1) {
      if (this.exact !== undefined && !this.exact.canHold(base + count - 1)) {
        this.markRebuild('range');
        return 'range';
      }
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

  /** Every hash into the table at its offset, and into the unit bookkeeping, in offset order. */
  private addHashes(hashes: Buffer, count: number, firstOffset: number, createdMs: number): void {
    if (hashes.length < count * HASH_BYTES)
      throw new RangeError(`dedup: ${count} hashes need ${count * HASH_BYTES} bytes, got ${hashes.length}`);
    this.addToStore(hashes, count, firstOffset);
    this.addUnits(count, firstOffset, createdMs);
  }

  /** count hashes (16 bytes each) into the store at firstOffset, firstOffset + 1, ... */
  private addToStore(hashes: Buffer, count: number, firstOffset: number): void {
    const view = new DataView(hashes.buffer, hashes.byteOffset, count * HASH_BYTES);
    if (this.exact !== undefined) {
      const table = this.exact;
      for (let i = 0; i < count; i++) table.insert(view.getUint32(i * HASH_BYTES), view.getUint32(i * HASH_BYTES + 4), firstOffset + i);
      return;
    }
    const filter = this.filter!;
    for (let i = 0; i < count; i++) filter.add(view.getUint32(i * HASH_BYTES), view.getUint32(i * HASH_BYTES + 4));
  }

  /** count offsets from firstOffset (committed at or before createdMs) into the unit bookkeeping, in offset order. */
  private addUnits(count: number, firstOffset: number, createdMs: number): void {
    let i = 0;
    while (i < count) {
      let u = this.units.length > this.unitHead ? this.units[this.units.length - 1] : undefined;
      if (u === undefined || u.count === UNIT_HASHES) {
        u = { lastOffset: firstOffset + i - 1, maxCreatedMs: createdMs, count: 0 };
        this.units.push(u);
      }
      const take = Math.min(count - i, UNIT_HASHES - u.count);
      u.count += take;
      u.lastOffset = firstOffset + i + take - 1;
      if (createdMs > u.maxCreatedMs) u.maxCreatedMs = createdMs;
      this.unitHashes += take;
      i += take;
    }
  }

  /**
   * Forgets what is provably pre-window at broker time nowMs. The cutoff is
   * nowMs - window - 5 s: a unit whose newest commit is before it was
   * committed more than a window before any later push's database clock, as
   * long as the broker's clock is at most 5 s ahead of the database's (a
   * constant offset the other way cancels: appended units carry broker times,
   * so their commit times and "now" shift together).
   *
   * Units are forgotten from the front while their latest commit is before
   * the cutoff (so the still-filling last unit only once every earlier one
   * went), and H rises to the last offset forgotten; the table's floor
   * follows H. Sound: the forgotten units hold all remaining offsets in
   * (H, new H] (units cover consecutive appended offsets, and offsets there
   * that were never added were pre-window or below the purge watermark at
   * hydration), and all of them are pre-window, so "everything at or below H
   * is pre-window" still holds, and every in-window hash sits above the floor.
   *
   * The table then deletes the dead entries a few pages at a time while
   * they are a large share of it (memory follows the window down).
   */
  expire(nowMs: number): void {
    const cutoff = nowMs - this.windowMs - SKEW_SLACK_MS;
    let dropped: number | undefined;
    while (this.unitHead < this.units.length && this.units[this.unitHead]!.maxCreatedMs < cutoff) {
      const u = this.units[this.unitHead++]!;
      this.unitHashes -= u.count;
      dropped = u.lastOffset;
    }
    if (this.unitHead > 64 && this.unitHead * 2 > this.units.length) {
      this.units.splice(0, this.unitHead);
      this.unitHead = 0;
    }
    if (dropped !== undefined && dropped > this.hydratedFrom) {
      this.hydratedFrom = dropped;
      this.exact?.raiseFloor(dropped);
      // Sealed generations whose every hash is now at or below H (entry
      // docblock): nothing in them is in the window any more.
      let k = 0;
      while (k < this.sealed.length && this.sealed[k]!.upto <= dropped) k++;
      if (k > 0) this.sealed.splice(0, k);
    }
    // Dead entries over half the table: sweep a few pages per call. (A
    // filter forgets only whole generations, above.)
    if (this.exact !== undefined && this.exact.size > 2 * this.unitHashes + UNIT_HASHES) this.exact.compact(4);
  }

  /**
   * True when any of the segment's hashes is a local hit (a live occurrence
   * of its key). Stops at the first hit (one is enough to route the segment
   * to SQL with -1).
   *
   * This is where the vouch rule's "knows every hash" is cashed in: every
   * in-window hash in (H, V] is a live table entry under its key, so a
   * segment with no hit has none of them.
   */
  anyLocalHit(hashes: Buffer, count: number, stats: LookupStats): boolean {
    const view = new DataView(hashes.buffer, hashes.byteOffset, count * HASH_BYTES);
    for (let i = 0; i < count; i++) {
      if (this.hasAt(view, i * HASH_BYTES)) {
        stats.localHits++;
        return true;
      }
      stats.localMisses++;
    }
    return false;
  }

  /**
   * Every local hit of the segment, each with every offset the entry holds
   * for its key, appended to `hits` in frame order (offsets ascending and
   * distinct). Every offset the table holds is representable (append and
   * hydrate refuse, and mark for rebuild, what canHold does not accept), so
   * a hit can always be named.
   *
   * Completeness over (H, V]: each in-window occurrence of the hash there is
   * a live entry under its key, so the names include it; a name of another
   * hash with the same 8-byte key is refuted by SQL's positional 16-byte
   * check.
   */
  collectHits(hashes: Buffer, count: number, stats: LookupStats, hits: LocalHit[]): void {
    const view = new DataView(hashes.buffer, hashes.byteOffset, count * HASH_BYTES);
    const table = this.exact;
    if (table === undefined) return;
    let found: number[] = [];
    for (let i = 0; i < count; i++) {
      const at = i * HASH_BYTES;
      const n = table.collect(view.getUint32(at), view.getUint32(at + 4), found);
      if (n === 0) {
        stats.localMisses++;
        continue;
      }
      stats.localHits++;
      if (n > 1) {
        found.sort((x, y) => x - y);
        let k = 0;
        for (let j = 0; j < found.length; j++) if (j === 0 || found[j] !== found[k - 1]) found[k++] = found[j]!;
        found.length = k;
      }
      hits.push({ index: i, offsets: found });
      found = [];
    }
  }

  /**
   * The items a filter entry cannot clear, appended to `out` in frame
   * order: those whose key the filter may hold. Every other item is absent
   * over (H, V] (the vouch rule; the filter has no false negatives). An
   * exact entry appends nothing: it names its hits (collectHits).
   *
   * With `spans`, each such item's span of offsets is appended to
   * spans.from and spans.to (aligned with `out`): every in-window
   * occurrence of it at or below V lies in [from, to] (Infinity: no upper
   * bound). Why: the generations hold the hashes of disjoint spans of
   * offsets. A sealed one holds only hashes added at or below the V it was
   * sealed at (grow), the next one only hashes appended above that V
   * (append requires base = V + 1), and the one appends go to everything
   * above the last seal. The oldest generation's span reaches down to H,
   * below which nothing is in the window (the vouch rule's floor): 0 then.
   * An occurrence at or below V was added to the generation whose span
   * holds it, which then answers "maybe" (no false negatives). So the
   * occurrences lie in the spans of the generations that answer "maybe",
   * between the start of the oldest of them and the end of the newest. The
   * lookup then reads only the runs overlapping that span, and skips the
   * tail when the span ends below it (sql/functions/lookup.sql).
   */
  maybeItems(hashes: Buffer, count: number, stats: LookupStats, out: number[], spans?: ItemSpans): void {
    if (this.filter === undefined) return;
    const view = new DataView(hashes.buffer, hashes.byteOffset, count * HASH_BYTES);
    for (let i = 0; i < count; i++) {
      const w0 = view.getUint32(i * HASH_BYTES);
      const w1 = view.getUint32(i * HASH_BYTES + 4);
      if (!this.filtersMayHave(w0, w1)) {
        stats.localMisses++;
        continue;
      }
      stats.localHits++;
      out.push(i);
      if (spans !== undefined) this.spanOf(w0, w1, spans);
    }
  }

  /**
   * Appends the span of the key (w0, w1), which some generation may hold
   * (maybeItems says why it is sound): from the start of the oldest
   * generation that answers "maybe" to the end of the newest one.
   */
  private spanOf(w0: number, w1: number, spans: ItemSpans): void {
    const gens = this.sealed;
    let from = -1;
    let to = -1;
    for (let k = 0; k < gens.length; k++) {
      if (!gens[k]!.filter.mayHave(w0, w1)) continue;
      if (from < 0) from = k === 0 ? 0 : gens[k - 1]!.upto + 1;
      to = gens[k]!.upto;
    }
    if (this.filter!.mayHave(w0, w1)) {
      if (from < 0) from = gens.length === 0 ? 0 : gens[gens.length - 1]!.upto + 1;
      to = Infinity;
    }
    spans.from.push(Math.max(0, from));
    spans.to.push(to < 0 ? Infinity : to);
  }

  /** Whether any filter generation may hold the key (w0, w1). */
  private filtersMayHave(w0: number, w1: number): boolean {
    if (this.filter!.mayHave(w0, w1)) return true;
    for (const g of this.sealed) if (g.filter.mayHave(w0, w1)) return true;
    return false;
  }

  /**
   * Turns an exact entry into a filter entry of `blocks` blocks, in place:
   * every live key of the table goes into the filter, then the table is
   * dropped. Every in-window hash of (H, V] has a live table entry under its
   * key (the vouch rule), so the filter holds it: the entry still vouches by
   * the same rule, with the table's names traded for "maybe". V, H, the
   * units and the state are untouched. No PostgreSQL read: this is how the
   * cache frees memory without leaving a partition to the cold path.
   */
  demote(blocks: number): void {
    const table = this.exact;
    if (table === undefined) return;
    const filter = new PresenceFilter(blocks);
    table.forEachLiveKey((k0, k1) => filter.add(k0, k1));
    this.filter = filter;
    this.plannedHashes = filter.added;
    this.exact = undefined;
    this.tier = 'filter';
  }

  /**
   * Seals a filter entry's filter at V and appends to a new one of `blocks`
   * blocks, sized for `plannedHashes`, from now on. No PostgreSQL read.
   * Sound: every hash the sealed filter holds was added at an offset at or
   * below V (hydrate adds rows up to the snapshot's last offset, append up
   * to the V it sets, demote the table's live keys, all at or below V), and
   * every later append goes to the new one; maybe is the union (entry
   * docblock). `k`: the bits the new generation sets a hash
   * (presenceFilter.ts, K or DENSE_K).
   */
  grow(blocks: number, plannedHashes: number, k: number = PresenceFilter.K): void {
    if (this.filter === undefined) throw new Error('an exact entry has no filter to grow');
    this.sealed.push({ filter: this.filter, upto: this.verifiedUpto });
    this.filter = new PresenceFilter(blocks, undefined, k);
    this.plannedHashes = plannedHashes;
  }

  /**
   * Bits a hash of its load of the densest filter generation that can
   * still fold: whether the entry may fold at all at the cache's threshold,
   * and the bound that spares the cache a scan (cache.ts, foldToFree); 0 for an
   * exact entry, or when none can fold (an odd block count: a small
   * partition's filter of a few blocks often is).
   */
  get densestBits(): number {
    let best = 0;
    for (const [f, load] of this.generationLoads()) if (f.canFold) best = Math.max(best, (f.blocks * 512) / Math.max(1, load));
    return best;
  }

  /**
   * Halves the filter generation whose fold is cheapest (presenceFilter.ts,
   * foldCost: for generations of one k the densest) among those that can
   * fold and have at least `bitsPerHash` bits a hash of their load, once;
   * returns the bytes freed (0: no fold). A fold keeps every hash the
   * generation held (presenceFilter.ts, fold).
   */
  foldCheapest(bitsPerHash: number): number {
    const [best] = this.cheapestFold(bitsPerHash);
    if (best === undefined) return 0;
    const before = best.bytes;
    return best.fold() ? before - best.bytes : 0;
  }

  /** The price of what foldCheapest(bitsPerHash) would fold; Infinity when nothing may. */
  cheapestFoldCost(bitsPerHash: number): number {
    return this.cheapestFold(bitsPerHash)[1];
  }

  private cheapestFold(bitsPerHash: number): [PresenceFilter | undefined, number] {
    let best: PresenceFilter | undefined;
    let bestCost = Infinity;
    for (const [f, load] of this.generationLoads()) {
      const bits = (f.blocks * 512) / Math.max(1, load);
      if (!f.canFold || bits < bitsPerHash) continue;
      const cost = foldCost(bits, f.k);
      if (cost < bestCost) [best, bestCost] = [f, cost];
    }
    return [best, bestCost];
  }

  /** Each filter generation, oldest first: bits a hash of its fold load, and the bits it sets a hash (tests, diagnostics). */
  generationShapes(): { bitsPerHash: number; k: number }[] {
    return [...this.generationLoads()].map(([f, load]) => ({ bitsPerHash: (f.blocks * 512) / Math.max(1, load), k: f.k }));
  }

  /** Each filter generation with its fold load: what it holds, or, for the one appended to, what it was sized for if more. */
  private *generationLoads(): Generator<[PresenceFilter, number]> {
    for (const g of this.sealed) yield [g.filter, g.filter.added];
    if (this.filter !== undefined) yield [this.filter, Math.max(this.filter.added, this.plannedHashes)];
  }

  /** Whether the entry holds a live occurrence of the hash's key (tests, bench). */
  knows(hash: Buffer, at = 0): boolean {
    return this.hasAt(new DataView(hash.buffer, hash.byteOffset, hash.length), at);
  }

  /** Whether the store names anything for the 16-byte hash at `at` of view. */
  private hasAt(view: DataView, at: number): boolean {
    if (this.exact !== undefined) return this.exact.has(view.getUint32(at), view.getUint32(at + 4));
    return this.filtersMayHave(view.getUint32(at), view.getUint32(at + 4));
  }

  /** Units remembered: closed ones, and the hashes of the one still filling (0 when the last is closed). */
  get unitCount(): number {
    return this.units.length - this.unitHead;
  }
  get openUnitHashes(): number {
    const u = this.units.length > this.unitHead ? this.units[this.units.length - 1]! : undefined;
    return u === undefined || u.count === UNIT_HASHES ? 0 : u.count;
  }

  get bytes(): number {
    let store = this.exact?.bytes ?? this.filter!.bytes;
    for (const g of this.sealed) store += g.filter.bytes;
    return ENTRY_OVERHEAD_BYTES + store + (this.units.length - this.unitHead) * UNIT_OVERHEAD_BYTES;
  }
  /** Hashes in the remembered units (what the entry covers; the table may still hold dead ones). */
  get hashCount(): number {
    return this.unitHashes;
  }
}
