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
 * only when a window would hold at least this many generations of that tier,
 * and steps down when it would hold fewer than this many of the current one.
 * 4 is derived from the 18.5 B/hash target: live bloom capacity averages
 * about (in-window hashes + one generation), so at >= 4 generations per window
 * the bloom adds <= 2 x (1 + 1/4) = 2.5 B/hash on top of the exact 16.
 * 0 = the plain ladder (always step up when full).
 */
export const BLOOM_MIN_GENERATIONS_PER_WINDOW = 4;

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
