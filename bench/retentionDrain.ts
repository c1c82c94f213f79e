/**
 * How fast the retention leader drains a backlog, by step concurrency
 * (issue 11: "retention keeps up"). Not part of `make bench`: a short
 * measurement,
 *
 *   make retention-drain     (or: scripts/with-deps.sh --profile run -- node dist/bench/retentionDrain.js [concurrency] [reps])
 *
 * The soak's shape: ONE queue, 64 partitions, segments of 50 messages of
 * 200 bytes. Per repetition a fresh queue gets 30 segments per partition,
 * all aged past retention, and one pass of the RetentionService (default
 * batch rows/bytes) removes them, at concurrency 1 and at the given
 * concurrency (default QUEEN_RETENTION_CONCURRENCY's default), alternating.
 * Prints segments/s and MB/s per arm and the ratio; numbers from a loaded
 * machine are indications only.
 */
import { DEFAULTS } from '../src/config.js';
import { configureQueue } from '../src/engine/queueConfig.js';
import { RetentionService } from '../src/retention/retentionService.js';
import { MetricsRegistry } from '../src/telemetry/metrics.js';
import { createBenchDatabase } from './lib/db.js';
import { counterValue, provisionQueue, startEngineRig } from './lib/engine.js';
import { fmt } from './lib/stats.js';
import { makeItems, MessageFactory } from './lib/synth.js';

const concurrency = Number(process.argv[2] ?? DEFAULTS.retentionConcurrency);
const reps = Number(process.argv[3] ?? 2);
const adminUrl = process.env.DATABASE_URL;
if (!adminUrl) throw new Error('DATABASE_URL is not set (run under scripts/with-deps.sh)');

const db = await createBenchDatabase(adminUrl, 'retention_drain');
try {
  const pool = db.pool(4, 'queen-bench-engine');
  const rig = await startEngineRig(pool, { cacheMb: false });
  try {
    const results = new Map<number, { segments: number; bytes: number; seconds: number; peak: number }>();
    for (let rep = 0; rep < reps; rep++) {
      for (const c of rep % 2 === 0 ? [1, concurrency] : [concurrency, 1]) {
        const queue = `rd${rep}c${c}`;
        const cursors = await provisionQueue(pool, rig.engine, queue, 600, 64);
        await configureQueue(pool, queue, { retentionSeconds: 60 }, 'merge');
        const factory = new MessageFactory(queue, 200);
        for (let s = 0; s < 30; s++) await rig.writer.push(makeItems(queue, cursors, 50, factory));
        // The service starts first, so its automatic first pass finds nothing and the timed pass below is the only one.
        const metrics = new MetricsRegistry();
        const svc = new RetentionService({
          connectionString: db.url,
          intervalMs: 3_600_000,
          batchRows: DEFAULTS.retentionBatchRows,
          concurrency: c,
          metrics,
        });
        await svc.start();
        try {
          while (counterValue(metrics, 'queen_retention_passes_total') < 1) await new Promise((r) => setTimeout(r, 20));
          // Past retention (segments only: the sidecar purge is not what is measured).
          await pool.query(
            `UPDATE queen.log_segments s SET created_at = s.created_at - interval '1 hour'
             WHERE s.partition_id IN (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1)`,
            [queue],
          );
          await pool.query('VACUUM ANALYZE queen.log_segments, queen.log_partitions');
          const t0 = performance.now();
          const sum = await svc.runOnce();
          const seconds = (performance.now() - t0) / 1000;
          const r = results.get(c) ?? { segments: 0, bytes: 0, seconds: 0, peak: 0 };
          results.set(c, {
            segments: r.segments + sum.segmentsRemoved,
            bytes: r.bytes + sum.bytesRemoved,
            seconds: r.seconds + seconds,
            peak: Math.max(r.peak, sum.peakConcurrentSteps),
          });
          console.log(
            `rep ${rep} concurrency ${c}: ${sum.segmentsRemoved} segments (${fmt(sum.bytesRemoved / 1e6)} MB) in ${sum.steps} steps, ${fmt(seconds)} s, peak ${sum.peakConcurrentSteps} steps at once`,
          );
        } finally {
          await svc.stop();
        }
      }
    }
    const rate = (c: number) => {
      const r = results.get(c)!;
      return { segs: r.segments / r.seconds, mbs: r.bytes / 1e6 / r.seconds };
    };
    const one = rate(1);
    const many = rate(concurrency);
    console.log(`concurrency 1: ${fmt(one.segs)} segments/s, ${fmt(one.mbs)} MB/s`);
    console.log(`concurrency ${concurrency}: ${fmt(many.segs)} segments/s, ${fmt(many.mbs)} MB/s (${fmt(many.segs / one.segs)}x)`);
  } finally {
    await rig.stop();
  }
} finally {
  await db.drop();
}
