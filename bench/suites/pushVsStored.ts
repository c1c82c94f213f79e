import type { PushItem } from '../../src/engine/writer.js';
import {
  BASELINE_COPY_SQL,
  BASELINE_RELATIONS,
  createUniqueIndexBaseline,
  pushBaseline,
  type BaselineMessage,
} from '../baselines/uniqueIndex.js';
import { addCpu, cpuShares, cpuSince, cpuSnapshot, fmtShares, type CpuDelta } from '../lib/cpu.js';
import { checkpoint, createBenchDatabase, type BenchDatabase } from '../lib/db.js';
import { settle } from '../lib/gc.js';
import { counterValue, provisionQueue, pushAll, startEngineRig, type EngineRig } from '../lib/engine.js';
import { fmt, fmtRatio, median } from '../lib/stats.js';
import { bulkLoad, makeItems, MessageFactory, nextOffsets, relationBytes, spread, type PartitionCursor } from '../lib/synth.js';
import { target, type Info, type Suite, type SuiteContext, type SuiteResult } from '../lib/types.js';

const ENGINE_RELATIONS = ['queen.log_segments', 'queen.log_txns'];
const QUEUE = 'bench';

type Arm = 'engine' | 'baseline' | 'zero';
const ARMS: Arm[] = ['engine', 'baseline', 'zero'];

interface StepResult {
  storedTarget: number;
  stored: number;
  rates: Record<Arm, number[]>;
  /** Per repetition: engine / baseline and engine / engine on the empty reference store, measured side by side. */
  engineOverBaseline: number[];
  engineOverZero: number[];
  medians: Record<Arm, number>;
  engineBytesPerMsg: number;
  baselineBytesPerMsg: number;
  probesRun: number;
  probesSkipped: number;
  hydrations: number;
  loadSeconds: number;
  cpu: Record<Arm, CpuDelta>;
}

/**
 * Suite 1: bundle push through the engine (dedup on, warm cache) vs the
 * unique-index baseline, at growing stored sizes.
 *
 * Both stores live in one database (same PostgreSQL settings), get the same
 * messages (bulk-loaded with COPY to reach each size, then the same timed
 * bundles), through the same number of connections. A third arm, the engine
 * on an empty reference store (its own database, truncated before every
 * step), is measured in the same repetitions, so "engine at N / engine at 0"
 * is a side-by-side ratio too and not a comparison of two moments of a shared
 * machine. Repetitions rotate the order: E B Z, B Z E, Z E B, ...
 */
export const pushVsStored: Suite = {
  name: 'push-vs-stored',
  async run(ctx: SuiteContext): Promise<SuiteResult> {
    const p = ctx.quick
      ? {
          sizes: [0, 250_000, 500_000],
          workers: 2,
          partitionsPerWorker: 64,
          msgsPerSegment: 100,
          bundlesPerRep: 2,
          reps: 6,
          warmupBundles: 3,
          payloadBytes: 100,
          segFrames: 1000,
          windowSeconds: 3600,
          cacheMb: 512,
        }
      : {
          sizes: [0, 1_000_000, 2_500_000, 5_000_000, 7_500_000, 10_000_000],
          workers: 2,
          partitionsPerWorker: 64,
          msgsPerSegment: 100,
          bundlesPerRep: 4,
          reps: 9,
          warmupBundles: 3,
          payloadBytes: 100,
          segFrames: 1000,
          windowSeconds: 3600,
          cacheMb: 512,
        };
    const dbs: BenchDatabase[] = [];
    const steps: StepResult[] = [];
    const notes: string[] = [];
    const rigs: EngineRig[] = [];
    try {
      const db = await createBenchDatabase(ctx.adminUrl, 'push_vs_stored');
      dbs.push(db);
      const zdb = await createBenchDatabase(ctx.adminUrl, 'push_vs_stored_zero');
      dbs.push(zdb);
      const admin = db.pool(4, 'queen-bench-load');
      const enginePool = db.pool(p.workers, 'queen-bench-engine');
      const basePool = db.pool(p.workers, 'queen-bench-baseline');
      const zadmin = zdb.pool(1, 'queen-bench-load');
      const zeroPool = zdb.pool(p.workers, 'queen-bench-engine-zero');
      await createUniqueIndexBaseline(admin);
      const setupRig = await startEngineRig(enginePool, { cacheMb: false });
      const cursors = await provisionQueue(admin, setupRig.engine, QUEUE, p.windowSeconds, p.workers * p.partitionsPerWorker);
      await setupRig.stop();
      const zsetup = await startEngineRig(zeroPool, { cacheMb: false });
      await provisionQueue(zadmin, zsetup.engine, QUEUE, p.windowSeconds, p.workers * p.partitionsPerWorker);
      await zsetup.stop();
      const groups: PartitionCursor[][] = Array.from({ length: p.workers }, (_, w) =>
        cursors.slice(w * p.partitionsPerWorker, (w + 1) * p.partitionsPerWorker),
      );
      const idOf = new Map(cursors.map((c) => [c.name, c.id]));
      const toBaseline = (items: PushItem[]): BaselineMessage[] =>
        items.map((it) => ({ partitionId: idOf.get(it.partition!)!, transactionId: it.transactionId!, payload: it.payload }));
      const factory = new MessageFactory('pvs', p.payloadBytes);
      const bundlesFor = (n: number): PushItem[][][] =>
        groups.map((g) => Array.from({ length: n }, () => makeItems(QUEUE, g, p.msgsPerSegment, factory)));
      const runBaseline = async (bundles: BaselineMessage[][][]): Promise<void> => {
        await Promise.all(
          bundles.map(async (list) => {
            for (const msgs of list) {
              const n = await pushBaseline(basePool, msgs);
              if (n !== msgs.length) throw new Error(`baseline push inserted ${n} of ${msgs.length}`);
            }
          }),
        );
      };
      let stored = 0;

      for (let si = 0; si < p.sizes.length; si++) {
        const size = p.sizes[si]!;
        ctx.progress.step(si + 1, p.sizes.length, `stored ${fmt(size)}: loading`);
        const t0 = Date.now();
        const need = size - stored;
        if (need > 0) {
          const offs = await nextOffsets(
            admin,
            cursors.map((c) => c.id),
          );
          await bulkLoad(admin, {
            partitions: cursors.map((cursor) => ({ cursor, nextOffset: offs.get(cursor.id)! })),
            counts: spread(need, cursors.length),
            factory,
            segFrames: p.segFrames,
            createdMs: Date.now(),
            engine: true,
            baselineCopySql: BASELINE_COPY_SQL,
            onProgress: (d, t) => ctx.progress.note(`COPY ${fmt(d)}/${fmt(t)} messages into both stores`),
          });
          stored += need;
        }
        // The reference store starts every step empty.
        await zadmin.query(
          'TRUNCATE queen.log_segments, queen.log_txns; UPDATE queen.log_partitions SET last_offset = -1, txns_start = 0, last_write_at = NULL',
        );
        await admin.query(
          'ANALYZE queen.log_segments; ANALYZE queen.log_txns; ANALYZE queen.log_partitions; ANALYZE bench_baseline.messages',
        );
        if (!(await checkpoint(admin)) && si === 0) notes.push('CHECKPOINT not permitted: load write-back may overlap measurements');
        const loadSeconds = (Date.now() - t0) / 1000;
        const engineBytes = await relationBytes(admin, ENGINE_RELATIONS);
        const baseBytes = await relationBytes(admin, BASELINE_RELATIONS);
        const storedNow = stored;

        // Fresh caches per step: the engine's hydration (in the warm-up
        // bundles) is the full-window fetch of everything just loaded.
        const rig = await startEngineRig(enginePool, { cacheMb: p.cacheMb });
        const zrig = await startEngineRig(zeroPool, { cacheMb: p.cacheMb });
        rigs.push(rig, zrig);
        ctx.progress.note(`stored ${fmt(storedNow)}: warm-up (engine hydrates ${cursors.length} partitions)`);
        {
          const w = bundlesFor(p.warmupBundles);
          await pushAll(rig.writer, w);
          await runBaseline(w.map((l) => l.map(toBaseline)));
          await pushAll(zrig.writer, w);
          stored += w.flat().reduce((n, b) => n + b.length, 0);
        }
        const run0 = counterValue(rig.metrics, 'queen_probe_run_total');
        const skip0 = counterValue(rig.metrics, 'queen_probe_skipped_total');
        const rates: Record<Arm, number[]> = { engine: [], baseline: [], zero: [] };
        const cpus: Record<Arm, CpuDelta[]> = { engine: [], baseline: [], zero: [] };
        const eb: number[] = [];
        const ez: number[] = [];
        for (let r = 0; r < p.reps; r++) {
          const order = ARMS.map((_, i) => ARMS[(i + r) % ARMS.length]!);
          ctx.progress.note(`stored ${fmt(storedNow)}: rep ${r + 1}/${p.reps} (${order.join(', ')})`);
          const b = bundlesFor(p.bundlesPerRep);
          const bb = b.map((l) => l.map(toBaseline));
          const msgs = b.flat().reduce((n, x) => n + x.length, 0);
          const got = {} as Record<Arm, number>;
          for (const arm of order) {
            await settle();
            const c = cpuSnapshot();
            const t = performance.now();
            if (arm === 'engine') await pushAll(rig.writer, b);
            else if (arm === 'zero') await pushAll(zrig.writer, b);
            else await runBaseline(bb);
            got[arm] = msgs / ((performance.now() - t) / 1000);
            cpus[arm].push(cpuSince(c));
            rates[arm].push(got[arm]);
          }
          eb.push(got.engine / got.baseline);
          ez.push(got.engine / got.zero);
          stored += msgs;
        }
        const probesRun = counterValue(rig.metrics, 'queen_probe_run_total') - run0;
        const probesSkipped = counterValue(rig.metrics, 'queen_probe_skipped_total') - skip0;
        for (const r of [rig, zrig])
          if (r.hydrationErrors.length > 0)
            notes.push(`stored ${storedNow}: ${r.hydrationErrors.length} hydration error(s): ${String(r.hydrationErrors[0])}`);
        const hydrations = rig.cache?.stats.hydrations ?? 0;
        await rig.stop();
        await zrig.stop();
        const st: StepResult = {
          storedTarget: size,
          stored: storedNow,
          rates,
          engineOverBaseline: eb,
          engineOverZero: ez,
          medians: { engine: median(rates.engine), baseline: median(rates.baseline), zero: median(rates.zero) },
          engineBytesPerMsg: storedNow > 0 ? engineBytes / storedNow : NaN,
          baselineBytesPerMsg: storedNow > 0 ? baseBytes / storedNow : NaN,
          probesRun,
          probesSkipped,
          hydrations,
          loadSeconds,
          cpu: { engine: addCpu(cpus.engine), baseline: addCpu(cpus.baseline), zero: addCpu(cpus.zero) },
        };
        steps.push(st);
        ctx.progress.note(
          `stored ${fmt(storedNow)}: engine ${fmt(st.medians.engine)}, baseline ${fmt(st.medians.baseline)}, empty-store engine ${fmt(st.medians.zero)} msg/s; engine/baseline ${fmtRatio(median(eb))}, engine/empty ${fmtRatio(median(ez))}; probes run/skipped ${probesRun}/${probesSkipped}`,
        );
      }
      const finalEngineBytes = await relationBytes(admin, ENGINE_RELATIONS);
      const finalBaseBytes = await relationBytes(admin, BASELINE_RELATIONS);
      const first = steps[0]!;
      const last = steps[steps.length - 1]!;
      const flat = median(last.engineOverZero);
      const vsBase = median(last.engineOverBaseline);
      const info: Info[] = [
        {
          name: `bytes/msg at ${fmt(stored)} stored (heap+TOAST+indexes)`,
          value: `${(finalEngineBytes / stored).toFixed(1)} B`,
          baseline: `${(finalBaseBytes / stored).toFixed(1)} B`,
          ratio: finalEngineBytes / finalBaseBytes,
        },
        { name: `engine msg/s by step (0 -> ${fmt(last.stored)})`, value: steps.map((s) => fmt(s.medians.engine)).join(', ') },
        { name: `baseline msg/s by step`, value: steps.map((s) => fmt(s.medians.baseline)).join(', ') },
        { name: `engine / baseline by step`, value: steps.map((s) => fmtRatio(median(s.engineOverBaseline))).join(', ') },
        {
          name: `engine at ${fmt(last.stored)} / engine at 0 (not side by side: two moments)`,
          value: `${fmt(last.medians.engine)} / ${fmt(first.medians.engine)}`,
          ratio: last.medians.engine / first.medians.engine,
        },
        {
          name: `probes run/skipped in timed engine reps (all steps)`,
          value: `${steps.reduce((n, s) => n + s.probesRun, 0)}/${steps.reduce((n, s) => n + s.probesSkipped, 0)}`,
        },
        {
          name: `CPU at ${fmt(last.stored)}: engine | baseline`,
          value: fmtShares(last.cpu.engine),
          baseline: fmtShares(last.cpu.baseline),
        },
      ];
      return {
        name: 'push-vs-stored',
        params: {
          ...p,
          queue: QUEUE,
          bundle: `${p.partitionsPerWorker} partitions x ${p.msgsPerSegment} msgs per worker and bundle`,
          connections: p.workers,
          referenceStore: 'engine on an empty database, truncated before each step, same bundles, same repetitions',
        },
        results: {
          steps: steps.map((s) => ({
            stored: s.stored,
            engineMsgPerS: s.medians.engine,
            baselineMsgPerS: s.medians.baseline,
            emptyStoreEngineMsgPerS: s.medians.zero,
            engineOverBaseline: median(s.engineOverBaseline),
            engineOverEmptyStore: median(s.engineOverZero),
            engineBytesPerMsg: s.engineBytesPerMsg,
            baselineBytesPerMsg: s.baselineBytesPerMsg,
            probesRun: s.probesRun,
            probesSkipped: s.probesSkipped,
            hydrations: s.hydrations,
            loadSeconds: s.loadSeconds,
            cpuShares: { engine: cpuShares(s.cpu.engine), baseline: cpuShares(s.cpu.baseline), zero: cpuShares(s.cpu.zero) },
            clientCpuUsPerMsg: {
              engine: (s.cpu.engine.clientMs * 1000) / (p.reps * p.bundlesPerRep * p.workers * p.partitionsPerWorker * p.msgsPerSegment),
              baseline:
                (s.cpu.baseline.clientMs * 1000) / (p.reps * p.bundlesPerRep * p.workers * p.partitionsPerWorker * p.msgsPerSegment),
            },
            postgresCpuUsPerMsg: {
              engine: (s.cpu.engine.postgresMs * 1000) / (p.reps * p.bundlesPerRep * p.workers * p.partitionsPerWorker * p.msgsPerSegment),
              baseline:
                (s.cpu.baseline.postgresMs * 1000) / (p.reps * p.bundlesPerRep * p.workers * p.partitionsPerWorker * p.msgsPerSegment),
            },
          })),
          finalStored: stored,
          finalEngineBytesPerMsg: finalEngineBytes / stored,
          finalBaselineBytesPerMsg: finalBaseBytes / stored,
          engineMaxOverEmptyStore: flat,
          engineOverBaselineAtMax: vsBase,
        },
        samples: { steps },
        curves: [
          {
            name: 'msgs-per-s',
            title: 'Push throughput vs stored messages',
            xLabel: 'stored messages',
            yLabel: 'msg/s (median of repetitions)',
            series: [
              { name: 'engine (dedup on, warm cache)', points: steps.map((s) => [s.stored, s.medians.engine]) },
              { name: 'unique-index baseline', points: steps.map((s) => [s.stored, s.medians.baseline]) },
              { name: 'engine, empty store (reference)', points: steps.map((s) => [s.stored, s.medians.zero]) },
            ],
          },
        ],
        targets: [
          target(`engine at ${fmt(last.stored)} / engine at 0 (empty store, side by side)`, flat, '>=', 0.9, {
            ratio: true,
            value: `${fmt(last.medians.engine)} msg/s`,
            baseline: `${fmt(last.medians.zero)} msg/s`,
          }),
          target(`engine / baseline at ${fmt(last.stored)}`, vsBase, '>=', 2, {
            ratio: true,
            value: `${fmt(last.medians.engine)} msg/s`,
            baseline: `${fmt(last.medians.baseline)} msg/s`,
          }),
        ],
        info,
        notes,
      };
    } finally {
      for (const r of rigs) await r.stop();
      for (const d of dbs) await d.drop();
    }
  },
};
