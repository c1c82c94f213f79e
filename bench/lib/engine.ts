import type pg from 'pg';
import { Compactor } from '../../src/compaction/compactor.js';
import { DEDUP_LOOKUPS, DEFAULTS } from '../../src/config.js';
import { DedupCache } from '../../src/dedup/index.js';
import { LogEngine } from '../../src/engine/logEngine.js';
import { configureQueue } from '../../src/engine/queueConfig.js';
import { LogWriter } from '../../src/engine/writer.js';
import { CacheWatermarks } from '../../src/fusion/cacheWatermarks.js';
import type { LookupMode } from '../../src/fusion/lookupPlacement.js';
import { oneOf } from '../../src/config/env.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import type { PartitionCursor } from './synth.js';
import type { CompactionBuild } from '../../src/engine/compactionStore.js';
import { compactOnLongProbes } from '../../src/pipeline.js';

/**
 * The engine's write path as the service wires it (src/service.ts): LogEngine
 * on a pool, LogWriter, and (unless disabled) DedupCache + CacheWatermarks.
 * The Fusion layer is left out where a suite drives bundles itself: a bundle
 * handed to LogWriter.push is exactly what a fusion flush hands it.
 */
export interface EngineRig {
  engine: LogEngine;
  metrics: MetricsRegistry;
  cache: DedupCache | undefined;
  writer: LogWriter;
  /** The cache's window fetches (undefined without a cache). */
  watermarks: CacheWatermarks | undefined;
  /** The cold path's compactor, as the pipeline wires it (undefined unless asked for). */
  compactor: Compactor | undefined;
  hydrationErrors: unknown[];
  stop(): Promise<void>;
}

export async function startEngineRig(
  pool: pg.Pool,
  opts: {
    cacheMb: number | false;
    metrics?: MetricsRegistry;
    hints?: boolean;
    onEvict?: (partitionId: number) => void;
    /**
     * The compactor the service runs by default (src/pipeline.ts): default
     * min tail and fan-out, asked for by long probes and lookups and by an
     * evicted or demoted partition. It takes a connection of `pool` while it
     * compacts. Off unless asked for: suites whose cache vouches for every
     * push never trigger it, and the suites that need it choose its wiring.
     */
    compaction?: boolean;
  },
): Promise<EngineRig> {
  const metrics = opts.metrics ?? new MetricsRegistry();
  const engine = new LogEngine({ pool, metrics });
  await engine.start();
  const compactor = opts.compaction ? benchCompactor(pool, metrics) : undefined;
  const onEvict =
    compactor === undefined
      ? opts.onEvict
      : (pid: number) => {
          compactor.request(pid);
          opts.onEvict?.(pid);
        };
  const hydrationErrors: unknown[] = [];
  const cache = opts.cacheMb === false ? undefined : new DedupCache({ capBytes: opts.cacheMb * 1024 * 1024, onEvict, onDemote: onEvict });
  const watermarks = cache
    ? new CacheWatermarks(cache, engine, metrics, (err) => hydrationErrors.push(err), opts.hints ?? true, undefined, benchLookupMode())
    : undefined;
  const writer = new LogWriter(engine, { maxPayloadBytes: 1024 * 1024, watermarks });
  if (compactor) {
    compactOnLongProbes(engine, compactor, DEFAULTS.compactionMinTail);
    await compactor.start();
  }
  return {
    engine,
    metrics,
    cache,
    writer,
    watermarks,
    compactor,
    hydrationErrors,
    async stop() {
      await watermarks?.builds.idle();
      await compactor?.stop();
      await engine.stop();
    },
  };
}

/** Creates the queue with the given window and provisions its partitions (names p0000 ...); returns cursors. */
export async function provisionQueue(
  pool: pg.Pool,
  engine: LogEngine,
  queue: string,
  windowSeconds: number,
  partitions: number,
): Promise<PartitionCursor[]> {
  await configureQueue(pool, queue, { dedupWindowSeconds: windowSeconds }, 'merge');
  const names = Array.from({ length: partitions }, (_, i) => `p${String(i).padStart(5, '0')}`);
  const byName = new Map<string, number>();
  for (let i = 0; i < names.length; i += 1000) {
    const infos = await engine.provision(names.slice(i, i + 1000).map((partition) => ({ queue, partition })));
    for (const info of infos) byName.set(info.partition, info.partitionId);
  }
  return names.map((name) => ({ id: byName.get(name)!, name, seq: 0 }));
}

/** Counter values, read before and after a measured interval. */
export function counterValue(metrics: MetricsRegistry, name: string, label = ''): number {
  return metrics.counter(name, '').get(label);
}

/**
 * Pushes per-worker bundle lists: the workers run concurrently (one
 * connection each, disjoint partitions), each pushing its bundles in order.
 * Every item must come back queued (the benchmarks push only new messages).
 */
export async function pushAll(
  writer: LogWriter,
  bundles: readonly (readonly import('../../src/engine/writer.js').PushItem[])[][],
): Promise<void> {
  await Promise.all(
    bundles.map(async (list) => {
      for (const items of list) {
        const res = await writer.push(items);
        const bad = res.find((r) => r.status !== 'queued');
        if (bad) throw new Error(`engine push: unexpected ${bad.status}${bad.error ? ': ' + bad.error : ''}`);
      }
    }),
  );
}

/** Like provisionQueue, with the partition names given (e.g. the Kafka record keys the ingress maps to partitions). */
export async function provisionQueueNamed(
  pool: pg.Pool,
  queue: string,
  windowSeconds: number,
  names: readonly string[],
): Promise<PartitionCursor[]> {
  await configureQueue(pool, queue, { dedupWindowSeconds: windowSeconds }, 'merge');
  const engine = new LogEngine({ pool, metrics: new MetricsRegistry() });
  await engine.start();
  try {
    const infos = await engine.provision(names.map((partition) => ({ queue, partition })));
    const byName = new Map(infos.map((i) => [i.partition, i.partitionId]));
    return names.map((name) => ({ id: byName.get(name)!, name, seq: 0 }));
  } finally {
    await engine.stop();
  }
}

/** A compactor as the pipeline wires it (default min tail and fan-out), with the bench's compaction build. */
export function benchCompactor(pool: pg.Pool, metrics: MetricsRegistry): Compactor {
  return new Compactor({
    pool,
    minTail: DEFAULTS.compactionMinTail,
    fanout: DEFAULTS.compactionFanout,
    metrics,
    build: benchCompactionBuild(),
  });
}

/**
 * The compaction build a bench's compactor runs: the broker's (default), or
 * QUEEN_BENCH_COMPACTION_BUILD=sql for log_compact_v1, to measure one
 * against the other on the same machine (docs/history records).
 */
export function benchCompactionBuild(): CompactionBuild {
  return process.env.QUEEN_BENCH_COMPACTION_BUILD === 'sql' ? 'sql' : 'broker';
}

/**
 * Where the rigs' caches look their maybe items up: the service's default,
 * or QUEEN_DEDUP_LOOKUP as the service reads it (an A/B of placements on
 * one build).
 */
function benchLookupMode(): LookupMode {
  return oneOf(process.env, 'QUEEN_DEDUP_LOOKUP', DEFAULTS.dedupLookup, DEDUP_LOOKUPS);
}
