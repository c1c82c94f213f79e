import { randomBytes } from 'node:crypto';
import { DedupCache, type TxnRow } from '../../src/dedup/index.js';
import { BLOCK_HASHES, HASH_BYTES } from '../../src/dedup/constants.js';
import { PartitionEntry, type LookupStats } from '../../src/dedup/entry.js';
import { gcFunction } from '../lib/gc.js';

/**
 * The broker dedup cache, side by side in one process:
 * - absent-probe cost per hash with the bloom front vs the exact store alone
 *   (binary search in every sealed block + hot-buffer scan), at a 300-block
 *   window (300 x 4096 hashes resident);
 * - resident bytes per hash: the cache's accounting right after hydration
 *   and across one more full window of steady appends (expiry running), for
 *   the rate-aware bloom tiering (default K = 5), K = 4 and the plain x8
 *   ladder; plus the process's arrayBuffers delta for the hydrated entry;
 * - the bloom front's false-positive rate on absent hashes (all live
 *   generations together).
 * Repetitions report medians; raw samples are returned.
 */

interface BenchResult {
  name: string;
  params: Record<string, unknown>;
  results: Record<string, number>;
  samples?: Record<string, number[]>;
}

const WINDOW_S = 300;
const RATE_PER_S = 4096; // one block per second: a 300 s window holds 300 blocks
const ROW_HASHES = 1024;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Rows for a full window ending at endMs, at RATE_PER_S, ROW_HASHES per row, from one source buffer. */
function windowRows(source: Buffer, blocks: number, endMs: number): TxnRow[] {
  const total = blocks * BLOCK_HASHES;
  const rows: TxnRow[] = [];
  const msPerRow = (ROW_HASHES / RATE_PER_S) * 1000;
  const startMs = endMs - (total / RATE_PER_S) * 1000;
  for (let base = 0, r = 0; base < total; base += ROW_HASHES, r++) {
    rows.push({
      baseOffset: base,
      endOffset: base + ROW_HASHES - 1,
      createdMs: Math.round(startMs + (r + 1) * msPerRow),
      hashes: source.subarray(base * HASH_BYTES, (base + ROW_HASHES) * HASH_BYTES),
    });
  }
  return rows;
}

function freshStats(): LookupStats {
  return { localHits: 0, localMisses: 0, bloomMaybe: 0, bloomFalsePositives: 0 };
}

/** Absent probes through the bloom front (the path verifiedFor takes); ns per hash. */
function probeWithBloom(entry: PartitionEntry, probes: Buffer, count: number, stats: LookupStats): number {
  const t0 = process.hrtime.bigint();
  const hit = entry.anyLocalHit(probes, count, stats);
  const ns = Number(process.hrtime.bigint() - t0) / count;
  if (hit) throw new Error('bench: a random probe hit');
  return ns;
}

/** Absent probes through the exact store alone (bloom bypassed); ns per hash. */
function probeExactOnly(entry: PartitionEntry, probes: Buffer, count: number): number {
  let hits = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < count; i++) if (entry.knowsExact(probes, i * HASH_BYTES)) hits++;
  const ns = Number(process.hrtime.bigint() - t0) / count;
  if (hits) throw new Error('bench: a random probe hit');
  return ns;
}

/**
 * Hydrates a full window into a cache, then streams one more window of
 * appends at the same rate through the flush path (verifiedFor runs expiry,
 * recordAppend appends); samples accounted bytes per resident hash.
 */
function steadyState(
  source: Buffer,
  stream: Buffer,
  blocks: number,
  bloomMinGenerationsPerWindow: number | undefined,
  samplesWanted: number,
): { afterInstall: number; steady: number[]; generations: number[] } {
  let now = 1_000_000_000;
  const cache = new DedupCache({ capBytes: 2 ** 40, now: () => now, bloomMinGenerationsPerWindow });
  const total = blocks * BLOCK_HASHES;
  cache.install(1, WINDOW_S, total - 1, 0, windowRows(source, blocks, now), now);
  const afterInstall = cache.residentBytes() / cache.residentHashes();
  const seg = 64;
  const msPerSeg = (seg / RATE_PER_S) * 1000;
  const segments = total / seg;
  const every = Math.max(1, Math.floor(segments / samplesWanted));
  const steady: number[] = [];
  const generations: number[] = [];
  let last = total - 1;
  for (let s = 0; s < segments; s++) {
    now += msPerSeg;
    // Fresh, independent random hashes (as xxh3_128 of new transaction ids would be).
    const next = stream.subarray(s * seg * HASH_BYTES, (s + 1) * seg * HASH_BYTES);
    const w = cache.verifiedFor(1, next, seg);
    if (w !== last) throw new Error(`bench: steady state lost the vouch (${w} != ${last})`);
    cache.recordAppend(1, last + 1, next, seg, now);
    last += seg;
    if (s % every === every - 1) {
      steady.push(cache.residentBytes() / cache.residentHashes());
      generations.push(cache.entryInfo(1)!.generations);
    }
  }
  return { afterInstall, steady, generations };
}

export async function runDedupCacheBench(opts: { quick: boolean }): Promise<BenchResult> {
  const blocks = 300;
  const reps = opts.quick ? 3 : 7;
  const bloomProbes = opts.quick ? 100_000 : 400_000;
  const exactProbes = opts.quick ? 1_000 : 4_000;
  const total = blocks * BLOCK_HASHES;
  const gc = gcFunction();

  const source = randomBytes(total * HASH_BYTES);
  const probes = randomBytes(bloomProbes * HASH_BYTES);
  const endMs = 1_000_000_000;

  // Hydrate one entry (the cache's own install path) and read its footprint.
  gc?.();
  const abBefore = process.memoryUsage().arrayBuffers;
  const entry = PartitionEntry.hydrate(WINDOW_S, total - 1, 0, windowRows(source, blocks, endMs), endMs);
  gc?.();
  const abAfter = process.memoryUsage().arrayBuffers;

  // The same window under K = 4 tiering (fewer, larger generations): the
  // alternative the default trades probe work against (constants.ts).
  const entryK4 = PartitionEntry.hydrate(WINDOW_S, total - 1, 0, windowRows(source, blocks, endMs), endMs, 4);

  const withBloom: number[] = [];
  const withBloomK4: number[] = [];
  const exactOnly: number[] = [];
  const fpRate: number[] = [];
  // Warm-up (JIT) on a slice, then interleaved repetitions.
  probeWithBloom(entry, probes, Math.min(20_000, bloomProbes), freshStats());
  probeWithBloom(entryK4, probes, Math.min(20_000, bloomProbes), freshStats());
  probeExactOnly(entry, probes, Math.min(200, exactProbes));
  for (let r = 0; r < reps; r++) {
    const st = freshStats();
    withBloom.push(probeWithBloom(entry, probes, bloomProbes, st));
    fpRate.push(st.bloomFalsePositives / bloomProbes);
    withBloomK4.push(probeWithBloom(entryK4, probes, bloomProbes, freshStats()));
    // A different slice each repetition, so no run is a replay of cached lines.
    const at = (r * exactProbes) % (bloomProbes - exactProbes);
    exactOnly.push(probeExactOnly(entry, probes.subarray(at * HASH_BYTES), exactProbes));
  }

  const samplesWanted = opts.quick ? 40 : 150;
  const stream = randomBytes(total * HASH_BYTES);
  const rateAware = steadyState(source, stream, blocks, undefined, samplesWanted);
  const ladder = steadyState(source, stream, blocks, 0, samplesWanted);
  const k4 = steadyState(source, stream, blocks, 4, samplesWanted);

  const mWith = median(withBloom);
  const mExact = median(exactOnly);
  return {
    name: 'dedupCache',
    params: {
      quick: opts.quick,
      windowBlocks: blocks,
      residentHashes: total,
      windowSeconds: WINDOW_S,
      ratePerSecond: RATE_PER_S,
      repetitions: reps,
      bloomProbesPerRep: bloomProbes,
      exactProbesPerRep: exactProbes,
      bloomGenerations: entry.front.generations,
      bloomCapacities: entry.front.capacities().join(','),
      arrayBuffersMeasuredWithGc: gc !== undefined,
    },
    results: {
      absentProbeNsPerHashBloom: mWith,
      absentProbeNsPerHashExactOnly: mExact,
      absentProbeSpeedup: mExact / mWith,
      bloomFalsePositiveRate: median(fpRate),
      bytesPerHashAfterHydration: entry.bytes / entry.hashCount,
      arrayBuffersBytesPerHash: (abAfter - abBefore) / total,
      bytesPerHashSteadyMedian: median(rateAware.steady),
      bytesPerHashSteadyMax: Math.max(...rateAware.steady),
      bytesPerHashLadderAfterHydration: ladder.afterInstall,
      bytesPerHashLadderSteadyMedian: median(ladder.steady),
      bytesPerHashLadderSteadyMax: Math.max(...ladder.steady),
      bloomGenerationsSteadyMedian: median(rateAware.generations),
      bloomGenerationsLadderSteadyMedian: median(ladder.generations),
      absentProbeNsPerHashBloomK4: median(withBloomK4),
      bytesPerHashK4SteadyMedian: median(k4.steady),
      bytesPerHashK4SteadyMax: Math.max(...k4.steady),
      bloomGenerationsK4SteadyMedian: median(k4.generations),
    },
    samples: {
      absentProbeNsPerHashBloom: withBloom,
      absentProbeNsPerHashExactOnly: exactOnly,
      bloomFalsePositiveRate: fpRate,
      bytesPerHashSteady: rateAware.steady,
      bytesPerHashLadderSteady: ladder.steady,
      absentProbeNsPerHashBloomK4: withBloomK4,
      bytesPerHashK4Steady: k4.steady,
    },
  };
}
