import { HASH_BYTES } from '../util/txnHash.js';

/**
 * The dedup cache's fixed numbers, in one place so every module argues from
 * the same values (the seed: "How the hashes are stored", "The bloom front",
 * "Under memory pressure").
 */

export { HASH_BYTES };

/** Hashes per sealed block. A power of two, so the hot buffer's doubling lands exactly on it and the seal is a hand-off. */
export const BLOCK_HASHES = 4096;
/** Bytes per sealed block: 64 KiB, the largest single allocation the cache makes. */
export const BLOCK_BYTES = BLOCK_HASHES * HASH_BYTES;
/**
 * Per hash, the block also keeps the offset it was committed at, as a 32-bit
 * delta from the block's lowest offset (permuted with the hash at the seal):
 * what lets a local hit name where the original lives (docs/deduplication.md,
 * "Hints"). 16 KiB per block, 4 B per hash.
 */
export const BLOCK_OFFSET_BYTES = BLOCK_HASHES * 4;
/** A delta that does not fit 32 bits (a block spanning 2^32 offsets) is stored as this: "offset unknown", the hit cannot be hinted. */
export const UNKNOWN_OFFSET_DELTA = 0xffffffff;
/** First capacity of a fresh hot buffer (hashes); it doubles up to BLOCK_HASHES. */
export const HOT_INITIAL_HASHES = 16;
/** Clock-skew slack (ms) added on the safe side to every pre-window decision. */
export const SKEW_SLACK_MS = 5_000;

/** Bloom: bits per hash at a generation's capacity. */
export const BLOOM_BITS_PER_HASH = 16;
/** Bloom: probe bits per hash, all inside one block. */
export const BLOOM_K = 7;
/** Bloom: one block is one 64-byte cache line (512 bits, 16 uint32 words). */
export const BLOOM_BLOCK_BYTES = 64;
export const BLOOM_BLOCK_WORDS = BLOOM_BLOCK_BYTES / 4;
/** Bloom blocks per page; a page is at most 64 KiB, like an exact block. */
export const BLOOM_PAGE_BLOCKS = 1024;
/** Generation capacity tiers (hashes): x8 from the block capacity up to the ceiling. */
export const BLOOM_TIERS: readonly number[] = [4096, 32_768, 262_144, 1_048_576];
/**
 * Rate-aware tiering (see bloomFront.ts): the next generation steps a tier up
 * only when a window would hold at least K generations of that tier, and
 * steps down when it would hold fewer than K of the current one, so a window
 * settles at K .. 8K generations of one tier (x8 tiers leave no finer choice).
 * Live bloom capacity averages about (resident hashes + one generation), so
 * the bloom costs about 2 x (1 + 1/K) B/hash at worst in that band. With the
 * exact store's ~16.04 B/hash, the 18.5 B/hash target needs K >= 4.35, hence
 * K = 5 (worst about 18.44). Measured at a 300-block window (bench): K = 5
 * gives 18.07 B/hash and 39 generations; K = 4 gives 18.54 B/hash and 6
 * generations (about 3x cheaper absent probes); the plain ladder (0) gives
 * 19.4 (max 21.1) B/hash and 2-3 generations.
 * 0 = the plain ladder (always step up when full).
 */
export const BLOOM_MIN_GENERATIONS_PER_WINDOW = 5;

/** Coarse per-object overheads added to the byte accounting. */
export const ENTRY_OVERHEAD_BYTES = 512;
export const BLOCK_OVERHEAD_BYTES = 96;
export const GENERATION_OVERHEAD_BYTES = 128;

/** Memory policy. */
export const ADMIT_FRACTION = 0.9;
export const SUPPRESS_COOLDOWN_MS = 30_000;
export const RECENT_USE_MS = 5_000;
export const WARN_INTERVAL_MS = 60_000;
export const AUX_MAP_SOFT_CAP = 100_000;
/** An admitted rebuild's reserved bytes stop counting after this long without an install (a lost flush must not hold budget). */
export const RESERVATION_TTL_MS = 60_000;
