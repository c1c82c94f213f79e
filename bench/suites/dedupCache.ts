import { randomBytes } from 'node:crypto';
import { DedupCache, type TxnRow } from '../../src/dedup/index.js';
import { HASH_BYTES, UNIT_HASHES } from '../../src/dedup/constants.js';
import { PartitionEntry, type LocalHit, type LookupStats } from '../../src/dedup/entry.js';
import { SeedRingEntry, type LookupStats as SeedStats } from '../baselines/seedRing/entry.js';
import { gcFunction } from '../lib/gc.js';
import { measureFilterTier } from './dedupCacheFilter.js';

/**
 * The broker dedup cache's exact store, side by side in one process: the
 * occurrence table (src/dedup) against the seed's layout it replaced
 * (bench/baselines/seedRing: sorted blocks behind a bloom front, as the
 * service ran it up to 65d755c), one partition holding a 300-unit window
 * (300 x 4096 hashes, a 300 s window at 4096 hashes/s):
 * - absent-probe cost per hash: the table; the seed with its bloom front;
 *   the seed's exact store alone (a binary search in every sealed block);
 * - cost per scattered hit (segments of 200 with 20 stored hashes);
 * - append cost per hash, and hydration (install) cost per hash;
 * - resident bytes per hash: right after hydration, and across one more
 *   window of steady appends with expiry running (the cache's accounting);
 *   plus the process's arrayBuffers delta for the hydrated table.
 * Repetitions alternate the layouts and report medians; raw samples are
 * returned. The filter tier (src/dedup/presenceFilter.ts, issue 38) at the
 * same window: its resident bytes per hash next to the table's, its false
 * positives per absent lookup and its lookup cost (dedupCacheFilter.ts).
 */

interface BenchResult {
  name: string;
  params: Record<string, unknown>;
  results: Record<string, number>;
  samples?: Record<string, number[]>;
}

const WINDOW_S = 300;
const RATE_PER_S = 4096; // one unit per second: a 300 s window holds 300 units
const ROW_HASHES = 1024;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Rows for a full window ending at endMs, at RATE_PER_S, ROW_HASHES per row, from one source buffer. */
function windowRows(source: Buffer, units: number, endMs: number): TxnRow[] {
  const total = units * UNIT_HASHES;
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

const tableStats = (): LookupStats => ({ localHits: 0, localMisses: 0 });
const seedStats = (): SeedStats => ({ localHits: 0, localMisses: 0, bloomMaybe: 0, bloomFalsePositives: 0 });

/** ns per hash of `fn` over `count` items. */
function timed(count: number, fn: () => void): number {
  const t0 = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - t0) / count;
}

/** Segments of 200 items, 20 of them stored hashes (from `source`), the rest absent (from `fresh`). */
function hitSegments(source: Buffer, stored: number, fresh: Buffer, segments: number): Buffer[] {
  const out: Buffer[] = [];
  for (let s = 0; s < segments; s++) {
    const seg = Buffer.from(fresh.subarray(s * 200 * HASH_BYTES, (s + 1) * 200 * HASH_BYTES));
    for (let k = 0; k < 20; k++) {
      const o = (Math.imul(s * 20 + k + 1, 0x9e3779b1) >>> 0) % stored;
      source.copy(seg, (k * 10 + 3) * HASH_BYTES, o * HASH_BYTES, (o + 1) * HASH_BYTES);
    }
    out.push(seg);
  }
  return out;
}

/**
 * Hydrates a full window into a cache, then streams one more window of
 * appends at the same rate through the flush path (verifiedFor runs expiry,
 * recordAppend appends); samples accounted bytes per resident hash.
 */
function steadyState(source: Buffer, stream: Buffer, units: number, samplesWanted: number): { afterInstall: number; steady: number[] } {
  let now = 1_000_000_000;
  const cache = new DedupCache({ capBytes: 2 ** 40, now: () => now });
  const total = units * UNIT_HASHES;
  cache.install(1, WINDOW_S, total - 1, 0, windowRows(source, units, now), now);
  const afterInstall = cache.residentBytes() / cache.residentHashes();
  const seg = 64;
  const msPerSeg = (seg / RATE_PER_S) * 1000;
  const segments = total / seg;
  const every = Math.max(1, Math.floor(segments / samplesWanted));
  const steady: number[] = [];
  let last = total - 1;
  for (let s = 0; s < segments; s++) {
    now += msPerSeg;
    // Fresh, independent random hashes (as xxh3_128 of new transaction ids would be).
    const next = stream.subarray(s * seg * HASH_BYTES, (s + 1) * seg * HASH_BYTES);
    const w = cache.verifiedFor(1, next, seg);
    if (w !== last) throw new Error(`bench: steady state lost the vouch (${w} != ${last})`);
    cache.recordAppend(1, last + 1, next, seg, now);
    last += seg;
    if (s % every === every - 1) steady.push(cache.residentBytes() / cache.residentHashes());
  }
  return { afterInstall, steady };
}

export async function runDedupCacheBench(opts: { quick: boolean }): Promise<BenchResult> {
  const units = 300;
  const reps = opts.quick ? 3 : 7;
  const absentProbes = opts.quick ? 100_000 : 400_000;
  const exactProbes = opts.quick ? 1_000 : 4_000;
  const hitSegs = opts.quick ? 200 : 1_000;
  const appendHashes = opts.quick ? 100_000 : 400_000;
  const total = units * UNIT_HASHES;
  const gc = gcFunction();

  const source = randomBytes(total * HASH_BYTES);
  const probes = randomBytes(absentProbes * HASH_BYTES);
  const segs = hitSegments(source, total, randomBytes(hitSegs * 200 * HASH_BYTES), hitSegs);
  const endMs = 1_000_000_000;
  const rows = windowRows(source, units, endMs);

  // Hydrate one entry of each layout (their own install paths) and read the table's footprint.
  gc?.();
  const abBefore = process.memoryUsage().arrayBuffers;
  const table = PartitionEntry.hydrate(WINDOW_S, total - 1, 0, rows, endMs);
  gc?.();
  const abAfter = process.memoryUsage().arrayBuffers;
  const seed = SeedRingEntry.hydrate(WINDOW_S, total - 1, 0, rows, endMs);

  const s = {
    absentTable: [] as number[],
    absentSeed: [] as number[],
    absentSeedExact: [] as number[],
    hitTable: [] as number[],
    hitSeed: [] as number[],
    hydrateTable: [] as number[],
    hydrateSeed: [] as number[],
    appendTable: [] as number[],
    appendSeed: [] as number[],
  };
  const absentTable = (n: number, at = 0): number =>
    timed(n, () => {
      if (table.anyLocalHit(probes.subarray(at * HASH_BYTES), n, tableStats())) throw new Error('bench: a random probe hit');
    });
  const absentSeed = (n: number, at = 0): number =>
    timed(n, () => {
      if (seed.anyLocalHit(probes.subarray(at * HASH_BYTES), n, seedStats())) throw new Error('bench: a random probe hit');
    });
  const absentSeedExact = (n: number, at: number): number =>
    timed(n, () => {
      for (let i = 0; i < n; i++) if (seed.knowsExact(probes, (at + i) * HASH_BYTES)) throw new Error('bench: a random probe hit');
    });
  /** ns per hit: segments of 200 items with 20 stored hashes each. */
  const hitsTable = (): number =>
    timed(segs.length * 20, () => {
      let n = 0;
      for (const seg of segs) {
        const hits: LocalHit[] = [];
        table.collectHits(seg, 200, tableStats(), hits);
        n += hits.length;
      }
      if (n < segs.length * 20) throw new Error(`bench: the table named ${n} hits`);
    });
  const hitsSeed = (): number =>
    timed(segs.length * 20, () => {
      let n = 0;
      for (const seg of segs) {
        const hits: { index: number; offsets: number[] }[] = [];
        seed.collectHits(seg, 200, seedStats(), hits);
        n += hits.length;
      }
      if (n < segs.length * 20) throw new Error(`bench: the seed ring named ${n} hits`);
    });
  const appendStream = randomBytes(appendHashes * HASH_BYTES);
  /** ns per appended hash: a fresh entry of the layout hydrated with the window, then segments of 100 appended. */
  const appendOne = (layout: 'table' | 'seed'): { hydrate: number; append: number } => {
    let e: PartitionEntry | SeedRingEntry | undefined;
    const hydrate = timed(total, () => {
      e =
        layout === 'table'
          ? PartitionEntry.hydrate(WINDOW_S, total - 1, 0, rows, endMs)
          : SeedRingEntry.hydrate(WINDOW_S, total - 1, 0, rows, endMs);
    });
    let base = total;
    const append = timed(appendHashes, () => {
      for (let i = 0; i < appendHashes; i += 100) {
        e!.append(base, appendStream.subarray(i * HASH_BYTES, (i + 100) * HASH_BYTES), 100, endMs);
        base += 100;
      }
    });
    return { hydrate, append };
  };

  // Warm-up (JIT), then interleaved repetitions, alternating which layout goes first.
  absentTable(20_000);
  absentSeed(20_000);
  absentSeedExact(200, 0);
  hitsTable();
  hitsSeed();
  for (let r = 0; r < reps; r++) {
    const order = r % 2 === 0 ? (['table', 'seed'] as const) : (['seed', 'table'] as const);
    for (const layout of order) {
      if (layout === 'table') {
        s.absentTable.push(absentTable(absentProbes));
        s.hitTable.push(hitsTable());
      } else {
        s.absentSeed.push(absentSeed(absentProbes));
        s.hitSeed.push(hitsSeed());
        // A different slice each repetition, so no run is a replay of cached lines.
        const at = (r * exactProbes) % (absentProbes - exactProbes);
        s.absentSeedExact.push(absentSeedExact(exactProbes, at));
      }
    }
  }
  for (let r = 0; r < Math.min(reps, 3); r++) {
    for (const layout of r % 2 === 0 ? (['table', 'seed'] as const) : (['seed', 'table'] as const)) {
      gc?.();
      const x = appendOne(layout);
      (layout === 'table' ? s.hydrateTable : s.hydrateSeed).push(x.hydrate);
      (layout === 'table' ? s.appendTable : s.appendSeed).push(x.append);
    }
  }

  const samplesWanted = opts.quick ? 40 : 150;
  const steady = steadyState(source, randomBytes(total * HASH_BYTES), units, samplesWanted);
  const filter = measureFilterTier(source, randomBytes(total * HASH_BYTES), probes, total, samplesWanted);

  const m = (k: keyof typeof s): number => median(s[k]);
  return {
    name: 'dedupCache',
    params: {
      quick: opts.quick,
      windowUnits: units,
      residentHashes: total,
      windowSeconds: WINDOW_S,
      ratePerSecond: RATE_PER_S,
      repetitions: reps,
      absentProbesPerRep: absentProbes,
      exactProbesPerRep: exactProbes,
      hitSegmentsPerRep: hitSegs,
      appendHashesPerRep: appendHashes,
      tablePages: table.table.pages,
      seedBloomGenerations: seed.front.generations,
      seedBloomCapacities: seed.front.capacities().join(','),
      arrayBuffersMeasuredWithGc: gc !== undefined,
    },
    results: {
      absentProbeNsPerHashTable: m('absentTable'),
      absentProbeNsPerHashSeedBloom: m('absentSeed'),
      absentProbeNsPerHashSeedExactOnly: m('absentSeedExact'),
      absentProbeSpeedupOverSeedExact: m('absentSeedExact') / m('absentTable'),
      absentProbeSpeedupOverSeedBloom: m('absentSeed') / m('absentTable'),
      hitNsTable: m('hitTable'),
      hitNsSeed: m('hitSeed'),
      hydrateNsPerHashTable: m('hydrateTable'),
      hydrateNsPerHashSeed: m('hydrateSeed'),
      appendNsPerHashTable: m('appendTable'),
      appendNsPerHashSeed: m('appendSeed'),
      bytesPerHashAfterHydration: table.bytes / table.hashCount,
      bytesPerHashSeedAfterHydration: seed.bytes / seed.hashCount,
      arrayBuffersBytesPerHash: (abAfter - abBefore) / total,
      bytesPerHashSteadyMedian: median(steady.steady),
      bytesPerHashSteadyMax: Math.max(...steady.steady),
      filterBytesPerHashAfterHydration: filter.bytesPerHashAfterHydration,
      filterBytesPerHashSteadyMedian: filter.bytesPerHashSteadyMedian,
      filterBytesPerHashSteadyMax: filter.bytesPerHashSteadyMax,
      filterBitsPerHashAfterHydration: filter.bitsPerHashAfterHydration,
      filterFalsePositivesAfterHydration: filter.falsePositivesAfterHydration,
      filterFalsePositivesMostLoaded: filter.falsePositivesMostLoaded,
      filterAbsentLookupNs: filter.absentLookupNs,
      filterRefreshes: filter.refreshes,
    },
    samples: { ...s, bytesPerHashSteady: steady.steady },
  };
}
