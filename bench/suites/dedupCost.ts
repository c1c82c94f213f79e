import type { PushItem } from '../../src/engine/writer.js';
import { addCpu, cpuShares, cpuSince, cpuSnapshot, fmtShares, type CpuDelta } from '../lib/cpu.js';
import { checkpoint, createBenchDatabase } from '../lib/db.js';
import { settle } from '../lib/gc.js';
import { counterValue, provisionQueue, pushAll, startEngineRig, type EngineRig } from '../lib/engine.js';
import { fmt, median } from '../lib/stats.js';
import { bulkLoad, makeItems, MessageFactory, spread, type PartitionCursor } from '../lib/synth.js';
import { target, type Suite, type SuiteContext, type SuiteResult } from '../lib/types.js';

type Mode = 'on' | 'off' | 'nocache';

interface ModeSetup {
  mode: Mode;
  queue: string;
  window: number;
  cacheMb: number | false;
  what: string;
}

const MODES: ModeSetup[] = [
  { mode: 'on', queue: 'dc_on', window: 3600, cacheMb: 512, what: 'dedup on, warm cache (window 3600 s)' },
  { mode: 'off', queue: 'dc_off', window: 0, cacheMb: 512, what: 'dedup off (window 0)' },
  {
    mode: 'nocache',
    queue: 'dc_nocache',
    window: 3600,
    cacheMb: false,
    what: 'cache disabled: p_verified -1, full-window probe (window 3600 s)',
  },
];

/**
 * Suite 2: what deduplication costs. Three queues with identical stored data
 * (bulk-loaded, in window) and identical pushes: dedup on with the warm cache,
 * dedup off (window 0; the service's configuration otherwise unchanged), and
 * the cache disabled (QUEEN_DEDUP_CACHE=0: every segment probes the whole
 * window). Repetitions rotate the mode order. Probe counts come from each
 * engine's own MetricsRegistry (queen_probe_run_total / _skipped_total).
 */
export const dedupCost: Suite = {
  name: 'dedup-cost',
  async run(ctx: SuiteContext): Promise<SuiteResult> {
    const p = ctx.quick
      ? {
          storedPerQueue: 100_000,
          workers: 2,
          partitionsPerWorker: 64,
          msgsPerSegment: 100,
          bundlesPerRep: 2,
          reps: 6,
          nocacheEvery: 2,
          warmupBundles: 3,
          payloadBytes: 100,
          segFrames: 1000,
        }
      : {
          storedPerQueue: 1_000_000,
          workers: 2,
          partitionsPerWorker: 64,
          msgsPerSegment: 100,
          // 12 bundles (~1.2 s) per repetition: with 3 (~0.3 s) single
          // on/off pairs ranged 0.74-1.30 and two runs' medians read 0.84
          // and 1.02, wider than the 0.95 target they are compared with.
          bundlesPerRep: 12,
          reps: 16,
          nocacheEvery: 4,
          warmupBundles: 3,
          payloadBytes: 100,
          segFrames: 1000,
        };
    const db = await createBenchDatabase(ctx.adminUrl, 'dedup_cost');
    const rigs = new Map<Mode, EngineRig>();
    try {
      const admin = db.pool(4, 'queen-bench-load');
      const pool = db.pool(p.workers, 'queen-bench-engine');
      const factory = new MessageFactory('dc', p.payloadBytes);
      const cursors = new Map<Mode, PartitionCursor[]>();
      const n = MODES.length + 1;
      for (const [i, m] of MODES.entries()) {
        ctx.progress.step(i + 1, n, `${m.mode}: provisioning and loading ${fmt(p.storedPerQueue)} in-window messages`);
        const rig = await startEngineRig(pool, { cacheMb: m.cacheMb });
        rigs.set(m.mode, rig);
        const cs = await provisionQueue(admin, rig.engine, m.queue, m.window, p.workers * p.partitionsPerWorker);
        cursors.set(m.mode, cs);
        await bulkLoad(admin, {
          partitions: cs.map((cursor) => ({ cursor, nextOffset: 0 })),
          counts: spread(p.storedPerQueue, cs.length),
          factory,
          segFrames: p.segFrames,
          createdMs: Date.now(),
          engine: true,
        });
      }
      await admin.query('ANALYZE queen.log_segments; ANALYZE queen.log_txns; ANALYZE queen.log_partitions');
      await checkpoint(admin);

      const bundles = (m: Mode, count: number): PushItem[][][] => {
        const cs = cursors.get(m)!;
        const q = MODES.find((x) => x.mode === m)!.queue;
        return Array.from({ length: p.workers }, (_, w) =>
          Array.from({ length: count }, () =>
            makeItems(q, cs.slice(w * p.partitionsPerWorker, (w + 1) * p.partitionsPerWorker), p.msgsPerSegment, factory),
          ),
        );
      };
      ctx.progress.step(n, n, 'warm-up (the "on" cache hydrates), then interleaved repetitions');
      for (const m of MODES) await pushAll(rigs.get(m.mode)!.writer, bundles(m.mode, p.warmupBundles));

      const rate = new Map<Mode, number[]>(MODES.map((m) => [m.mode, []]));
      const cpu = new Map<Mode, CpuDelta[]>(MODES.map((m) => [m.mode, []]));
      const probes = new Map<Mode, { run: number; skipped: number }>();
      const base = new Map(
        MODES.map((m) => [
          m.mode,
          {
            run: counterValue(rigs.get(m.mode)!.metrics, 'queen_probe_run_total'),
            skipped: counterValue(rigs.get(m.mode)!.metrics, 'queen_probe_skipped_total'),
          },
        ]),
      );
      const vouched0 = rigs.get('on')!.cache!.stats.vouched;
      const notVouched0 = rigs.get('on')!.cache!.stats.notVouched;
      const pairs: number[] = [];
      const pairsNoCache: number[] = [];
      for (let r = 0; r < p.reps; r++) {
        // on and off in every repetition, in alternating order; the slow
        // cache-disabled arm only every nocacheEvery-th, between them.
        const [a, b] = r % 2 === 0 ? [MODES[0]!, MODES[1]!] : [MODES[1]!, MODES[0]!];
        const order = r % p.nocacheEvery === 0 ? [a, MODES[2]!, b] : [a, b];
        ctx.progress.note(`rep ${r + 1}/${p.reps}: ${order.map((m) => m.mode).join(', ')}`);
        const got = new Map<Mode, number>();
        for (const m of order) {
          const b = bundles(m.mode, p.bundlesPerRep);
          const msgs = b.flat().reduce((k, x) => k + x.length, 0);
          await settle();
          const c = cpuSnapshot();
          const t = performance.now();
          await pushAll(rigs.get(m.mode)!.writer, b);
          const v = msgs / ((performance.now() - t) / 1000);
          cpu.get(m.mode)!.push(cpuSince(c));
          rate.get(m.mode)!.push(v);
          got.set(m.mode, v);
        }
        pairs.push(got.get('on')! / got.get('off')!);
        if (got.has('nocache')) pairsNoCache.push(got.get('nocache')! / got.get('off')!);
      }
      for (const m of MODES) {
        const mt = rigs.get(m.mode)!.metrics;
        probes.set(m.mode, {
          run: counterValue(mt, 'queen_probe_run_total') - base.get(m.mode)!.run,
          skipped: counterValue(mt, 'queen_probe_skipped_total') - base.get(m.mode)!.skipped,
        });
      }
      const on = rigs.get('on')!.cache!.stats;
      const med = (m: Mode): number => median(rate.get(m)!);
      const ratio = median(pairs);
      const pr = (m: Mode): string => `${probes.get(m)!.run}/${probes.get(m)!.skipped}`;
      const cs = (m: Mode): string => fmtShares(addCpu(cpu.get(m)!));
      return {
        name: 'dedup-cost',
        params: {
          ...p,
          modes: MODES,
          connections: p.workers,
          bundle: `${p.partitionsPerWorker} partitions x ${p.msgsPerSegment} msgs per worker`,
        },
        results: {
          msgPerS: Object.fromEntries(MODES.map((m) => [m.mode, med(m.mode)])),
          onOverOff: ratio,
          nocacheOverOff: median(pairsNoCache),
          probes: Object.fromEntries(probes),
          onCache: {
            vouched: on.vouched - vouched0,
            notVouched: on.notVouched - notVouched0,
            hydrations: on.hydrations,
            localHits: on.localHits,
          },
          cpuShares: Object.fromEntries(MODES.map((m) => [m.mode, cpuShares(addCpu(cpu.get(m.mode)!))])),
        },
        samples: { rate: Object.fromEntries(rate), pairsOnOff: pairs, pairsNocacheOff: pairsNoCache, cpu: Object.fromEntries(cpu) },
        targets: [
          target('dedup on (warm cache) / dedup off', ratio, '>=', 0.95, {
            ratio: true,
            value: `${fmt(med('on'))} msg/s`,
            baseline: `${fmt(med('off'))} msg/s`,
          }),
        ],
        info: [
          {
            name: 'cache disabled (-1, full-window probe) / dedup off',
            value: `${fmt(med('nocache'))} msg/s`,
            baseline: `${fmt(med('off'))} msg/s`,
            ratio: median(pairsNoCache),
          },
          { name: 'probes run/skipped in timed reps: on', value: pr('on') },
          { name: 'probes run/skipped in timed reps: off', value: pr('off') },
          { name: 'probes run/skipped in timed reps: cache disabled', value: pr('nocache') },
          { name: 'CPU: on | off', value: cs('on'), baseline: cs('off') },
          { name: 'CPU: cache disabled', value: cs('nocache') },
        ],
        notes: [
          `stored ${fmt(p.storedPerQueue)} in-window messages per queue before the first push; each queue then received the same pushes (the cache-disabled queue fewer: it is measured every ${p.nocacheEvery}th repetition)`,
        ],
      };
    } finally {
      for (const r of rigs.values()) await r.stop();
      await db.drop();
    }
  },
};
