import type { DedupCache } from '../../src/dedup/index.js';

/**
 * What a small budget's entries hold after a suite's passes: how many are
 * filters, the bits a hash their generations have (blocks x 512 over the
 * in-window hashes they know: the density the false positives follow), the
 * generations an entry has, and the cache's demotions, folds and growths so
 * far. A budget's bytes a hash are only as good as this density.
 */
export function filterState(cache: DedupCache, ids: readonly number[]): string {
  const perEntry: number[] = [];
  let exact = 0;
  let bits = 0;
  let hashes = 0;
  let generations = 0;
  for (const id of ids) {
    const e = cache.entryInfo(id);
    if (e === undefined) continue;
    if (e.tier === 'exact') {
      exact++;
      continue;
    }
    perEntry.push((e.pages * 512) / Math.max(1, e.hashes));
    bits += e.pages * 512;
    hashes += e.hashes;
    generations += e.generations;
  }
  const filters = perEntry.length;
  perEntry.sort((a, b) => a - b);
  const at = (q: number) => (filters === 0 ? NaN : perEntry[Math.min(filters - 1, Math.floor(q * filters))]!);
  const st = cache.stats;
  return (
    `${filters} filters (${(bits / Math.max(1, hashes)).toFixed(1)} bits a hash; min / median / max an entry ` +
    `${at(0).toFixed(1)} / ${at(0.5).toFixed(1)} / ${at(1).toFixed(1)}; ${(generations / Math.max(1, filters)).toFixed(1)} generations), ` +
    `${exact} exact, ${ids.length - filters - exact} none; demotions ${st.demotions}, folds ${st.folds}, growths ${st.filterGrowths}, ` +
    `builds at ${cache.filterBitsPerHash().toFixed(1)} bits`
  );
}
