import { DEFAULTS } from '../../src/config.js';
import { configureQueue } from '../../src/engine/queueConfig.js';
import type { RetentionStepResult } from '../../src/engine/retentionStore.js';
import { RetentionService } from '../../src/retention/retentionService.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { checkpoint, createBenchDatabase } from '../lib/db.js';
import { provisionQueue, startEngineRig, type EngineRig } from '../lib/engine.js';
import { settle } from '../lib/gc.js';
import { fmt, fmtRatio, median, percentile } from '../lib/stats.js';
import { makeItems, MessageFactory, type PartitionCursor } from '../lib/synth.js';
import { target, type Suite, type SuiteContext, type SuiteResult } from '../lib/types.js';

/**
 * What retention costs the push path. One queue with retentionSeconds = 1,
 * so every retention pass has real work: it removes (in bounded one-row-lock
 * steps) everything pushed since the previous pass, which is the steady state
 * of a queue whose retention keeps up. The same pushers run in alternating
 * arms: with the RetentionService at its default cadence
 * (QUEEN_RETENTION_INTERVAL_MS, QUEEN_RETENTION_BATCH_ROWS) and without it.
 * The arm length is longer than the interval, so every "with" arm contains
 * passes (and the first pass of an arm removes the previous "without" arm's
 * backlog, which is the worst case of the cadence).
 */
export const retentionCost: Suite = {
  name: 'retention-cost',
  async run(ctx: SuiteContext): Promise<SuiteResult> {
    const p = ctx.quick
      ? { workers: 2, partitionsPerWorker: 32, msgsPerSegment: 50, armSeconds: 12, reps: 2, payloadBytes: 200 }
      : { workers: 2, partitionsPerWorker: 64, msgsPerSegment: 100, armSeconds: 30, reps: 6, payloadBytes: 200 };
    const db = await createBenchDatabase(ctx.adminUrl, 'retention_cost');
    let rig: EngineRig | undefined;
    try {
      const admin = db.pool(2, 'queen-bench-load');
      const pool = db.pool(p.workers, 'queen-bench-engine');
      rig = await startEngineRig(pool, { cacheMb: 512 });
      const cursors: PartitionCursor[] = await provisionQueue(admin, rig.engine, 'rc', 3600, p.workers * p.partitionsPerWorker);
      await configureQueue(admin, 'rc', { retentionSeconds: 1 }, 'merge');
      const factory = new MessageFactory('rc', p.payloadBytes);
      const writer = rig.writer;

      /** Pushes flat out for `seconds` from every worker; returns msg/s. */
      const pushFor = async (seconds: number): Promise<number> => {
        const until = performance.now() + seconds * 1000;
        let msgs = 0;
        const t0 = performance.now();
        await Promise.all(
          Array.from({ length: p.workers }, async (_, w) => {
            const mine = cursors.slice(w * p.partitionsPerWorker, (w + 1) * p.partitionsPerWorker);
            while (performance.now() < until) {
              const items = makeItems('rc', mine, p.msgsPerSegment, factory);
              const res = await writer.push(items);
              if (res.some((r) => r.status !== 'queued')) throw new Error('retention-cost: a push was not queued');
              msgs += items.length;
            }
          }),
        );
        return msgs / ((performance.now() - t0) / 1000);
      };

      ctx.progress.step(1, 2, 'warm-up');
      await pushFor(2);
      await checkpoint(admin);
      ctx.progress.step(
        2,
        2,
        `${p.reps} repetitions of ${p.armSeconds} s with / without retention (interval ${DEFAULTS.retentionIntervalMs} ms, batch ${DEFAULTS.retentionBatchRows})`,
      );
      const withR: number[] = [];
      const without: number[] = [];
      const pairs: number[] = [];
      const steps: number[] = [];
      const removed = { messages: 0, segments: 0, passes: 0 };
      for (let r = 0; r < p.reps; r++) {
        const order: ('with' | 'without')[] = r % 2 === 0 ? ['with', 'without'] : ['without', 'with'];
        const got: Record<string, number> = {};
        for (const arm of order) {
          await settle();
          let svc: RetentionService | undefined;
          if (arm === 'with') {
            svc = new RetentionService({
              connectionString: db.url,
              intervalMs: DEFAULTS.retentionIntervalMs,
              batchRows: DEFAULTS.retentionBatchRows,
              metrics: new MetricsRegistry(),
              onStep: (_pid: number, s: RetentionStepResult, ms: number) => {
                steps.push(ms);
                removed.messages += s.messagesRemoved;
                removed.segments += s.segmentsRemoved;
              },
            });
            await svc.start();
          }
          try {
            got[arm] = await pushFor(p.armSeconds);
          } finally {
            await svc?.stop();
          }
          (arm === 'with' ? withR : without).push(got[arm]);
        }
        pairs.push(got.with! / got.without!);
        ctx.progress.note(
          `rep ${r + 1}/${p.reps}: with ${fmt(got.with!)} msg/s, without ${fmt(got.without!)} msg/s (${fmtRatio(pairs.at(-1)!)})`,
        );
      }
      const ratio = median(pairs);
      return {
        name: 'retention-cost',
        params: {
          ...p,
          retentionSeconds: 1,
          intervalMs: DEFAULTS.retentionIntervalMs,
          batchRows: DEFAULTS.retentionBatchRows,
          batchBytes: DEFAULTS.retentionBatchBytes,
        },
        results: {
          withMsgPerS: median(withR),
          withoutMsgPerS: median(without),
          withOverWithout: ratio,
          removed,
          stepMs: { p50: percentile(steps, 50), p99: percentile(steps, 99), max: Math.max(0, ...steps), count: steps.length },
        },
        samples: { with: withR, without, pairs, stepMs: steps },
        targets: [
          target('push with retention at default cadence / without', ratio, '>=', 0.9, {
            ratio: true,
            value: `${fmt(median(withR))} msg/s`,
            baseline: `${fmt(median(without))} msg/s`,
          }),
        ],
        info: [
          {
            name: 'retention removed during "with" arms',
            value: `${fmt(removed.messages)} msgs in ${fmt(removed.segments)} segments, ${steps.length} steps`,
          },
          {
            name: 'retention step (one partition row lock) p50 / p99 / max',
            value: `${fmt(percentile(steps, 50))} / ${fmt(percentile(steps, 99))} / ${fmt(Math.max(0, ...steps))} ms`,
          },
        ],
        notes: [
          'retentionSeconds = 1: each pass removes everything pushed since the previous one (the steady state of a queue whose retention keeps up)',
        ],
      };
    } finally {
      await rig?.stop();
      await db.drop();
    }
  },
};
