import { HASH_BYTES, UNIT_HASHES } from '../../src/dedup/constants.js';
import { CompactTier } from '../../src/dedup/compactTier.js';

/**
 * The compact tier (src/dedup/compactTier.ts) at the dedup-cache suite's
 * window, driven directly (the cache uses it only with compactTier on):
 * - resident bytes per hash right after a hydration of `total` hashes, and
 *   the worst and median over one more window of appends with the floor
 *   rising by whole units of 4 096, as the entry's expiry raises it;
 * - false candidates per absent lookup (random hashes: every name is
 *   false), with exact offsets (what log_push_v11 takes) and with 256-offset
 *   spans (what a span check in SQL would take);
 * - ns per absent lookup, exact offsets.
 * Bytes are counted, not sampled from the heap, so they are deterministic
 * for given hashes; the rates vary with the random secret by a few %.
 */
export interface CompactTierFootprint {
  bytesPerHashAfterHydration: number;
  bytesPerHashSteadyMax: number;
  bytesPerHashSteadyMedian: number;
  generationsAfterHydration: number;
  falseCandidatesPerAbsentLookup: number;
  falseCandidatesPerAbsentLookupSpans256: number;
  generationsSpans256: number;
  absentLookupNs: number;
}

const words = (b: Buffer, i: number): [number, number, number, number] => {
  const at = i * HASH_BYTES;
  return [b.readUInt32BE(at), b.readUInt32BE(at + 4), b.readUInt32BE(at + 8), b.readUInt32BE(at + 12)];
};

function hydrated(source: Buffer, total: number, spanBits: number): CompactTier {
  const tier = new CompactTier(spanBits === 0 ? {} : { spanBits, deltaBits: 12 });
  tier.expect(total);
  for (let i = 0; i < total; i++) tier.append(...words(source, i), i);
  return tier;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * source: total hashes (the window, offsets 0..total-1); stream: total more
 * (one more window of appends); probes: absent hashes.
 */
export function measureCompactTier(
  source: Buffer,
  stream: Buffer,
  probes: Buffer,
  total: number,
  samplesWanted: number,
): CompactTierFootprint {
  const nProbes = Math.floor(probes.length / HASH_BYTES);
  const tier = hydrated(source, total, 0);
  const afterHydration = tier.bytes / tier.size;
  const generationsAfterHydration = tier.generations;

  const out: number[] = [];
  let names = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < nProbes; i++) {
    out.length = 0;
    names += tier.collect(...words(probes, i), out);
  }
  const absentLookupNs = Number(process.hrtime.bigint() - t0) / nProbes;

  const spans = hydrated(source, total, 8);
  let spanNames = 0;
  for (let i = 0; i < nProbes; i++) {
    out.length = 0;
    spanNames += spans.collect(...words(probes, i), out);
  }

  // One more window of appends; the floor follows whole units, as expiry raises it.
  const steady: number[] = [];
  const every = Math.max(1, Math.floor(total / samplesWanted));
  let floor = -1;
  for (let i = 0; i < total; i++) {
    const off = total + i;
    tier.append(...words(stream, i), off);
    if ((off + 1) % UNIT_HASHES === 0) tier.raiseFloor((floor = off - total));
    if (i % every === every - 1) steady.push(tier.bytes / (off - floor));
  }
  return {
    bytesPerHashAfterHydration: afterHydration,
    bytesPerHashSteadyMax: Math.max(...steady),
    bytesPerHashSteadyMedian: median(steady),
    generationsAfterHydration,
    falseCandidatesPerAbsentLookup: names / nProbes,
    falseCandidatesPerAbsentLookupSpans256: spanNames / nProbes,
    generationsSpans256: spans.generations,
    absentLookupNs,
  };
}
