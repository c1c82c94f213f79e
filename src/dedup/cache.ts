// One file (~870 lines), on purpose: DedupCache is the cache's one policy
// object. prepare / admitRebuild / install / vouch / recordAppend and the
// memory cap (evict, suppress, enforceCap) read and change the same resident
// set and reservations, and the "never vouch wrongly" argument runs across
// them. The per-partition structures (entry.ts), admission (admission.ts)
// and the resident set (residentSet.ts) are already files of their own.

import {
  FILTER_BITS_PER_HASH,
  FILTER_DENSITY_STEP,
  FILTER_GENERATION_SHARE,
  FILTER_GROWTH,
  FILTER_MAX_GENERATIONS,
  FILTER_MIN_BITS_PER_HASH,
  FILTER_RELAX_FRACTION,
  HASH_BYTES,
  NO_ROOM_MEMO_MS,
  PROMOTE_FRACTION,
  PROMOTE_INTERVAL_MS,
} from './constants.js';
import { AdmissionPolicy, estimateFilterFootprintBytes, estimateFootprintBytes } from './admission.js';
import { PresenceFilter } from './presenceFilter.js';
import { PartitionEntry, type EntryTier, type ItemSpans, type LocalHit, type TxnRow } from './entry.js';
import { ResidentSet } from './residentSet.js';

export type { LocalHit, TxnRow } from './entry.js';

/**
 * What the cache can say for one segment: the vouched watermark (-1 = cannot
 * vouch) and, when it vouches, every local hit with every offset it holds for
 * it. The hits are hints: SQL verifies each offset positionally; they never
 * decide a verdict.
 *
 * A filter entry names nothing: its "maybe" items come back in `maybe`
 * (frame indexes, ascending), and the vouch holds for the other items only.
 * The caller must find every occurrence of each maybe item at or below
 * `verified` (src/fusion/cacheWatermarks.ts does it with one lookup per
 * bundle, sql/functions/lookup.sql) and name them, or send -1.
 */
export interface HintedVouch {
  verified: number;
  hits: LocalHit[];
  maybe: number[];
  /**
   * Aligned with `maybe` (absent when it is empty): the span of offsets
   * where each maybe item's in-window occurrences at or below `verified`
   * lie (entry.ts, maybeItems), for the lookup to search only there.
   */
  spans?: ItemSpans;
}

/** An append reported while the partition's window was being fetched (install() replays it). */
interface BufferedAppend {
  base: number;
  hashes: Buffer;
  count: number;
  createdMs: number;
}

/** The fewest hashes a new filter generation is sized for (a few blocks: a small partition's generations stay small). */
const MIN_GENERATION_HASHES = 64;

const NO_HITS: LocalHit[] = [];
const NO_MAYBE: number[] = [];

export interface DedupCacheOptions {
  /** QUEEN_DEDUP_CACHE_MB x 2^20. */
  capBytes: number;
  /** ms clock, default Date.now. */
  now?: () => number;
  /** Called on suppression, at most once per minute (per cache instance). */
  onWarn?: (message: string) => void;
  /**
   * Called with a partition's id when its entry is evicted: from then on its
   * pushes are probed (-1), which the write path makes cheap by compacting
   * the partition (src/compaction) before its tail grows long.
   */
  onEvict?: (partitionId: number) => void;
  /** Called with a partition's id when its exact entry is demoted to a filter (its maybe items are looked up from then on). */
  onDemote?: (partitionId: number) => void;
  /**
   * A partition whose rebuild the exact tier cannot admit gets a filter
   * entry (presenceFilter.ts, ~2.7 B a hash at the default density) instead of being suppressed, and
   * an exact entry the budget cannot keep is demoted to one rather than
   * evicted. Default true; false is the cache before the filter tier
   * (exact or suppressed), kept for benchmarks and tests.
   */
  filterTier?: boolean;
}

export type PrepareAnswer = 'ready' | 'hydrate' | 'suppressed';

export interface DedupCacheStats {
  /** Entries installed (full-window hydrations). */
  hydrations: number;
  /** Rebuilds refused by the fit test (each starts a 30 s cooldown). */
  suppressions: number;
  /** Entries evicted to admit a rebuild or to stay under the cap. */
  evictions: number;
  /** Entries installed as filters (included in hydrations). */
  filterInstalls: number;
  /** Exact entries turned into filter entries to free memory. */
  demotions: number;
  /** Filters halved to free memory. */
  folds: number;
  /** Filter generations opened for appends instead of a refetch (entry.ts, grow). */
  filterGrowths: number;
  /** Sealed filter generations dropped because expiry passed every hash they hold. */
  filterGenerationsExpired: number;
  /** Items a filter entry could not clear (each needs a lookup). */
  maybeItems: number;
  /** Of those, items no generation appends go to may hold: their lookup ends below the newest offsets (entry.ts, maybeItems). */
  maybeBelowOpen: number;
  /** Hashes checked that have a live occurrence of their key in the entry. */
  localHits: number;
  /** Hashes checked that have none. */
  localMisses: number;
  /** Vouches that carried hints (local hits named with their offsets). */
  hinted: number;
  /** verifiedFor answers != -1 / == -1. */
  vouched: number;
  notVouched: number;
  /** Interleave gaps recorded. */
  gaps: number;
  /** Entries marked for full rebuild (window change, overlap, unknown push outcome). */
  rebuildsMarked: number;
  /** Walks of the resident set for eviction victims by an exact admission (fits); a walk that finds none is kept until a guard it passed runs out, for less than NO_ROOM_MEMO_MS. */
  victimScans: number;
}

export interface EntryInfo {
  verifiedUpto: number;
  hydratedFrom: number;
  windowSeconds: number;
  state: string;
  tier: EntryTier;
  /** Expiry units remembered (runs of UNIT_HASHES appended hashes), and the hashes of the one still filling. */
  units: number;
  openUnitHashes: number;
  /** Pages of the entry's store (occurrence table pages, or a filter entry's 64-byte blocks over its generations). */
  pages: number;
  /** Filter generations (0 for an exact entry). */
  generations: number;
  /** Of those, the ones setting DENSE_K bits a hash (grown at full density: growFilter). */
  denseGenerations: number;
  bytes: number;
  /** In-window hashes the entry knows (its expiry units'): a filter's bits a hash are pages x 512 over this. */
  hashes: number;
}

/**
 * The broker dedup cache. Its one load-bearing output is verifiedFor(): the
 * p_verified watermark for a segment, where -1 ("cannot vouch", probe the
 * whole window) is always sound. Everything else is policy about when an
 * entry may vouch and which entries stay resident.
 *
 * Per partition (pid), the cache is in one of these states:
 * - absent: no entry, no cooldown. prepare -> 'hydrate'; verifiedFor -> -1.
 * - vouching entry: prepare -> 'ready'; verifiedFor -> V unless a local hit.
 * - gap entry (another broker interleaved): verifiedFor -> -1; prepare ->
 *   'hydrate', and the rebuild is a cheap admission (its footprint is already
 *   resident and the rebuild replaces it): always admitted, never gated.
 * - rebuild entry (window change, overlap, unknown outcome): verifiedFor ->
 *   -1; prepare -> 'hydrate' (or 'suppressed' during a cooldown); its rebuild
 *   goes through the fit test. Sticky: only an install replaces it.
 * - suppressed (cooldown deadline, no entry): prepare -> 'suppressed' until
 *   the deadline; then absent again.
 * - dedup off (window 0): the entry is dropped; prepare -> 'suppressed'
 *   (not counted as a suppression); verifiedFor -> -1.
 * A vouching entry is exact or filter (its tier): admitRebuild chooses,
 * install builds that tier; both vouch by the same rule. A filter entry
 * whose appends overload its filter grows a generation in place
 * (recordAppend), up to FILTER_MAX_GENERATIONS. A vouching filter
 * entry answers prepare -> 'hydrate' every PROMOTE_INTERVAL_MS at most when
 * it would fit as exact again (promotion) or its filter is overloaded with
 * no generation left to grow (refresh); a refused one stays as it is.
 * Transitions: install() makes any state a vouching entry (clearing the
 * cooldown); recordAppend() moves vouching to gap or rebuild; recordUnknown()
 * and a window change move to rebuild; a failed admitRebuild() moves to
 * suppressed (dropping a stale entry), except for a vouching filter entry,
 * which stays; memory pressure demotes exact entries to filter entries and
 * folds filters (fitFilter, enforceCap); eviction moves to absent.
 *
 * Why no state change can make a vouch unsound: see entry.ts (vouch rule,
 * hydration, expiry, demotion). The memory policy only ever removes entries,
 * refuses to build them, or trades a store for one that holds at least the
 * same hashes (demote, fold), and an absent entry answers -1.
 */
export class DedupCache {
  readonly stats: DedupCacheStats = {
    hydrations: 0,
    filterInstalls: 0,
    demotions: 0,
    folds: 0,
    filterGrowths: 0,
    filterGenerationsExpired: 0,
    maybeItems: 0,
    maybeBelowOpen: 0,
    suppressions: 0,
    evictions: 0,
    localHits: 0,
    localMisses: 0,
    hinted: 0,
    vouched: 0,
    notVouched: 0,
    gaps: 0,
    rebuildsMarked: 0,
    victimScans: 0,
  };

  private readonly capBytes: number;
  private readonly now: () => number;
  private readonly resident = new ResidentSet();
  private readonly policy: AdmissionPolicy;
  private readonly inFlight = new Set<number>();
  /**
   * Partitions whose window is being fetched outside their flushes
   * (beginFetch .. install or endFetch), with every append reported
   * meanwhile: install() replays those the snapshot does not hold.
   */
  private readonly fetching = new Map<number, { appends: BufferedAppend[]; unknown: boolean }>();
  private readonly filterTier: boolean;
  private readonly onEvict: ((partitionId: number) => void) | undefined;
  private readonly onDemote: ((partitionId: number) => void) | undefined;
  /**
   * The tier (and a filter's blocks) each admitted rebuild was admitted for,
   * with the hashes it was estimated at, until its install (absent: exact).
   */
  private readonly admitted = new Map<number, { tier: EntryTier; blocks: number; hashes: number }>();
  /**
   * Bits a hash that filters are built with now: FILTER_BITS_PER_HASH,
   * lowered under memory pressure by FILTER_DENSITY_STEP at a time (down to
   * FILTER_MIN_BITS_PER_HASH), raised again a step at a time while the
   * budget is less than half used.
   */
  private filterBits = FILTER_BITS_PER_HASH;
  /** No resident filter generation has more bits a hash of its load than this (foldToFree skips its scan above it); Infinity: not known. */
  private densestBound = Infinity;
  /** Until then hasRoomFor answers no without a scan for noRoomBytes and more (0: no memo). */
  private noRoomUntilMs = 0;
  private noRoomBytes = Infinity;
  /** While now <= this, fits finds no victims for noVictimBytes of excess and more without a scan (0: no memo). */
  private noVictimsUntilMs = 0;
  private noVictimBytes = Infinity;

  constructor(opts: DedupCacheOptions) {
    if (!(opts.capBytes >= 0)) throw new RangeError('DedupCache: capBytes must be >= 0');
    this.capBytes = opts.capBytes;
    this.filterTier = opts.filterTier ?? true;
    this.onEvict = opts.onEvict;
    this.onDemote = opts.onDemote;
    this.now = opts.now ?? Date.now;
    this.policy = new AdmissionPolicy(opts.capBytes, this.now, opts.onWarn);
  }

  /** Single-flight guard: the batching layer flushes a partition at most once at a time. */
  beginFlush(pid: number): void {
    if (this.inFlight.has(pid)) throw new Error(`dedup cache: partition ${pid} is already being flushed (single-flight violated)`);
    this.inFlight.add(pid);
  }
  endFlush(pid: number): void {
    this.inFlight.delete(pid);
    // An admission made for a fetch still under way keeps its reservation.
    if (this.fetching.has(pid)) return;
    this.policy.release(pid);
    this.admitted.delete(pid);
  }

  /** Whether a flush of pid is between beginFlush and endFlush. */
  isFlushing(pid: number): boolean {
    return this.inFlight.has(pid);
  }

  /**
   * pid's window is about to be fetched outside its flushes (a background
   * build, src/fusion/cacheWatermarks.ts). From now until install() or
   * endFetch(), every append reported for pid is also kept, so the install
   * can add those the snapshot missed, and an admission made for the fetch
   * keeps its reservation across flushes. The snapshot is read in one
   * transaction: a push reported here committed either before it (its
   * offsets are at or below the snapshot's lastOffset, and in it) or after
   * it (all above), since a segment's offsets commit together.
   */
  beginFetch(pid: number): void {
    if (!this.fetching.has(pid)) this.fetching.set(pid, { appends: [], unknown: false });
  }
  /** The fetch of pid ended without an install (refused, failed): its admission is void. */
  endFetch(pid: number): void {
    if (!this.fetching.delete(pid)) return;
    this.policy.release(pid);
    this.admitted.delete(pid);
  }
  isFetching(pid: number): boolean {
    return this.fetching.has(pid);
  }
  /** Whether pid has a resident entry that can vouch now (no state change, no use recorded). */
  hasVouchingEntry(pid: number): boolean {
    return this.resident.get(pid)?.canVouch ?? false;
  }

  /**
   * Before a push: should this flush (re)hydrate pid first? windowSeconds is
   * the window as the caller knows it; a change against the entry's window
   * marks the entry for rebuild, and that mark stays until an install
   * replaces the entry (expiry bookkeeping was computed under the old window).
   *
   * A vouch is sound relative to the window passed here. A window that grew
   * in SQL but is not yet known to the caller (the 30 s metadata memo) lets
   * an entry vouch under the smaller window until the caller learns it: the
   * bound the seed accepts for /configure changes. A shrink is always safe
   * (the entry then knows a superset).
   */
  prepare(pid: number, windowSeconds: number): PrepareAnswer {
    const now = this.now();
    // A new flush of pid: a reservation left by an earlier admission whose
    // install never came (fetch failed) is void, and so is its tier; one
    // made for a fetch still under way is not.
    if (!this.fetching.has(pid)) {
      this.policy.release(pid);
      this.admitted.delete(pid);
    }
    if (!(windowSeconds > 0)) {
      this.drop(pid);
      return 'suppressed';
    }
    const e = this.resident.get(pid);
    if (e !== undefined) {
      if (e.windowSeconds !== windowSeconds && !e.rebuild) {
        e.markRebuild('window');
        this.stats.rebuildsMarked++;
      }
      if (!e.rebuild) {
        if (e.gap) return 'hydrate';
        // A filter entry asks to be rebuilt when it can become exact again
        // or its filter is overloaded with no generation left to grow;
        // admitRebuild decides (and keeps it as it is when neither fits).
        if (e.tier === 'filter' && now >= e.nextRetierMs && (this.promotionFits(pid, e) || this.needsRefresh(e))) return 'hydrate';
        return 'ready';
      }
    }
    if (this.policy.inCooldown(pid, now)) return 'suppressed';
    // A partition without an entry is tested (its window fetched: a
    // transaction of four round trips before the fit test) only if the
    // cache could admit it: at
    // the size it was refused with, or, never refused (or forgotten), as an
    // empty entry. Under a round-robin over far more partitions than fit
    // (100 k partitions), fetches spent on refusals were most of a broker's
    // work. A partition turned away here is looked up like any suppressed
    // one (an empty partition's lookup reads nothing).
    const refused = this.policy.refusedHashes(pid);
    if (e === undefined && !this.hasRoomFor(pid, this.smallestFootprint(pid, refused ?? 0), now)) {
      this.suppress(pid, now, refused ?? 0, this.policy.footprint(pid, refused ?? 0), this.resident.totalBytes);
      return 'suppressed';
    }
    return 'hydrate';
  }

  /** The fewest bytes an entry of pid with `hashes` hashes can be admitted with: a filter at the floor density, or (without the tier) its exact footprint. */
  private smallestFootprint(pid: number, hashes: number): number {
    if (!this.filterTier) return this.policy.footprint(pid, hashes);
    return estimateFilterFootprintBytes(PresenceFilter.blocksFor(hashes * (1 + FILTER_GROWTH), FILTER_MIN_BITS_PER_HASH), hashes);
  }

  /**
   * Whether an entry of `need` bytes could be admitted: free budget for it,
   * an exact entry to demote, a filter density left to lower, a filter that
   * may fold (by densestBound, an upper bound: at worst one fetch more), or
   * entries evictable now. A 'no' is kept for up to NO_ROOM_MEMO_MS for this size
   * and larger (a victim scan walks the resident set), and forgotten when
   * an entry leaves. Policy only: a refused partition vouches -1 and is
   * looked up, which is always sound.
   */
  private hasRoomFor(pid: number, need: number, now: number): boolean {
    const memo = now < this.noRoomUntilMs;
    if (memo && need >= this.noRoomBytes) return false;
    const free = this.policy.budgetBytes - this.resident.totalBytes - this.policy.reservedExcept(pid, now);
    const room =
      free >= need ||
      (this.filterTier &&
        (this.resident.exactCount > 0 ||
          this.filterBits > FILTER_MIN_BITS_PER_HASH ||
          2 * (1 + FILTER_GROWTH) * this.filterBits <= this.densestBound)) ||
      'pids' in this.resident.victims(need - free, now, pid);
    if (!room) {
      this.noRoomBytes = memo ? Math.min(this.noRoomBytes, need) : need;
      if (!memo) this.noRoomUntilMs = now + NO_ROOM_MEMO_MS;
    }
    return room;
  }

  /** Whether a filter entry's hashes would fit as an exact entry under PROMOTE_FRACTION of the budget, evicting no one. */
  private promotionFits(pid: number, e: PartitionEntry): boolean {
    const need = estimateFootprintBytes(e.hashCount);
    const others = this.resident.totalBytes - e.accountedBytes + this.policy.reservedExcept(pid, this.now());
    return others + need <= PROMOTE_FRACTION * this.policy.budgetBytes;
  }

  /** Whether the filter a filter entry appends to holds fewer bits per hash added than filters are built with now (its false positives have grown). */
  private filterOverloaded(e: PartitionEntry): boolean {
    const f = e.presenceFilter;
    return f !== undefined && f.added * this.filterBits > f.blocks * 512;
  }

  /** An overloaded filter entry that can grow no more generations: only a rebuild from its window (a refresh) brings its false positives back down. */
  private needsRefresh(e: PartitionEntry): boolean {
    return (e.filterGenerations >= FILTER_MAX_GENERATIONS || e.growthRefused) && this.filterOverloaded(e);
  }

  /**
   * A new generation for an overloaded filter entry's appends, sized for
   * FILTER_GENERATION_SHARE of its in-window hashes at the current density
   * (constants.ts: why, and why not a refetch).
   *
   * Its bytes should fit under the admission budget (the cap's 90 %, room
   * left for the expiry units appends add) as built, and room is made the
   * way fitFilter makes it, without folding: the least recently used exact
   * entry is demoted first, then new filters are built a step sparser, as
   * long as some density down to the floor would fit. Past the cap,
   * enforceCap can only free memory by folding, and a fold halves a filter,
   * so nothing built at the current density folds until that density has
   * fallen by more than half: in the defaults soak, generations grown past
   * the cap lowered it from 16 to ~6 bits a hash in one go, halved most
   * filters, and five times as many items were looked up. When no density
   * fits, the entry does not grow (false): it stays as it is, vouching, and
   * asks for a refresh like a filter with no generation left, whose
   * admission decides (growing past the cap would evict: at 2 000
   * partitions in 2 MB it evicted 622 entries in the measured passes,
   * against none). A budget less than half used raises the density a
   * step, as fitFilter does.
   *
   * A generation grown at the full density (FILTER_BITS_PER_HASH: the cache
   * has not had to build sparser) sets DENSE_K bits a hash instead of K,
   * about half the false positives at that density (presenceFilter.ts).
   * Every generation of an entry adds its false positives to the entry's,
   * and in the defaults soak an entry demoted early holds most of its
   * window in three or four grown generations, each read for every item.
   * Demotions and filter admissions keep K: they are built because memory
   * is already short, so more folds are likely to follow (a DENSE_K filter
   * folded twice has more false positives than a K one). A grown DENSE_K
   * generation may still be folded later, when memory runs short after it
   * was grown: that costs false positives, never a verdict, and below about
   * 19 bits a hash foldToFree folds it after K generations as dense
   * (presenceFilter.ts, foldCost).
   */
  private growFilter(pid: number, e: PartitionEntry): boolean {
    const planned = Math.max(MIN_GENERATION_HASHES, Math.ceil(e.hashCount * FILTER_GENERATION_SHARE));
    const budget = this.policy.budgetBytes;
    if (this.filterBits < FILTER_BITS_PER_HASH && this.resident.totalBytes < FILTER_RELAX_FRACTION * budget) {
      this.filterBits = Math.min(FILTER_BITS_PER_HASH, this.filterBits / FILTER_DENSITY_STEP);
    }
    const floorBytes = PresenceFilter.bytesFor(PresenceFilter.blocksFor(planned, FILTER_MIN_BITS_PER_HASH));
    let blocks = PresenceFilter.blocksFor(planned, this.filterBits);
    while (this.resident.totalBytes + PresenceFilter.bytesFor(blocks) > budget) {
      const v = this.resident.lruExact(pid);
      if (v !== undefined) {
        this.demote(v);
        continue;
      }
      if (this.filterBits <= FILTER_MIN_BITS_PER_HASH || this.resident.totalBytes + floorBytes > budget) return false;
      this.filterBits = Math.max(FILTER_MIN_BITS_PER_HASH, this.filterBits * FILTER_DENSITY_STEP);
      blocks = PresenceFilter.blocksFor(planned, this.filterBits);
    }
    e.grow(blocks, planned, this.filterBits >= FILTER_BITS_PER_HASH ? PresenceFilter.DENSE_K : PresenceFilter.K);
    this.noteDensity(e);
    this.stats.filterGrowths++;
    return true;
  }

  /**
   * Admission gate for a full rehydration of pid estimated at estimatedHashes
   * (an upper bound; our last measured footprint is used when smaller).
   *
   * - Cheap admissions are always allowed and never gated: a resident entry
   *   that is vouching (nothing to rebuild) or has only an interleave gap (a
   *   rebuild replaces bytes that are already resident).
   * - Brand-new partitions (estimate 0: an empty window) are always admitted.
   * - Otherwise: admitted iff (resident bytes except pid's own) + (bytes
   *   reserved by other admitted, not yet installed rebuilds) + estimate
   *   <= 90% of the cap, after evicting least recently used entries whose
   *   recent-use guard has run out (residentSet.ts, guardMs: at least 5 s,
   *   longer for an entry that returns on a slower rhythm or has not
   *   returned yet). Victims are chosen first and evicted only
   *   if they make the rebuild fit: a partial eviction would destroy useful
   *   entries and admit nobody. The 10% headroom is the hysteresis: an
   *   admission never lands so close to the cap that the next growth evicts
   *   the set it just joined, so the cache settles into a stable resident set
   *   plus suppressed overflow instead of ping-pong.
   * - Refused: pid is suppressed for 30 s (its stale entry, if any, is dropped
   *   and its size kept as the footprint hint), counted, and warned about at
   *   most once a minute.
   * A partition serving a cooldown is not re-tested (returns false).
   */
  admitRebuild(pid: number, estimatedHashes: number): boolean {
    const now = this.now();
    const e = this.resident.get(pid);
    this.admitted.delete(pid);
    if (e !== undefined && !e.rebuild) {
      if (e.gap) {
        // Cheap: the rebuild replaces bytes already resident, in the same tier and size.
        if (e.tier === 'filter') this.admitted.set(pid, { tier: 'filter', blocks: e.filterBlocks, hashes: estimatedHashes });
        return true;
      }
      // A vouching filter entry: promotion, or a refresh of its filter. A
      // refusal keeps it as it is (it still vouches) until the next try.
      e.nextRetierMs = now + PROMOTE_INTERVAL_MS;
      const estimate = estimateFootprintBytes(estimatedHashes);
      const others = this.resident.totalBytes - e.accountedBytes + this.policy.reservedExcept(pid, now);
      if (others + estimate <= PROMOTE_FRACTION * this.policy.budgetBytes) {
        this.admitted.set(pid, { tier: 'exact', blocks: 0, hashes: estimatedHashes });
        this.policy.reserve(pid, estimate, now);
        return true;
      }
      if (!this.needsRefresh(e)) return false;
      const blocks = this.fitFilter(pid, estimatedHashes, now);
      if (blocks === undefined) return false;
      this.admitted.set(pid, { tier: 'filter', blocks, hashes: estimatedHashes });
      this.policy.reserve(pid, estimateFilterFootprintBytes(blocks, estimatedHashes), now);
      return true;
    }
    if (this.policy.inCooldown(pid, now)) return false;
    if (!(estimatedHashes > 0)) return true;
    const estimate = this.policy.footprint(pid, estimatedHashes);
    const others = this.resident.totalBytes - (e?.accountedBytes ?? 0) + this.policy.reservedExcept(pid, now);
    if (this.fits(pid, others + estimate, now)) {
      this.admitted.set(pid, { tier: 'exact', blocks: 0, hashes: estimatedHashes });
      this.policy.reserve(pid, estimate, now);
      return true;
    }
    if (this.filterTier) {
      const blocks = this.fitFilter(pid, estimatedHashes, now);
      if (blocks !== undefined) {
        this.admitted.set(pid, { tier: 'filter', blocks, hashes: estimatedHashes });
        this.policy.reserve(pid, estimateFilterFootprintBytes(blocks, estimatedHashes), now);
        return true;
      }
    }
    this.suppress(pid, now, estimatedHashes, estimate, others);
    return false;
  }

  /**
   * The blocks of a filter for pid's `hashes` hashes that fit the admission
   * budget, making room first, coverage before names:
   * 1. demote the least recently used exact entry (any, however recently
   *    used: it keeps vouching as a filter, it only stops naming offsets);
   * 2. turn a rebuild admitted as exact but not installed yet (its window
   *    still being fetched) into a filter rebuild, with a filter's
   *    reservation;
   * 3. once neither is left, fold the filters that may fold, cheapest first, as
   *    many as the room asks for (foldToFree);
   * 4. when none may, lower the bits a hash filters are built with by a
   *    step (which lets denser ones fold), down to FILTER_MIN_BITS_PER_HASH;
   * undefined when even that cannot make room (the caller suppresses pid).
   * Nothing here can change a verdict: a demoted or folded entry still
   * holds every hash it held (entry.ts, demote; presenceFilter.ts, fold).
   */
  private fitFilter(pid: number, hashes: number, now: number): number | undefined {
    if (
      this.filterBits < FILTER_BITS_PER_HASH &&
      this.resident.totalBytes + this.policy.reservedExcept(pid, now) < FILTER_RELAX_FRACTION * this.policy.budgetBytes
    ) {
      this.filterBits = Math.min(FILTER_BITS_PER_HASH, this.filterBits / FILTER_DENSITY_STEP);
    }
    for (;;) {
      const blocks = PresenceFilter.blocksFor(hashes * (1 + FILTER_GROWTH), this.filterBits);
      const own = this.resident.get(pid)?.accountedBytes ?? 0;
      const reserved = this.policy.reservedExcept(pid, now);
      if (this.resident.totalBytes - own + reserved + estimateFilterFootprintBytes(blocks, hashes) <= this.policy.budgetBytes)
        return blocks;
      const v = this.resident.lruExact(pid);
      if (v !== undefined) {
        this.demote(v);
        continue;
      }
      const pending = this.pendingExact(pid);
      if (pending !== undefined) {
        const a = this.admitted.get(pending)!;
        const b = PresenceFilter.blocksFor(a.hashes * (1 + FILTER_GROWTH), this.filterBits);
        this.admitted.set(pending, { tier: 'filter', blocks: b, hashes: a.hashes });
        this.policy.reserve(pending, estimateFilterFootprintBytes(b, a.hashes), now);
        continue;
      }
      const need = this.resident.totalBytes - own + reserved + estimateFilterFootprintBytes(blocks, hashes) - this.policy.budgetBytes;
      if (this.foldToFree(need, pid) > 0) continue;
      if (this.filterBits <= FILTER_MIN_BITS_PER_HASH) return undefined;
      this.lowerFilterBits();
    }
  }

  /** A partition other than pid whose rebuild was admitted as exact and is not installed yet. */
  private pendingExact(pid: number): number | undefined {
    for (const [p, a] of this.admitted) if (p !== pid && a.tier === 'exact') return p;
    return undefined;
  }

  /** Filters are built a step sparser from now on (down to FILTER_MIN_BITS_PER_HASH); nothing is folded for it. */
  private lowerFilterBits(): void {
    this.filterBits = Math.max(FILTER_MIN_BITS_PER_HASH, this.filterBits * FILTER_DENSITY_STEP);
  }

  /** pid's exact entry becomes a filter entry built at the current density (no PostgreSQL read). */
  private demote(pid: number): void {
    const e = this.resident.get(pid)!;
    e.demote(PresenceFilter.blocksFor(e.hashCount * (1 + FILTER_GROWTH), this.filterBits));
    this.noteDensity(e);
    e.nextRetierMs = this.now() + PROMOTE_INTERVAL_MS;
    this.resident.retiered(pid, e);
    this.stats.demotions++;
    this.onDemote?.(pid);
  }

  /**
   * Folds filter generations, cheapest first, until `need` bytes are freed
   * or none is left that may fold; returns the bytes freed. A generation
   * may fold while it has at least 2 x (1 + FILTER_GROWTH) x the bits a hash
   * filters are built with now: halved, it still has a build's density with
   * its growth headroom (folding to the bare target left each folded filter
   * overloaded a few appends later, and every one asked for a refresh, a
   * fetch of its whole window, at once).
   *
   * Only as many as the room asked for, and the cheapest first: the fold
   * that adds the least to its filter's false positives (presenceFilter.ts,
   * foldCost), one a filter entry a call. Among generations that set the
   * same bits a hash that is the densest, so the cache settles with its
   * filters within a fold of one another, at about the density its budget
   * affords. Across them it keeps a grown DENSE_K generation from a fold
   * that would leave it worse than a K one: near 21 bits a hash its fold is
   * the cheaper, near 10.5 (where a second fold would take it) the dearer
   * by ~70 %, and a K generation of the same density folds first. Folding every filter over the
   * threshold at each step (the rule before) halved them all together
   * while the build density fell step by step, so under a budget for ~9
   * bits a hash, 32 filters admitted one after another ended at ~5, the
   * floor's build density, with 40 % of the budget unused and twice the
   * false positives (docs/history/2026-12-07-filters-level-to-the-budget.md).
   * Nothing here can change a verdict (presenceFilter.ts, fold).
   */
  private foldToFree(need: number, exclude?: number): number {
    const bits = 2 * (1 + FILTER_GROWTH) * this.filterBits;
    // Nothing may fold: no scan of the resident set (at 100 k partitions at
    // the floor density, every refused admission would walk it).
    if (!(need > 0) || bits > this.densestBound) return 0;
    // [entry, its densest generation's bits a hash, the price of its cheapest fold]
    const foldable: [PartitionEntry, number, number][] = [];
    let bound = 0;
    for (const [pid, e] of this.resident.entries()) {
      if (e.tier !== 'filter') continue;
      const d = e.densestBits;
      if (d >= bits && pid !== exclude) foldable.push([e, d, e.cheapestFoldCost(bits)]);
      else bound = Math.max(bound, d);
    }
    foldable.sort((a, b) => a[2] - b[2]);
    let freed = 0;
    for (const [e, d] of foldable) {
      const f = freed < need ? e.foldCheapest(bits) : 0;
      if (f > 0) {
        freed += f;
        this.stats.folds++;
        this.resident.refresh(e);
      }
      bound = Math.max(bound, f > 0 ? e.densestBits : d);
    }
    this.densestBound = bound;
    return freed;
  }

  /**
   * Keeps densestBound an upper bound on every resident filter's densest
   * generation: called for each filter built or regrown (folds, appends and
   * expiry only lower a density; an appended generation's load is at least
   * what it was sized for).
   */
  private noteDensity(e: PartitionEntry): void {
    this.densestBound = Math.max(this.densestBound, e.densestBits);
  }

  /**
   * Whether `total` bytes fit the admission budget, after evicting least
   * recently used entries whose guard has run out; evicts only if that
   * makes them fit (a partial eviction would admit nobody).
   */
  private fits(pid: number, total: number, now: number): boolean {
    const excess = total - this.policy.budgetBytes;
    if (excess <= 0) return true;
    // The walk stops at the first recently used entry, but when the least
    // recently used ones are all guarded it passes every one of them: at
    // 100 k partitions in a round-robin, every admission walked tens of
    // thousands of guarded entries (28 % of the broker's CPU in the
    // window-beyond-budget rows). A walk that found no victims for an excess
    // answers any excess as large or larger until the first guard it passed runs out,
    // for at most NO_ROOM_MEMO_MS; an entry leaving forgets it (drop). Policy
    // only: a refused exact admission becomes a filter or a suppression,
    // never a verdict.
    const memo = now <= this.noVictimsUntilMs;
    if (memo && excess >= this.noVictimBytes) return false;
    this.stats.victimScans++;
    const victims = this.resident.victims(excess, now, pid);
    if (!('pids' in victims)) {
      // Kept while now <= until: up to the moment the first guard the walk
      // passed runs out, and for less than NO_ROOM_MEMO_MS.
      const until = Math.min(now + NO_ROOM_MEMO_MS - 1, victims.calmUntilMs);
      this.noVictimBytes = memo ? Math.min(this.noVictimBytes, excess) : excess;
      this.noVictimsUntilMs = memo ? Math.min(this.noVictimsUntilMs, until) : until;
      return false;
    }
    for (const v of victims.pids) this.evict(v);
    return true;
  }

  /**
   * Installs a complete entry for pid from a full-window fetch (see
   * PartitionEntry.hydrate for why its hydratedFrom is at or below the window
   * start). Replaces any previous entry, clears gap / rebuild / suppression.
   */
  install(pid: number, windowSeconds: number, lastOffset: number, txnsStart: number, rows: readonly TxnRow[], fetchedAtMs: number): void {
    const now = this.now();
    // A background fetch's buffer is complete only where no push of pid is
    // between its SQL call and its report: the caller installs before a
    // flush's push or between flushes (src/fusion/cacheWatermarks.ts).
    const fetch = this.fetching.get(pid);
    this.fetching.delete(pid);
    this.policy.release(pid);
    if (!(windowSeconds > 0)) {
      this.drop(pid);
      return;
    }
    const { tier, blocks } = this.admitted.get(pid) ?? { tier: 'exact' as const, blocks: 0, hashes: 0 };
    this.admitted.delete(pid);
    const entry = PartitionEntry.hydrate(windowSeconds, lastOffset, txnsStart, rows, fetchedAtMs, tier, blocks);
    if (fetch !== undefined) {
      // What the broker appended after the snapshot, in order: each goes in
      // at V + 1 or leaves the entry gapped (another writer's offsets in
      // between), as any append does. A push of unknown outcome meanwhile
      // may have committed offsets the entry never sees: rebuild.
      for (const a of fetch.appends) if (a.base > lastOffset) entry.append(a.base, a.hashes, a.count, a.createdMs);
      if (fetch.unknown) entry.markRebuild('unknown');
    }
    entry.nextRetierMs = now + PROMOTE_INTERVAL_MS;
    this.resident.set(pid, entry, now);
    if (tier === 'filter') this.noteDensity(entry);
    if (tier === 'filter') this.stats.filterInstalls++;
    this.policy.clearCooldown(pid);
    this.policy.forgetFootprint(pid);
    this.stats.hydrations++;
    // The admission reserved an estimate; if the real footprint pushes the
    // total past the cap, make room, but never by evicting a recently used
    // partition (that would be evicting it to admit this one).
    this.enforceCap(pid, now);
  }

  /**
   * The watermark to send as p_verified for a segment of `count` hashes
   * (count x 16 bytes, frame order): the entry's verifiedUpto if it can vouch
   * and no hash is a local hit, else -1. A local hit is only a hint that
   * routes the segment to the full-window probe (which must also supply the
   * original offsets). Marks pid used now and runs its expiry first.
   */
  verifiedFor(pid: number, hashes: Buffer, count: number): number {
    const e = this.usable(pid, hashes, count);
    if (e === undefined || e.anyLocalHit(hashes, count, this.stats)) {
      this.stats.notVouched++;
      return -1;
    }
    return this.countVouch(e);
  }

  /**
   * The watermark plus hints: like verifiedFor, but a local hit no longer
   * forces -1. Instead every hit is named with every offset the entry holds
   * for it, and the entry still vouches V. Why that is sound (the argument in
   * docs/deduplication.md, "Hints"): the entry knows every in-window hash in
   * (H, V] and keeps each occurrence as its own record, so the hits name every
   * in-window occurrence in (H, V]; SQL verifies each named offset
   * positionally (row, 16 bytes, the window's created_at rule), probes
   * (V, last] as it always does, and nothing at or below H is in the window.
   * MIN over the verified offsets and the tail is therefore the full probe's
   * MIN. (An entry whose offsets the table cannot store is marked for
   * rebuild and never reaches here: usable() answers -1 for it.)
   */
  vouchWithHints(pid: number, hashes: Buffer, count: number): HintedVouch {
    const e = this.usable(pid, hashes, count);
    if (e === undefined) {
      this.stats.notVouched++;
      return { verified: -1, hits: NO_HITS, maybe: NO_MAYBE };
    }
    let hits = NO_HITS;
    let maybe = NO_MAYBE;
    let spans: ItemSpans | undefined;
    if (e.storeSize > 0) {
      if (e.tier === 'exact') {
        const found: LocalHit[] = [];
        e.collectHits(hashes, count, this.stats, found);
        if (found.length > 0) hits = found;
      } else {
        const m: number[] = [];
        const sp: ItemSpans = { from: [], to: [] };
        e.maybeItems(hashes, count, this.stats, m, sp);
        if (m.length > 0) {
          maybe = m;
          spans = sp;
        }
      }
    }
    const verified = this.countVouch(e);
    if (verified < 0) return { verified, hits: NO_HITS, maybe: NO_MAYBE };
    if (hits.length > 0) this.stats.hinted++;
    this.stats.maybeItems += maybe.length;
    if (spans !== undefined) for (const to of spans.to) if (to !== Infinity) this.stats.maybeBelowOpen++;
    return spans === undefined ? { verified, hits, maybe } : { verified, hits, maybe, spans };
  }

  /** The resident entry of pid if it may vouch now (expiry run, use recorded), else undefined. */
  private usable(pid: number, hashes: Buffer, count: number): PartitionEntry | undefined {
    if (hashes.length < count * HASH_BYTES)
      throw new RangeError(`dedup: ${count} hashes need ${count * HASH_BYTES} bytes, got ${hashes.length}`);
    const e = this.resident.get(pid);
    if (e === undefined) return undefined;
    const now = this.now();
    this.resident.touch(pid, e, now);
    const generations = e.filterGenerations;
    e.expire(now);
    this.stats.filterGenerationsExpired += generations - e.filterGenerations;
    this.resident.refresh(e);
    return e.canVouch ? e : undefined;
  }

  private countVouch(e: PartitionEntry): number {
    // An empty partition's V is -1, numerically "cannot vouch": count it so.
    if (e.verifiedUpto === -1) this.stats.notVouched++;
    else this.stats.vouched++;
    return e.verifiedUpto;
  }

  /**
   * SQL appended a segment of pid at `base` (count hashes, frame order),
   * committed at or before createdMs (the caller passes the time after the
   * push returned: a later time only delays expiry, the safe side).
   */
  recordAppend(pid: number, base: number, hashes: Buffer, count: number, createdMs: number): void {
    this.fetching.get(pid)?.appends.push({ base, hashes: Buffer.from(hashes.subarray(0, count * HASH_BYTES)), count, createdMs });
    const e = this.resident.get(pid);
    if (e === undefined) return;
    const r = e.append(base, hashes, count, createdMs);
    if (r === 'appended') {
      if (e.filterGenerations > 0 && e.filterGenerations < FILTER_MAX_GENERATIONS && this.filterOverloaded(e)) {
        e.growthRefused = !this.growFilter(pid, e);
      }
      this.resident.refresh(e);
      // Growth past the cap: plain LRU (this is the budget, not an admission).
      this.enforceCap(pid, undefined);
    } else if (r === 'gap') {
      this.stats.gaps++;
    } else if (r === 'overlap' || r === 'range') {
      this.stats.rebuildsMarked++;
    }
  }

  /** The push failed and may or may not have committed: pid needs a full rebuild. */
  recordUnknown(pid: number): void {
    const f = this.fetching.get(pid);
    if (f !== undefined) f.unknown = true;
    const e = this.resident.get(pid);
    if (e === undefined || e.rebuild) return;
    e.markRebuild('unknown');
    this.stats.rebuildsMarked++;
  }

  /** Drops every entry and all policy bookkeeping (tests). */
  clear(): void {
    this.resident.clear();
    this.policy.clear();
    this.inFlight.clear();
    this.fetching.clear();
    this.admitted.clear();
    this.filterBits = FILTER_BITS_PER_HASH;
  }

  /** Gauge: partitions currently suppressed (cooldown not expired). */
  suppressedCount(): number {
    return this.policy.suppressedCount(this.now());
  }
  residentBytes(): number {
    return this.resident.totalBytes;
  }
  residentHashes(): number {
    let n = 0;
    for (const e of this.resident.values()) n += e.hashCount;
    return n;
  }
  residentPartitions(): number {
    return this.resident.size;
  }
  /** The window a resident entry was built for (0 when none): the scope of what verifiedFor() vouches. */
  vouchedWindow(pid: number): number {
    return this.resident.get(pid)?.windowSeconds ?? 0;
  }

  entryInfo(pid: number): EntryInfo | undefined {
    const e = this.resident.get(pid);
    if (e === undefined) return undefined;
    return {
      verifiedUpto: e.verifiedUpto,
      hydratedFrom: e.hydratedFrom,
      windowSeconds: e.windowSeconds,
      state: e.state,
      tier: e.tier,
      units: e.unitCount,
      openUnitHashes: e.openUnitHashes,
      pages: e.storePages,
      generations: e.filterGenerations,
      denseGenerations: e.denseGenerations,
      bytes: e.accountedBytes,
      hashes: e.hashCount,
    };
  }
  /** Bits a hash that new filters are built with now (lowered under memory pressure). */
  filterBitsPerHash(): number {
    return this.filterBits;
  }
  /**
   * Bits a hash the resident filters hold (their blocks over the in-window
   * hashes they know): the density their false positives follow, which the
   * build density (filterBitsPerHash) may sit below once filters have
   * leveled (foldToFree). undefined with no filter. A scan of the resident
   * set: a gauge's, once a scrape.
   */
  residentFilterBitsPerHash(): number | undefined {
    let bits = 0;
    let hashes = 0;
    for (const e of this.resident.values()) {
      if (e.tier !== 'filter') continue;
      bits += e.filterBlocks * 512;
      hashes += e.hashCount;
    }
    return hashes > 0 ? bits / hashes : undefined;
  }
  residentFilterEntries(): number {
    return this.resident.size - this.resident.exactCount;
  }
  /** Sizes of the policy's auxiliary maps (tests: the soft cap holds). */
  auxSizes(): { cooldowns: number; hints: number; reservations: number } {
    return this.policy.auxSizes();
  }

  private suppress(pid: number, now: number, hashes: number, estimate: number, others: number): void {
    this.drop(pid);
    this.stats.suppressions++;
    const mb = (b: number): string => (b / 2 ** 20).toFixed(1);
    this.policy.suppress(
      pid,
      now,
      hashes,
      () =>
        `partition ${pid} needs ~${mb(estimate)} MB, others hold ${mb(others)} MB of a ${mb(this.capBytes)} MB cap (QUEEN_DEDUP_CACHE_MB); ${this.policy.suppressedCount(now)} partition(s) suppressed now`,
    );
  }

  /**
   * Removes pid's entry (if any), remembering its size as the footprint
   * hint: as an exact entry's bytes (a filter entry's hashes sized as the
   * exact tier would hold them), so the next exact fit test is not fooled
   * by a filter's footprint.
   */
  private drop(pid: number): void {
    const e = this.resident.delete(pid);
    if (e === undefined) return;
    this.noRoomUntilMs = 0;
    this.noVictimsUntilMs = 0;
    this.policy.rememberFootprint(pid, e.tier === 'exact' ? e.accountedBytes : estimateFootprintBytes(e.hashCount));
  }

  private evict(pid: number): void {
    this.drop(pid);
    this.stats.evictions++;
    this.onEvict?.(pid);
  }

  /**
   * While over the cap: with the filter tier, demote the least recently used
   * exact entry other than `keep`, then fold filters, cheapest first, as far as
   * the excess asks (foldToFree), then lower the build density a step (which
   * lets denser ones fold); then (or without the filter tier) evict the least recently used entry
   * other than `keep` (with guardedAtMs: only one whose recent-use guard has
   * run out then).
   */
  private enforceCap(keep: number, guardedAtMs: number | undefined): void {
    while (this.resident.totalBytes > this.capBytes) {
      if (this.filterTier) {
        const d = this.resident.lruExact(keep);
        if (d !== undefined) {
          this.demote(d);
          continue;
        }
        if (this.foldToFree(this.resident.totalBytes - this.capBytes) > 0) continue;
        if (this.filterBits > FILTER_MIN_BITS_PER_HASH) {
          this.lowerFilterBits();
          continue;
        }
      }
      const v = this.resident.lru(keep, guardedAtMs);
      if (v === undefined) return;
      this.evict(v);
    }
  }
}
