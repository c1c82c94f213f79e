import { HASH_BYTES } from '../util/txnHash.js';

/**
 * The dedup cache's fixed numbers, in one place so every module argues from
 * the same values (the seed: "How the hashes are stored", "Under memory
 * pressure"; the occurrence table's own are in occurrenceTable.ts).
 */

export { HASH_BYTES };

/**
 * Expiry unit: consecutive appended hashes, in offset order, are grouped in
 * runs of this many, each remembering its last offset and its latest commit
 * time; a unit is forgotten only when that time is pre-window (the seed's
 * block-granular expiry, without the blocks: the occurrence table holds the
 * hashes, the units only say which offsets are provably pre-window).
 */
export const UNIT_HASHES = 4096;
/** Clock-skew slack (ms) added on the safe side to every pre-window decision. */
export const SKEW_SLACK_MS = 5_000;

/**
 * Per-object overheads added to the byte accounting, so that the budget
 * bounds what entries really hold, small ones included: an entry's objects
 * (a filter entry of a few hashes measured ~0.6-0.8 KB in all), and each
 * expiry unit's record with its arrays (~200 B measured, not the 48 once
 * assumed). test/unit/dedup/accounting.test.ts measures accounted against
 * real bytes for exact and filter entries of 0 to 2 000 hashes.
 */
export const ENTRY_OVERHEAD_BYTES = 512;
export const UNIT_OVERHEAD_BYTES = 200;

/** Memory policy. */
export const ADMIT_FRACTION = 0.9;
export const SUPPRESS_COOLDOWN_MS = 30_000;
/** How long a full cache's "no room for anyone" answer is kept before the resident set is scanned again (cache.ts, hasRoomForAnother). */
export const NO_ROOM_MEMO_MS = 1_000;
export const RECENT_USE_MS = 5_000;
/**
 * The recent-use guard follows each entry's own rhythm (residentSet.ts,
 * guardMs): an entry seen returning every g ms is protected while idle for no
 * longer than REUSE_GUARD_FACTOR x g (at least RECENT_USE_MS, at most
 * REUSE_GUARD_MAX_MS), and an entry not yet seen returning for
 * NEWCOMER_GUARD_MS. A fixed 5 s lost every round-robin slower than 5 s a
 * pass: each admission then evicted a partition about to be used.
 */
export const REUSE_GUARD_FACTOR = 2;
export const REUSE_GUARD_MAX_MS = 60_000;
export const NEWCOMER_GUARD_MS = 30_000;
export const WARN_INTERVAL_MS = 60_000;
export const AUX_MAP_SOFT_CAP = 100_000;
/** An admitted rebuild's reserved bytes stop counting after this long without an install (a lost flush must not hold budget). */
export const RESERVATION_TTL_MS = 60_000;

/**
 * The filter tier (presenceFilter.ts, entry.ts): a filter is built with at
 * least FILTER_BITS_PER_HASH bits for each of its hashes plus
 * FILTER_GROWTH more (the appends until its refresh), rounded up by at most
 * 12.5 % (presenceFilter.ts, blocksFor). Under memory pressure the cache
 * lowers the bits it builds with by FILTER_DENSITY_STEP at a time, and folds
 * filters that have twice a build's (growth included) or more, so a folded
 * filter keeps a build's headroom, down to FILTER_MIN_BITS_PER_HASH
 * (~15 % false positives; below it a partition is suppressed instead). A
 * filter whose hashes added outgrow its design load (fewer bits per added
 * hash than the current target) grows a generation, or is rebuilt once it
 * has FILTER_MAX_GENERATIONS.
 *
 * Why 16 and not 8: every false positive sends its segment to a lookup, and
 * a lookup's cost grows with the partition's runs (it reads one slice of
 * each). At 8 bits (~2-3 % false positives once a filter fills) a segment
 * of 50 new items met one ~70 % of the time, so in the retention soak at the
 * service's defaults nearly every push waited for a lookup of ~14 segments,
 * and by minute 25 that lookup cost more than the push (12 ms against 5).
 * At 16 bits two pushes in three looked up, ~2 segments each, and the
 * soak achieved 99.7 k msg/s against 86.1 k
 * (docs/history/2026-12-06-filter-density-in-the-defaults-soak.md; 108 k
 * once folds kept their headroom: 2026-12-06-filters-at-16-bits-kept-and-what-bounds-the-soak.md). A
 * filter hash costs ~2.7 B instead of ~1.3 B, an eighth of an exact one;
 * a budget too small for that lowers the density a step at a time as
 * before, and settles where its filters fit.
 */
export const FILTER_BITS_PER_HASH = 16;
export const FILTER_MIN_BITS_PER_HASH = 4;
export const FILTER_DENSITY_STEP = 0.9;
export const FILTER_GROWTH = 0.25;
/**
 * A filter whose appends outgrow it gets a new generation (entry.ts, grow)
 * instead of a refetch of its whole window: the full filter is sealed at
 * the entry's V and a new one, sized for FILTER_GENERATION_SHARE of the
 * entry's in-window hashes at the current density, takes the appends. A
 * sealed generation is dropped once expiry has passed its V, so a window
 * that turns over keeps ~3 generations alive and never refetches. A
 * generation adds its false positives to the entry's (a maybe is any
 * generation's maybe), so at FILTER_MAX_GENERATIONS the entry is refreshed
 * as before: one filter rebuilt from a window fetch.
 *
 * Why: in the 30-minute retention soak at the service's defaults, filters
 * filling with the window asked for ~250 refreshes of 1-3.5 M hashes each,
 * 0.2-2.4 s of PostgreSQL apiece, late in the run ~15-30 % of a core
 * (docs/history/2026-12-06-filters-at-16-bits-kept-and-what-bounds-the-soak.md).
 * Each refresh built a filter only a quarter larger, so a window growing
 * 4x was fetched whole ~6 times.
 */
export const FILTER_GENERATION_SHARE = 0.5;
export const FILTER_MAX_GENERATIONS = 5;
/**
 * A filter entry tries to become exact again at most this often, and only
 * when its exact footprint fits under PROMOTE_FRACTION of the admission
 * budget without evicting anyone (hysteresis: a promotion must not set off
 * the demotions that made it a filter).
 */
export const PROMOTE_INTERVAL_MS = 30_000;
export const PROMOTE_FRACTION = 0.75;
/** Below this share of the admission budget in use, the density filters are built with goes back up a step. */
export const FILTER_RELAX_FRACTION = 0.5;
