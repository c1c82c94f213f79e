import { fmt, fmtRatio } from '../lib/stats.js';
import { target, type Suite, type SuiteContext, type SuiteResult, type Target } from '../lib/types.js';
import { runDedupCacheBench } from './dedupCache.js';

/**
 * Suite 3: the broker dedup cache in isolation. The measurement itself is
 * bench/suites/dedupCache.ts (runDedupCacheBench, maintained with src/dedup);
 * this wrapper only turns its numbers into the targets:
 *   absent-probe ns/hash, exact store alone / with the bloom front, >= 10x;
 *   resident bytes per hash <= 22.5 (16 B hash + 4 B offset + bloom; after hydration and the worst sample of
 *   one window of steady appends with expiry running);
 * and reports the false-positive rate and the process-level memory reading.
 */
export const dedupCacheSuite: Suite = {
  name: 'dedup-cache',
  async run(ctx: SuiteContext): Promise<SuiteResult> {
    ctx.progress.step(1, 1, 'absent-probe ns/hash (bloom vs exact), bytes/hash, false-positive rate at a 300-block window');
    const r = await runDedupCacheBench({ quick: ctx.quick });
    const res = r.results as Record<string, number | undefined>;
    const num = (k: string): number => (typeof res[k] === 'number' ? res[k] : NaN);
    const speedup = num('absentProbeSpeedup');
    const bloomNs = num('absentProbeNsPerHashBloom');
    const exactNs = num('absentProbeNsPerHashExactOnly');
    const afterHydration = num('bytesPerHashAfterHydration');
    const steadyMax = num('bytesPerHashSteadyMax');
    const fp = num('bloomFalsePositiveRate');
    const targets: Target[] = [
      target('absent probe: exact-only ns / bloom ns per hash (300 blocks)', speedup, '>=', 10, {
        ratio: true,
        value: `${bloomNs.toFixed(1)} ns/hash`,
        baseline: `${exactNs.toFixed(1)} ns/hash (exact only)`,
      }),
      target('resident bytes/hash after hydration', afterHydration, '<=', 22.5, { unit: 'B', value: `${afterHydration.toFixed(2)} B` }),
      target('resident bytes/hash, worst over a window of appends', steadyMax, '<=', 22.5, {
        unit: 'B',
        value: `${steadyMax.toFixed(2)} B`,
      }),
    ];
    const notes: string[] = [];
    for (const k of ['absentProbeSpeedup', 'bytesPerHashAfterHydration', 'bytesPerHashSteadyMax', 'bloomFalsePositiveRate']) {
      if (typeof res[k] !== 'number') notes.push(`runDedupCacheBench returned no "${k}": its target is reported as missed (NaN)`);
    }
    return {
      name: 'dedup-cache',
      params: { ...r.params, source: 'bench/suites/dedupCache.ts runDedupCacheBench' },
      results: r.results,
      samples: r.samples ?? {},
      targets,
      info: [
        { name: 'bloom false-positive rate (absent hashes, all live generations)', value: `${(fp * 100).toFixed(3)} %` },
        {
          name: 'bytes/hash steady median: rate-aware | plain x8 ladder',
          value: `${num('bytesPerHashSteadyMedian').toFixed(2)} B`,
          baseline: `${num('bytesPerHashLadderSteadyMedian').toFixed(2)} B`,
        },
        { name: 'absent-probe speed-up', value: fmtRatio(speedup), baseline: `${fmt(exactNs)} ns -> ${fmt(bloomNs)} ns` },
      ],
      notes,
    };
  },
};
