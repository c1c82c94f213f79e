import type pg from 'pg';
import { Compactor } from '../../src/compaction/compactor.js';
import { DEFAULTS } from '../../src/config.js';
import { compactPartitionInBroker, MAX_STEP_PAIRS } from '../../src/engine/compactionStore.js';
import type { PushItem } from '../../src/engine/writer.js';
import { compactOnLongProbes } from '../../src/pipeline.js';
import { createBenchDatabase } from '../lib/db.js';
import { settle } from '../lib/gc.js';
import { benchCompactor, counterValue, provisionQueue, startEngineRig, type EngineRig } from '../lib/engine.js';
import { filterState } from '../lib/filterState.js';
import { addCpu, cpuSince, cpuSnapshot, type CpuDelta } from '../lib/cpu.js';
import { rng } from '../lib/rng.js';
import { fmt, median } from '../lib/stats.js';
import { loadInWindow, MessageFactory, relationBytes, resentBundle, spread, type PartitionCursor } from '../lib/synth.js';
import { target, type Info, type SuiteContext, type Target } from '../lib/types.js';

/**
 * memory-pressure's "window beyond budget" rows (issue 38): a dedup window
 * many times larger than what the cache's budget holds. 32 partitions, a
 * one-hour window, 10 % of each push's ids re-sent from everything sent so
 * far (stored before the run or pushed in it), 1 000-item pushes from four
 * loops over disjoint partitions, PostgreSQL with the host's settings. Four
 * loops is the issue's own reproduction (4 loops of 1 000-item pushes over
 * HTTP): enough concurrent pushes to keep both cores busy, so a row measures
 * what a push costs the machine. With two loops each side waits on its own
 * round trips and the cores sit partly idle, so that ratio measures latency
 * (the small side's lookup is one more round trip before each push); it is
 * kept as an info row at the larger size, from passes in the same database.
 *
 * The small budget's loaded rows are compacted before the passes as if they
 * had arrived over time: new runs of `arrivalStep` pairs, merged by tiers as
 * the compactor merges them. A partition then starts with several runs of
 * each size, as in its steady state, rather than one run of its whole load
 * (which the first probes would otherwise build), and every run is one more
 * slice a false positive of the filter reads. Info rows give the runs a
 * partition holds before and after the passes.
 *
 * Side by side, on twin queues holding the same stored data: a writer whose
 * cache has the small budget and one with the default (ample) budget, both
 * with the compactor the pipeline wires (default min tail and fan-out). With
 * the small budget most partitions stay unvouched, so their pushes probe:
 * the runs answer the compacted rows and log_txns only the short tail. Each
 * load size runs in its own database; the small-budget rate at the larger
 * size over the smaller says whether cost still grows with the window. An
 * info row gives the small budget without compaction at the larger size
 * (what every probe cost before the cold path), for a few pushes only.
 *
 * The larger size runs once more over 100 000 partitions (200 in window
 * each at full size): pushes rotate over all of them, so a 1 000-item push
 * is 1 000 one-item segments, and the small budget holds a filter for a
 * fraction of the partitions at most (each entry's own overhead is ~0.7 kB).
 *
 * Every verdict is checked: a re-sent id must come back duplicate, a new
 * one queued.
 */

type Mode = 'small' | 'ample' | 'nocompaction';

interface Pass {
  mode: Mode;
  stored: number;
  partitions: number;
  /** Concurrent push loops of the pass. */
  loops: number;
  msgPerS: number;
  seconds: number;
  probes: number;
  /** Items the pass looked up before its pushes (a filter answered "maybe", or no entry vouched). */
  lookedUp: number;
  /** Occurrences those lookups found: the re-sent ids (every one is in the window). */
  found: number;
  /** CPU of the pass (lib/cpu.ts): this process is the broker (writer, cache, compactor). */
  cpu: CpuDelta;
}

const PARTITIONS = 32;
/** Issue 38's "the same at 100 k partitions": the larger size over this many. */
const WIDE_PARTITIONS = 100_000;
/** Concurrent push loops of the passes the targets are computed from. */
const LOOPS = 4;
/** The info rows' loops: fewer than the cores keep busy (see the header). */
const FEW_LOOPS = 2;
const BUNDLE = 1000;
const RESENT = 0.1;

export interface WindowBeyondBudgetResult {
  targets: Target[];
  info: Info[];
  samples: Pass[];
  params: Record<string, unknown>;
}

export async function windowBeyondBudget(ctx: SuiteContext): Promise<WindowBeyondBudgetResult> {
  const p = ctx.quick
    ? {
        smallMb: smallMbOr(2),
        ampleMb: DEFAULTS.dedupCacheMb,
        sizes: process.env.WBB_SIZES ? process.env.WBB_SIZES.split(',').map(Number) : [250_000, 1_000_000],
        passes: 6,
        bundlesPerPass: 24,
        arrivalStep: 1024,
        widePasses: 4,
        payloadBytes: 64,
      }
    : {
        smallMb: smallMbOr(16),
        ampleMb: DEFAULTS.dedupCacheMb,
        sizes: process.env.WBB_SIZES ? process.env.WBB_SIZES.split(',').map(Number) : [2_000_000, 20_000_000],
        passes: 6,
        bundlesPerPass: 20,
        arrivalStep: 4096,
        widePasses: 4,
        payloadBytes: 64,
      };
  const all: Pass[] = [];
  const wrong: string[] = [];
  /** On-disk bytes of the runs per hash they hold, at the end of each size's passes. */
  const runBytes: { stored: number; bytesPerHash: number }[] = [];
  /** The small budget's filters after each size's passes (filterState). */
  const filterStates: { stored: number; state: string }[] = [];
  /** The small queue's runs a partition, before and after each size's passes. */
  const runCounts: { stored: number; before: RunCount; after: RunCount }[] = [];
  const [lo, hi] = [p.sizes[0]!, p.sizes[p.sizes.length - 1]!];
  // WBB_WIDE=0 leaves the 100 k-partition rows out, WBB_WIDE=only runs them alone (experiments, with --tag).
  const configs: Config[] = [
    ...(process.env.WBB_WIDE === 'only' ? [] : p.sizes).map((stored) => ({
      stored,
      partitions: PARTITIONS,
      modes: stored === hi ? (['small', 'ample', 'nocompaction'] satisfies Mode[]) : (['small', 'ample'] satisfies Mode[]),
      passes: p.passes,
      fewLoopPasses: stored === hi ? p.passes : 0,
      bundlesPerPass: p.bundlesPerPass,
    })),
    ...(process.env.WBB_WIDE === '0'
      ? []
      : [
          {
            stored: hi,
            partitions: WIDE_PARTITIONS,
            modes: ['small', 'ample'] as Mode[],
            passes: p.widePasses,
            fewLoopPasses: 0,
            bundlesPerPass: p.bundlesPerPass,
          },
        ]),
  ];
  for (const c of configs) {
    const r = await runConfig(ctx, p, c, wrong);
    all.push(...r.passes);
    if (r.runBytesPerHash !== undefined) runBytes.push({ stored: c.stored, bytesPerHash: r.runBytesPerHash });
    if (r.runCounts !== undefined) runCounts.push({ stored: c.stored, ...r.runCounts });
    if (r.filters !== undefined) filterStates.push({ stored: c.stored, state: r.filters });
  }
  const rate = (m: Mode, stored: number, partitions = PARTITIONS, loops = LOOPS) =>
    median(
      all.filter((s) => s.mode === m && s.stored === stored && s.partitions === partitions && s.loops === loops).map((s) => s.msgPerS),
    );
  const label = (n: number) => (n >= 1_000_000 ? `${n / 1_000_000} M` : `${n / 1000} k`);
  const wide = configs.some((c) => c.partitions === WIDE_PARTITIONS);
  // WBB_WIDE=only runs no 32-partition config: its rows are left out, not NaN.
  const narrow = configs.some((c) => c.partitions === PARTITIONS);
  return {
    params: {
      ...p,
      partitions: PARTITIONS,
      widePartitions: wide ? WIDE_PARTITIONS : 0,
      loops: LOOPS,
      fewLoops: FEW_LOOPS,
      bundle: BUNDLE,
      resent: RESENT,
      minTail: DEFAULTS.compactionMinTail,
      fanout: DEFAULTS.compactionFanout,
    },
    samples: all,
    targets: [
      ...(narrow
        ? [
            target(
              `window beyond budget: ${p.smallMb} MB / ${p.ampleMb} MB budget, ${label(hi)} in window`,
              rate('small', hi) / rate('ample', hi),
              '>=',
              0.7,
              {
                ratio: true,
                value: `${fmt(rate('small', hi))} msg/s`,
                baseline: `${fmt(rate('ample', hi))} msg/s`,
              },
            ),
            target(
              `window beyond budget: ${label(hi)} / ${label(lo)} in window, ${p.smallMb} MB budget`,
              rate('small', hi) / rate('small', lo),
              '>=',
              0.9,
              {
                ratio: true,
                value: `${fmt(rate('small', hi))} msg/s`,
                baseline: `${fmt(rate('small', lo))} msg/s`,
              },
            ),
          ]
        : []),
      ...(wide
        ? [
            target(
              `window beyond budget: ${p.smallMb} MB / ${p.ampleMb} MB budget, ${label(hi)} in window over ${label(WIDE_PARTITIONS)} partitions`,
              rate('small', hi, WIDE_PARTITIONS) / rate('ample', hi, WIDE_PARTITIONS),
              '>=',
              0.7,
              {
                ratio: true,
                value: `${fmt(rate('small', hi, WIDE_PARTITIONS))} msg/s`,
                baseline: `${fmt(rate('ample', hi, WIDE_PARTITIONS))} msg/s`,
              },
            ),
          ]
        : []),
      target(`window beyond budget: wrong verdicts (re-sent not duplicate, new not queued)`, wrong.length, '<=', 0, {
        value: wrong.length === 0 ? '0' : `${wrong.length}: ${wrong.slice(0, 3).join('; ')}`,
      }),
    ],
    info: narrow
      ? [
          {
            name: 'window beyond budget: runs on disk, bytes per hash they hold (slices, runs, indexes, dead tuples)',
            value: runBytes.map((r) => `${r.bytesPerHash.toFixed(1)} B at ${label(r.stored)}`).join(', '),
          },
          {
            name: `window beyond budget: runs a partition of the small budget, mean / max, before and after the passes (load compacted in new runs of ${fmt(p.arrivalStep)} pairs)`,
            value: runCounts
              .map(
                (r) => `${r.before.mean.toFixed(1)} / ${r.before.max} → ${r.after.mean.toFixed(1)} / ${r.after.max} at ${label(r.stored)}`,
              )
              .join(', '),
          },
          {
            // What the small side's lookups are made of: the re-sent ids
            // (all in the window, so all found) and the rest, which the
            // filter could not clear (its false positives). Every size: the
            // smaller one is the denominator of the "hi / lo in window" row.
            name: `window beyond budget: items the ${p.smallMb} MB budget looked up per 1 000 pushed, by size in window (re-sent ids found + false positives)`,
            value: [...new Set(all.map((s) => s.stored))]
              .sort((a, b) => a - b)
              .map(
                (stored) =>
                  `${label(stored)}: ${lookupShare(
                    all.filter((s) => s.mode === 'small' && s.stored === stored && s.partitions === PARTITIONS && s.loops === LOOPS),
                  )}`,
              )
              .join('; '),
          },
          {
            name: `window beyond budget: the ${p.smallMb} MB budget's entries after the passes`,
            value: filterStates.map((f) => `${label(f.stored)}: ${f.state}`).join('; '),
          },
          {
            // Where each side's message costs: the broker (this process:
            // writer, cache, lookups' handling, compaction built in the
            // broker) and PostgreSQL (this run's backends).
            name: `window beyond budget: CPU µs a message, ${p.smallMb} MB / ${p.ampleMb} MB budget, ${label(hi)} in window (broker + PostgreSQL)`,
            value: cpuPerMessage(
              all.filter((s) => s.mode === 'small' && s.stored === hi && s.partitions === PARTITIONS && s.loops === LOOPS),
            ),
            baseline: cpuPerMessage(
              all.filter((s) => s.mode === 'ample' && s.stored === hi && s.partitions === PARTITIONS && s.loops === LOOPS),
            ),
          },
          {
            name: `window beyond budget: ${p.smallMb} MB / ${p.ampleMb} MB budget, ${label(lo)} in window`,
            value: `${fmt(rate('small', lo))} msg/s`,
            baseline: `${fmt(rate('ample', lo))} msg/s`,
          },
          ...(configs.some((c) => c.partitions === PARTITIONS && c.stored === hi)
            ? [
                {
                  name: `window beyond budget: ${p.smallMb} MB / ${p.ampleMb} MB budget, ${label(hi)} in window, ${FEW_LOOPS} loops (bound by each push's round trips)`,
                  value: `${fmt(rate('small', hi, PARTITIONS, FEW_LOOPS))} msg/s`,
                  baseline: `${fmt(rate('ample', hi, PARTITIONS, FEW_LOOPS))} msg/s`,
                  ratio: rate('small', hi, PARTITIONS, FEW_LOOPS) / rate('ample', hi, PARTITIONS, FEW_LOOPS),
                },
              ]
            : []),
          {
            name: `window beyond budget: ${p.smallMb} MB budget without compaction (before the cold path), ${label(hi)} in window`,
            value: `${fmt(rate('nocompaction', hi))} msg/s`,
            baseline: `${fmt(rate('small', hi))} msg/s with it`,
          },
        ]
      : [],
  };
}

/** The passes' CPU per message pushed: the broker's + PostgreSQL's = both. */
function cpuPerMessage(passes: readonly Pass[]): string {
  const pushed = passes.reduce((n, s) => n + s.msgPerS * s.seconds, 0);
  if (!(pushed > 0)) return 'no passes';
  const us = (ms: number) => ((1000 * ms) / pushed).toFixed(1);
  const c = addCpu(passes.map((s) => s.cpu));
  return `${us(c.clientMs)} + ${us(c.postgresMs)} = ${us(c.clientMs + c.postgresMs)} µs`;
}

/** The small budget in MB: WBB_SMALL_MB (experiments, with --tag: what the rows read with more filter bits a hash) or the mode's. */
function smallMbOr(mb: number): number {
  const v = Number(process.env.WBB_SMALL_MB);
  return v > 0 ? v : mb;
}

/** Items looked up per 1 000 pushed over the passes, split into found and not found. */
function lookupShare(passes: readonly Pass[]): string {
  const pushed = passes.reduce((n, s) => n + s.msgPerS * s.seconds, 0);
  const looked = passes.reduce((n, s) => n + s.lookedUp, 0);
  const found = passes.reduce((n, s) => n + s.found, 0);
  if (!(pushed > 0)) return 'no passes';
  const per = (x: number) => ((1000 * x) / pushed).toFixed(1);
  return `${per(looked)} (${per(found)} found + ${per(looked - found)} not found)`;
}

interface Config {
  stored: number;
  partitions: number;
  modes: Mode[];
  passes: number;
  /** Passes per side with FEW_LOOPS loops, after the LOOPS passes (0: none). */
  fewLoopPasses: number;
  bundlesPerPass: number;
}

/** One database: twin queues loaded with `stored` messages over `partitions` partitions, one per mode, then alternating passes. */
async function runConfig(
  ctx: SuiteContext,
  p: { smallMb: number; ampleMb: number; payloadBytes: number; arrivalStep: number },
  c: Config,
  wrong: string[],
): Promise<{
  passes: Pass[];
  runBytesPerHash: number | undefined;
  runCounts: { before: RunCount; after: RunCount } | undefined;
  filters: string | undefined;
}> {
  const { stored, partitions } = c;
  const out: Pass[] = [];
  const db = await createBenchDatabase(ctx.adminUrl, `wbb_${stored}_${partitions}`);
  const rigs: EngineRig[] = [];
  const compactors: Compactor[] = [];
  try {
    const admin = db.pool(4, 'queen-bench-load');
    const pool = db.pool(LOOPS + 1, 'queen-bench-engine');
    const factory = new MessageFactory('wbb', p.payloadBytes);
    // `at`: per loop count, where each loop's next bundle starts in its share of the partitions.
    const state = new Map<Mode, { rig: EngineRig; cursors: PartitionCursor[]; compactor?: Compactor; at: Map<number, number[]> }>();
    for (const m of c.modes) {
      ctx.progress.note(`window beyond budget: ${m}, loading ${fmt(stored)} in-window messages over ${fmt(partitions)} partitions`);
      let compactor: Compactor | undefined;
      // As the pipeline wires it: an evicted or demoted partition is asked for at once.
      const rig = await startEngineRig(pool, {
        cacheMb: m === 'ample' ? p.ampleMb : p.smallMb,
        onEvict: (pid) => compactor?.request(pid),
      });
      rigs.push(rig);
      const cursors = await provisionQueue(admin, rig.engine, `wbb_${m}`, 3600, partitions);
      const counts = spread(stored, partitions);
      await loadInWindow(admin, cursors, counts, factory);
      cursors.forEach((cur, i) => (cur.seq = counts[i]!));
      if (m === 'small' && partitions === PARTITIONS) {
        const t0 = performance.now();
        await compactAsArrived(pool, cursors, p.arrivalStep, LOOPS);
        ctx.progress.note(
          `window beyond budget: small, load compacted in new runs of ${fmt(p.arrivalStep)} pairs in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
        );
      }
      if (m !== 'nocompaction') {
        compactor = benchCompactor(pool, rig.metrics);
        compactors.push(compactor);
        compactOnLongProbes(rig.engine, compactor, DEFAULTS.compactionMinTail);
        await compactor.start();
      }
      state.set(m, { rig, cursors, compactor, at: new Map() });
    }
    await admin.query('ANALYZE queen.log_segments; ANALYZE queen.log_txns; ANALYZE queen.log_partitions');

    const random = rng(stored + partitions);
    /** Per loop, `n` bundles of 1 000 items round-robin over its own partitions, continuing where its last one stopped. */
    const bundlesOf = (m: Mode, n: number, loops: number): { items: PushItem[]; resent: boolean[] }[][] => {
      const st = state.get(m)!;
      let at = st.at.get(loops);
      if (at === undefined) st.at.set(loops, (at = new Array<number>(loops).fill(0)));
      return Array.from({ length: loops }, (_, w) => {
        const mine = st.cursors.filter((_, i) => i % loops === w);
        return Array.from({ length: n }, () => {
          const b = resentBundle(`wbb_${m}`, mine, factory, random, BUNDLE, RESENT, at[w]);
          at[w] = (at[w]! + BUNDLE) % mine.length;
          return b;
        });
      });
    };
    const runPass = async (m: Mode, bundles: number, loops = LOOPS): Promise<Pass> => {
      const { rig } = state.get(m)!;
      const work = bundlesOf(m, bundles, loops);
      const probes0 = rig.metrics.counter('queen_probe_run_total', '').get();
      const lookedUp0 = counterValue(rig.metrics, 'queen_lookup_items_total');
      const found0 = counterValue(rig.metrics, 'queen_lookup_found_total');
      await settle();
      // The snapshot reads /proc (a few ms): taken outside the timed interval.
      const c0 = cpuSnapshot();
      const t0 = performance.now();
      await Promise.all(
        work.map(async (list) => {
          for (const b of list) {
            const res = await rig.writer.push(b.items);
            res.forEach((r, i) => {
              const want = b.resent[i] ? 'duplicate' : 'queued';
              if (r.status !== want) wrong.push(`${m} ${stored}/${partitions}: ${b.items[i]!.transactionId} ${r.status}, expected ${want}`);
            });
          }
        }),
      );
      const seconds = (performance.now() - t0) / 1000;
      const cpu = cpuSince(c0);
      return {
        mode: m,
        stored,
        partitions,
        loops,
        msgPerS: (bundles * loops * BUNDLE) / seconds,
        seconds,
        probes: rig.metrics.counter('queen_probe_run_total', '').get() - probes0,
        lookedUp: counterValue(rig.metrics, 'queen_lookup_items_total') - lookedUp0,
        found: counterValue(rig.metrics, 'queen_lookup_found_total') - found0,
        cpu,
      };
    };

    // Warm-up: every partition pushed to at least twice by each budget (its
    // cache builds its entries, the small budget's first lookups and probes
    // ask for compaction), then until the compactors have nothing pending
    // and no window is still being fetched.
    const cover = Math.max(4, Math.ceil((2 * partitions) / (LOOPS * BUNDLE)));
    for (let w = 0; w < cover + 30; w++) {
      const warm = await runPass('small', 2);
      await runPass('ample', 2);
      for (const r of rigs) await r.watermarks?.builds.idle();
      const pending = compactors.reduce((n, k) => n + k.pendingCount, 0);
      ctx.progress.note(`warm-up ${w + 1}: small ${fmt(warm.msgPerS)} msg/s, ${pending} partitions pending compaction`);
      if (pending === 0 && 2 * (w + 1) >= cover) break;
      // Each compactor drains its own requests. Asking one compactor to run
      // while another has the pending work spins: a pass with nothing
      // pending resolves without I/O, so the loop never yields to the event
      // loop the other compactor's queries need (the 100 k-partition rows
      // hung there, their ample side pending).
      for (const k of compactors) while (k.pendingCount > 0) await k.runOnce();
    }
    const smallIds = state.get('small')!.cursors.map((cur) => cur.id);
    const before = partitions === PARTITIONS ? await runsPerPartition(admin, smallIds) : undefined;
    for (let r = 0; r < c.passes; r++) {
      const order: Mode[] = r % 2 === 0 ? ['small', 'ample'] : ['ample', 'small'];
      for (const m of order) {
        const s = await runPass(m, c.bundlesPerPass);
        out.push(s);
        ctx.progress.note(`${fmt(stored)} stored over ${fmt(partitions)}, ${m}: ${fmt(s.msgPerS)} msg/s, ${s.probes} probes`);
      }
    }
    const runCounts = before === undefined ? undefined : { before, after: await runsPerPartition(admin, smallIds) };
    const smallCache = state.get('small')!.rig.cache;
    const filters = partitions === PARTITIONS && smallCache !== undefined ? filterState(smallCache, smallIds) : undefined;
    for (let r = 0; r < c.fewLoopPasses; r++) {
      const order: Mode[] = r % 2 === 0 ? ['small', 'ample'] : ['ample', 'small'];
      for (const m of order) {
        const s = await runPass(m, c.bundlesPerPass, FEW_LOOPS);
        out.push(s);
        ctx.progress.note(`${fmt(stored)} stored over ${fmt(partitions)}, ${m}, ${FEW_LOOPS} loops: ${fmt(s.msgPerS)} msg/s`);
      }
    }
    let runBytesPerHash: number | undefined;
    if (partitions === PARTITIONS) {
      const held = await admin.query('SELECT coalesce(sum(n), 0)::bigint AS n FROM queen.log_hash_runs');
      const bytes = await relationBytes(admin, ['queen.log_hash_slices', 'queen.log_hash_runs']);
      runBytesPerHash = bytes / Math.max(1, Number(held.rows[0].n));
    }
    if (c.modes.includes('nocompaction')) {
      const s = await runPass('nocompaction', 1);
      out.push(s);
      ctx.progress.note(`${fmt(stored)} stored, small budget without compaction: ${fmt(s.msgPerS)} msg/s`);
    }
    return { passes: out, runBytesPerHash, runCounts, filters };
  } finally {
    for (const k of compactors) await k.stop();
    for (const r of rigs) await r.stop();
    await db.drop();
  }
}

interface RunCount {
  mean: number;
  max: number;
}

/** Runs a partition among `ids`: mean and max. */
async function runsPerPartition(admin: pg.Pool, ids: readonly number[]): Promise<RunCount> {
  const r = await admin.query(
    `SELECT coalesce(avg(coalesce(k.n, 0)), 0)::float8 AS mean, coalesce(max(coalesce(k.n, 0)), 0)::int AS max
     FROM unnest($1::bigint[]) AS u (id)
     LEFT JOIN (SELECT r.partition_id, count(*) AS n FROM queen.log_hash_runs r GROUP BY r.partition_id) k ON k.partition_id = u.id`,
    [ids],
  );
  return { mean: Number(r.rows[0].mean), max: Number(r.rows[0].max) };
}

/**
 * Compacts each partition's loaded rows in new runs of at most `step` pairs
 * (cut at a row's end), each followed by the merge the compactor would make,
 * until nothing is left: the runs a partition holds when its rows arrived
 * over time and were compacted as they came, instead of one run of its
 * whole load. `parallel` partitions at a time, one connection each. The
 * broker build, whatever the bench's compactor runs: this is set-up, and
 * only the broker build bounds a new run apart from a merge.
 */
async function compactAsArrived(pool: pg.Pool, cursors: readonly PartitionCursor[], step: number, parallel: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < cursors.length) {
        const id = cursors[next++]!.id;
        for (;;) {
          const o = await compactPartitionInBroker(pool, id, DEFAULTS.compactionMinTail, DEFAULTS.compactionFanout, MAX_STEP_PAIRS, step);
          if (!o.more && o.merged === 0) break;
        }
      }
    }),
  );
}
