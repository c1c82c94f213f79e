import { FILTER_BITS_PER_HASH, FILTER_GROWTH, HASH_BYTES, UNIT_HASHES } from '../../src/dedup/constants.js';
import { estimateFilterFootprintBytes } from '../../src/dedup/admission.js';
import { PresenceFilter } from '../../src/dedup/presenceFilter.js';

/**
 * The filter tier (src/dedup/presenceFilter.ts) at the dedup-cache suite's
 * window, sized as the cache sizes it (FILTER_BITS_PER_HASH for each hash
 * plus FILTER_GROWTH, blocks rounded up to a power of two):
 * - accounted bytes per hash of a filter entry (estimateFilterFootprintBytes,
 *   what the cache charges) right after a hydration of `total` hashes, and
 *   the worst and median over one more window of appends with expiry
 *   forgetting whole units of 4 096 and the filter rebuilt from the live
 *   window whenever it holds fewer bits per hash added than it is built
 *   with (the cache's refresh rule, DedupCache.filterOverloaded);
 * - false positives per absent lookup (random hashes) right after the
 *   hydration and at the most loaded point (just before a refresh);
 * - ns per absent lookup.
 * Bytes are counted, not sampled from the heap.
 */
export interface FilterTierFootprint {
  bytesPerHashAfterHydration: number;
  bytesPerHashSteadyMax: number;
  bytesPerHashSteadyMedian: number;
  bitsPerHashAfterHydration: number;
  falsePositivesAfterHydration: number;
  falsePositivesMostLoaded: number;
  absentLookupNs: number;
  refreshes: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function built(hashes: Buffer, from: number, to: number): PresenceFilter {
  const f = new PresenceFilter(PresenceFilter.blocksFor((to - from) * (1 + FILTER_GROWTH), FILTER_BITS_PER_HASH));
  for (let i = from; i < to; i++) f.add(hashes.readUInt32BE(i * HASH_BYTES), hashes.readUInt32BE(i * HASH_BYTES + 4));
  return f;
}

function falsePositives(f: PresenceFilter, probes: Buffer, n: number): number {
  let maybe = 0;
  for (let i = 0; i < n; i++) if (f.mayHave(probes.readUInt32BE(i * HASH_BYTES), probes.readUInt32BE(i * HASH_BYTES + 4))) maybe++;
  return maybe / n;
}

/**
 * source: total hashes (the window, offsets 0..total-1); stream: total more
 * (one more window of appends); probes: absent hashes.
 */
export function measureFilterTier(
  source: Buffer,
  stream: Buffer,
  probes: Buffer,
  total: number,
  samplesWanted: number,
): FilterTierFootprint {
  const nProbes = Math.floor(probes.length / HASH_BYTES);
  const all = Buffer.concat([source.subarray(0, total * HASH_BYTES), stream.subarray(0, total * HASH_BYTES)]);
  let f = built(all, 0, total);
  const afterHydration = estimateFilterFootprintBytes(f.blocks, total) / total;
  const bitsAfterHydration = f.bitsPerHash;
  const fpAfter = falsePositives(f, probes, nProbes);

  const pw = probes.subarray(0, nProbes * HASH_BYTES);
  const t0 = process.hrtime.bigint();
  let sink = 0;
  for (let i = 0; i < nProbes; i++) if (f.mayHave(pw.readUInt32BE(i * HASH_BYTES), pw.readUInt32BE(i * HASH_BYTES + 4))) sink++;
  const absentLookupNs = Number(process.hrtime.bigint() - t0) / nProbes;
  if (sink < 0) throw new Error('unreachable');

  const steady: number[] = [];
  const every = Math.max(1, Math.floor(total / samplesWanted));
  let floor = 0;
  let refreshes = 0;
  let fpMostLoaded = fpAfter;
  for (let i = 0; i < total; i++) {
    const off = total + i;
    f.add(all.readUInt32BE(off * HASH_BYTES), all.readUInt32BE(off * HASH_BYTES + 4));
    if ((off + 1) % UNIT_HASHES === 0) floor = off + 1 - total;
    const live = off + 1 - floor;
    if (f.added * FILTER_BITS_PER_HASH > f.blocks * 512) {
      if (refreshes === 0) fpMostLoaded = falsePositives(f, probes, Math.min(nProbes, 50_000));
      f = built(all, floor, off + 1);
      refreshes++;
    }
    if (i % every === every - 1) steady.push(estimateFilterFootprintBytes(f.blocks, live) / live);
  }
  return {
    bytesPerHashAfterHydration: afterHydration,
    bytesPerHashSteadyMax: Math.max(...steady),
    bytesPerHashSteadyMedian: median(steady),
    bitsPerHashAfterHydration: bitsAfterHydration,
    falsePositivesAfterHydration: fpAfter,
    falsePositivesMostLoaded: fpMostLoaded,
    absentLookupNs,
    refreshes,
  };
}
