/**
 * How long one retention step holds its partition row lock (issue 11: "at
 * most a few milliseconds"). Not part of `make bench`: a short measurement,
 *
 *   make retention-lock-hold          (or: scripts/with-deps.sh --profile run -- node dist/bench/retentionLock.js [batchRows])
 *
 * For segments of 1, 10 and 100 messages (200-byte payloads) it stores a
 * backlog of 10 (3 for 100) full row batches per partition in 4 partitions, ages it past
 * retention, and runs the RetentionService at the given batch (default: the
 * broker's default QUEEN_RETENTION_BATCH_ROWS), timing every step. A step is
 * one autocommit statement whose first action takes the row lock and whose
 * commit (WAL flush included) releases it, so the step's round-trip time is
 * an upper bound of the lock hold. Prints p50 / p99 / max per shape, and the
 * floor: a one-row UPDATE's autocommit round trip on the same machine.
 */
import { DEFAULTS } from '../src/config.js';
import { configureQueue } from '../src/engine/queueConfig.js';
import { RetentionService } from '../src/retention/retentionService.js';
import { MetricsRegistry } from '../src/telemetry/metrics.js';
import { createBenchDatabase } from './lib/db.js';
import { provisionQueue, startEngineRig } from './lib/engine.js';
import { fmt, percentile } from './lib/stats.js';
import { makeItems, MessageFactory } from './lib/synth.js';

const batchRows = Number(process.argv[2] ?? DEFAULTS.retentionBatchRows);
const adminUrl = process.env.DATABASE_URL;
if (!adminUrl) throw new Error('DATABASE_URL is not set (run under scripts/with-deps.sh)');

const db = await createBenchDatabase(adminUrl, 'retention_lock');
try {
  const pool = db.pool(4, 'queen-bench-engine');
  const rig = await startEngineRig(pool, { cacheMb: false });
  try {
    // The floor on this machine: a one-row-lock transaction that changes
    // nothing but still commits (round trip + WAL flush + scheduling).
    const pid = (await provisionQueue(pool, rig.engine, 'rlfloor', 3600, 1))[0]!.id;
    const floor: number[] = [];
    for (let i = 0; i < 50; i++) {
      const t0 = performance.now();
      await pool.query('UPDATE queen.log_partitions SET log_start = log_start WHERE id = $1', [pid]);
      floor.push(performance.now() - t0);
    }
    console.log(`floor (one-row UPDATE, autocommit): p50 ${fmt(percentile(floor, 50))} ms, p99 ${fmt(percentile(floor, 99))} ms`);
    for (const perSegment of [1, 10, 100]) {
      const queue = `rl${perSegment}`;
      const cursors = await provisionQueue(pool, rig.engine, queue, 3600, 4);
      await configureQueue(pool, queue, { retentionSeconds: 60 }, 'merge');
      const factory = new MessageFactory(queue, 200);
      // Enough full batches for a few dozen steps per shape.
      for (let s = 0; s < (perSegment === 100 ? 3 : 10) * batchRows; s++)
        await rig.writer.push(makeItems(queue, cursors, perSegment, factory));
      for (const table of ['log_segments', 'log_txns']) {
        await pool.query(
          `UPDATE queen.${table} x SET created_at = x.created_at - interval '2 hours'
           FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE x.partition_id = lp.id AND q.name = $1`,
          [queue],
        );
      }
      await pool.query('VACUUM ANALYZE queen.log_segments, queen.log_txns, queen.log_partitions');
      const steps: number[] = [];
      let removed = 0;
      const svc = new RetentionService({
        connectionString: db.url,
        intervalMs: 3_600_000,
        batchRows,
        metrics: new MetricsRegistry(),
        onStep: (_pid, r, ms) => {
          if (r.segmentsRemoved + r.txnsRowsRemoved > 0) steps.push(ms);
          removed += r.segmentsRemoved;
        },
      });
      await svc.start();
      try {
        await svc.runOnce();
      } finally {
        await svc.stop();
      }
      console.log(
        `segments of ${String(perSegment).padStart(3)} msgs, batch ${batchRows} rows / ${DEFAULTS.retentionBatchBytes} B: ${steps.length} steps removed ${removed} segments; ` +
          `step (= partition row lock hold, upper bound) p50 ${fmt(percentile(steps, 50))} ms, p99 ${fmt(percentile(steps, 99))} ms, max ${fmt(Math.max(...steps))} ms`,
      );
    }
  } finally {
    await rig.stop();
  }
} finally {
  await db.drop();
}
