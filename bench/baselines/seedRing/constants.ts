/**
 * The seed's exact-store layout (sorted blocks behind a bloom front), kept as
 * the baseline the occurrence table is measured against (bench/suites/
 * dedupCache.ts) and as its record: these are the constants it ran with.
 */
import { HASH_BYTES } from '../../../src/dedup/constants.js';

export { ENTRY_OVERHEAD_BYTES, HASH_BYTES, SKEW_SLACK_MS } from '../../../src/dedup/constants.js';

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

/** Coarse per-object overheads the ring added to its byte accounting. */
export const BLOCK_OVERHEAD_BYTES = 96;
export const GENERATION_OVERHEAD_BYTES = 128;
