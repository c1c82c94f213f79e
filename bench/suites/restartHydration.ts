import { Compactor } from '../../src/compaction/compactor.js';
import { DEFAULTS } from '../../src/config.js';
import { compactOnLongProbes } from '../../src/pipeline.js';
import { createBenchDatabase } from '../lib/db.js';
import { provisionQueue, startEngineRig, type EngineRig } from '../lib/engine.js';
import { rng } from '../lib/rng.js';
import { fmt, median } from '../lib/stats.js';
import { loadInWindow, MessageFactory, resentBundle, spread, type PartitionCursor } from '../lib/synth.js';
import { target, type Info, type SuiteContext, type Target } from '../lib/types.js';

/**
 * memory-pressure's "restart with N in window" rows (issue 38: "a broker
 * restarted with 20 M hashes in window reaches >= 0.8x its full rate within
 * 30 s"). Two queues of 32 partitions each hold the same N in-window
 * messages (one-hour window), loaded with COPY, so no broker has seen them.
 * Two brokers, one after the other, each with the default cache budget, a
 * fresh cache and the compactor the pipeline wires, pushing flat out from
 * two loops (1 000-item pushes, 10 % of the ids re-sent from everything
 * sent so far):
 *
 * - the warm broker, on the first queue, pushes until its cache holds every
 *   partition, then for `steadySeconds` more: its rate there is the full
 *   rate;
 * - the restarted broker, on the second queue (still exactly N in window,
 *   as a broker restarted over a window of N finds it): its rate per second
 *   from its first push is compared with the full rate. Reported: the
 *   seconds until a 3-second moving rate first reaches 0.8x, and the rate
 *   over the first 30 s.
 *
 * Every verdict is checked: a re-sent id must come back duplicate, a new one
 * queued.
 */
const PARTITIONS = 32;
const LOOPS = 2;
const BUNDLE = 1000;
const RESENT = 0.1;

export interface RestartResult {
  targets: Target[];
  info: Info[];
  samples: { warmPerSecond: number[]; restartPerSecond: number[] };
  params: Record<string, unknown>;
}

interface Loop {
  /** Items answered in each whole second since the start. */
  perSecond: number[];
}

export async function restartHydration(ctx: SuiteContext): Promise<RestartResult> {
  const p = ctx.quick
    ? { inWindow: 2_000_000, warmMaxSeconds: 60, steadySeconds: 10, restartSeconds: 40, payloadBytes: 64 }
    : { inWindow: 20_000_000, warmMaxSeconds: 240, steadySeconds: 20, restartSeconds: 60, payloadBytes: 64 };
  const wrong: string[] = [];
  const db = await createBenchDatabase(ctx.adminUrl, 'restart_hydration');
  const rigs: EngineRig[] = [];
  const compactors: Compactor[] = [];
  try {
    const admin = db.pool(4, 'queen-bench-load');
    const pool = db.pool(LOOPS + 1, 'queen-bench-engine');
    const factory = new MessageFactory('rst', p.payloadBytes);
    /** A broker as the pipeline wires it: default budget, and a compactor asked for on eviction and long probes. */
    const broker = async (): Promise<EngineRig> => {
      // The rig's cache needs the compactor, which needs the rig's metrics.
      const late: { compactor?: Compactor } = {};
      const rig = await startEngineRig(pool, { cacheMb: DEFAULTS.dedupCacheMb, onEvict: (pid) => late.compactor?.request(pid) });
      rigs.push(rig);
      const compactor = (late.compactor = new Compactor({
        pool,
        minTail: DEFAULTS.compactionMinTail,
        fanout: DEFAULTS.compactionFanout,
        metrics: rig.metrics,
      }));
      compactors.push(compactor);
      compactOnLongProbes(rig.engine, compactor, DEFAULTS.compactionMinTail);
      await compactor.start();
      return rig;
    };
    const first = await broker();
    const counts = spread(p.inWindow, PARTITIONS);
    /** One queue of PARTITIONS partitions holding `counts` in-window messages; its cursors stand after them. */
    const loaded = async (queue: string): Promise<PartitionCursor[]> => {
      const cursors = await provisionQueue(admin, first.engine, queue, 3600, PARTITIONS);
      ctx.progress.note(`restart: loading ${fmt(p.inWindow)} in-window messages over ${PARTITIONS} partitions of ${queue}`);
      await loadInWindow(admin, cursors, counts, factory);
      cursors.forEach((c, i) => (c.seq = counts[i]!));
      return cursors;
    };
    const warmQueue = await loaded('restart_warm');
    const coldQueue = await loaded('restart_cold');
    await admin.query('ANALYZE queen.log_segments; ANALYZE queen.log_txns; ANALYZE queen.log_partitions');

    const random = rng(p.inWindow);
    /** Pushes from LOOPS loops over disjoint partitions of the queue until `done` says so; items answered per second. */
    const run = async (rig: EngineRig, queue: string, cursors: PartitionCursor[], done: (elapsedS: number) => boolean): Promise<Loop> => {
      const perSecond: number[] = [];
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: LOOPS }, async (_, w) => {
          const mine = cursors.filter((_, i) => i % LOOPS === w);
          while (!done((performance.now() - t0) / 1000)) {
            const b = resentBundle(queue, mine, factory, random, BUNDLE, RESENT);
            const res = await rig.writer.push(b.items);
            res.forEach((r, i) => {
              const want = b.resent[i] ? 'duplicate' : 'queued';
              if (r.status !== want) wrong.push(`${queue}: ${b.items[i]!.transactionId} ${r.status}, expected ${want}`);
            });
            const sec = Math.floor((performance.now() - t0) / 1000);
            while (perSecond.length <= sec) perSecond.push(0);
            perSecond[sec]! += b.items.length;
          }
        }),
      );
      return { perSecond };
    };

    // The warm broker: until every partition is resident, then the steady part.
    ctx.progress.note('restart: warm broker, hydrating every partition');
    let residentAt = NaN;
    const warm = await run(first, 'restart_warm', warmQueue, (s) => {
      if (Number.isNaN(residentAt) && first.cache!.residentPartitions() >= PARTITIONS) residentAt = s;
      return s >= p.warmMaxSeconds || (!Number.isNaN(residentAt) && s >= residentAt + p.steadySeconds);
    });
    const steadyFrom = Number.isNaN(residentAt) ? warm.perSecond.length - p.steadySeconds : Math.ceil(residentAt);
    // Whole seconds only (the last one is partial).
    const steady = warm.perSecond.slice(steadyFrom, warm.perSecond.length - 1);
    const full = median(steady);
    await compactors[0]!.stop();
    await first.stop();
    const held = await admin.query(
      `SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0)::bigint AS n
       FROM queen.log_txns t JOIN queen.log_partitions lp ON lp.id = t.partition_id JOIN queen.queues q ON q.id = lp.queue_id
       WHERE q.name = 'restart_cold' AND t.end_offset >= lp.txns_start AND t.created_at >= now() - interval '1 hour'`,
    );
    const atRestart = Number(held.rows[0].n);

    ctx.progress.note(`restart: full rate ${fmt(full)} msg/s; a new broker with a fresh cache on ${fmt(atRestart)} in window`);
    const second = await broker();
    const restart = await run(second, 'restart_cold', coldQueue, (s) => s >= p.restartSeconds);
    const secs = restart.perSecond.slice(0, restart.perSecond.length - 1);
    let reachedAt = NaN;
    for (let i = 2; i < secs.length; i++) {
      const moving = (secs[i]! + secs[i - 1]! + secs[i - 2]!) / 3;
      if (moving >= 0.8 * full) {
        reachedAt = i + 1;
        break;
      }
    }
    const first30 = secs.slice(0, 30).reduce((a, b) => a + b, 0) / Math.min(30, secs.length);
    const label = p.inWindow >= 1_000_000 ? `${p.inWindow / 1_000_000} M` : `${p.inWindow / 1000} k`;
    const cache = second.cache!;
    return {
      params: { ...p, partitions: PARTITIONS, loops: LOOPS, bundle: BUNDLE, resent: RESENT, cacheMb: DEFAULTS.dedupCacheMb },
      samples: { warmPerSecond: warm.perSecond, restartPerSecond: restart.perSecond },
      targets: [
        target(`restart with ${label} in window: seconds until 0.8x the full rate (3 s moving rate)`, reachedAt, '<=', 30, {
          value: Number.isNaN(reachedAt) ? `not within ${p.restartSeconds} s` : `${reachedAt} s`,
          baseline: `full rate ${fmt(full)} msg/s`,
        }),
        target(`restart with ${label} in window: wrong verdicts`, wrong.length, '<=', 0, {
          value: wrong.length === 0 ? '0' : `${wrong.length}: ${wrong.slice(0, 3).join('; ')}`,
        }),
      ],
      info: [
        {
          name: `restart with ${label} in window: rate over the first 30 s / full rate`,
          value: `${fmt(first30)} msg/s`,
          baseline: `${fmt(full)} msg/s`,
          ratio: first30 / full,
        },
        {
          name: `restart with ${label} in window: msg/s in each of the first 10 s`,
          value: secs
            .slice(0, 10)
            .map((x) => fmt(x))
            .join(', '),
        },
        {
          name: `restart with ${label} in window: in window when the new broker started; its partitions resident / not resident at the end`,
          value: `${fmt(atRestart)}; ${cache.residentPartitions()} / ${PARTITIONS - cache.residentPartitions()}`,
        },
        {
          name: `restart with ${label} in window: the warm broker held every partition after`,
          value: Number.isNaN(residentAt) ? `not within ${p.warmMaxSeconds} s` : `${residentAt.toFixed(1)} s`,
        },
      ],
    };
  } finally {
    for (const c of compactors) await c.stop().catch(() => undefined);
    for (const r of rigs) await r.stop().catch(() => undefined);
    await db.drop();
  }
}
