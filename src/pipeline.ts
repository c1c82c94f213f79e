import { Compactor } from './compaction/compactor.js';
import { DEFAULTS, type Config } from './config.js';
import { DedupCache, estimateFootprintBytes } from './dedup/index.js';
import { LogEngine } from './engine/logEngine.js';
import { LogWriter } from './engine/writer.js';
import { CachePrewarm } from './fusion/cachePrewarm.js';
import { CacheWatermarks, type DedupFailure } from './fusion/cacheWatermarks.js';
import type { LookupMode } from './fusion/lookupPlacement.js';
import { Fusion } from './fusion/fusion.js';
import type pg from 'pg';
import { MetricsRegistry } from './telemetry/metrics.js';
import type { Logger } from './telemetry/logger.js';
import { Component } from './util/lifecycle.js';

export interface WritePipelineOptions {
  databaseUrl: string;
  poolSize: number;
  /** Dedup cache budget in MB (a worker's share may be fractional), or false for no cache (every push probes the full window with -1). */
  cacheMb: number | false;
  /** At start, warm the cache with up to this many partitions written within their window (0: no prewarm; src/fusion/cachePrewarm.ts). */
  prewarmPartitions: number;
  maxPayloadBytes: number;
  metadataTtlMs: number;
  bundleMaxItems: number;
  bundleMaxBytes: number;
  bundleHoldMs: number;
  maxInflightBytes: number;
  /** A probe that read at least this many stored hashes asks for its partition's compaction (0: no compactor). */
  compactionMinTail: number;
  compactionFanout: number;
  /** Where a filter's maybe items are looked up (src/fusion/lookupPlacement.ts). */
  dedupLookup: LookupMode;
  metrics: MetricsRegistry;
  /** A cache hydration or a lookup failed (`what`); the partition's segments go with the full probe meanwhile. */
  onDedupError?: (err: unknown, partitionId: number, what: DedupFailure) => void;
  /** The cache's memory-policy warning (at most one a minute). */
  onCacheWarning?: (message: string) => void;
  /** Where the compactor logs a failed pass (default: nowhere; the service passes its logger). */
  compactionLogger?: Logger;
  /** Where the cache prewarm logs a failed pass (default: nowhere). */
  prewarmLogger?: Logger;
}

/** The service's pipeline settings, from its configuration. */
export function pipelineOptions(config: Config, metrics: MetricsRegistry): WritePipelineOptions {
  if (!config.databaseUrl) throw new Error('DATABASE_URL is required');
  return {
    databaseUrl: config.databaseUrl,
    poolSize: config.pgPoolSize,
    cacheMb: config.dedupCacheEnabled ? config.dedupCacheMb : false,
    prewarmPartitions: config.dedupPrewarmPartitions,
    maxPayloadBytes: config.maxPayloadBytes,
    metadataTtlMs: config.metadataTtlMs,
    bundleMaxItems: config.bundleMaxItems,
    bundleMaxBytes: config.bundleMaxBytes,
    bundleHoldMs: config.bundleHoldMs,
    maxInflightBytes: config.maxInflightBytes,
    compactionMinTail: config.compactionMinTail,
    compactionFanout: config.compactionFanout,
    dedupLookup: config.dedupLookup,
    metrics,
  };
}

/** The defaults' pipeline on a given database (tests and benchmarks run what ships). */
export function defaultPipelineOptions(databaseUrl: string, overrides: Partial<WritePipelineOptions> = {}): WritePipelineOptions {
  return {
    databaseUrl,
    poolSize: DEFAULTS.pgPoolSize,
    cacheMb: DEFAULTS.dedupCacheMb,
    prewarmPartitions: DEFAULTS.dedupPrewarmPartitions,
    maxPayloadBytes: DEFAULTS.maxPayloadBytes,
    metadataTtlMs: DEFAULTS.metadataTtlMs,
    bundleMaxItems: DEFAULTS.bundleMaxItems,
    bundleMaxBytes: DEFAULTS.bundleMaxBytes,
    bundleHoldMs: DEFAULTS.bundleHoldMs,
    maxInflightBytes: DEFAULTS.maxInflightBytes,
    compactionMinTail: DEFAULTS.compactionMinTail,
    compactionFanout: DEFAULTS.compactionFanout,
    dedupLookup: DEFAULTS.dedupLookup,
    metrics: new MetricsRegistry(),
    ...overrides,
  };
}

/**
 * The write path every ingress shares: engine (pool) -> dedup cache ->
 * writer -> fusion. One composition, used by the service, the tests and the
 * benchmarks, so all three run the same thing.
 *
 * States: Component lifecycle. start() connects the engine (proving
 * PostgreSQL answers) and starts the fusion layer; stop() drains the fusion
 * layer (queued items are answered) and then ends the pool.
 */
export class WritePipeline extends Component {
  readonly metrics: MetricsRegistry;
  readonly engine: LogEngine;
  readonly cache: DedupCache | undefined;
  readonly writer: LogWriter;
  readonly fusion: Fusion;
  /** Builds the cold path's hash runs for partitions whose pushes probe long tails (undefined: compaction off). */
  readonly compactor: Compactor | undefined;
  /** The dedup cache's cap in bytes (0: no cache). */
  readonly cacheCapBytes: number;
  private readonly watermarks: CacheWatermarks | undefined;
  /** Warms the cache at start (undefined: no cache, or prewarm off). */
  readonly prewarm: CachePrewarm | undefined;

  constructor(opts: WritePipelineOptions) {
    super('WritePipeline');
    this.metrics = opts.metrics;
    this.engine = new LogEngine({ connectionString: opts.databaseUrl, poolSize: opts.poolSize, metrics: opts.metrics });
    const capBytes = opts.cacheMb === false ? 0 : Math.floor(opts.cacheMb * 1024 * 1024);
    this.cacheCapBytes = capBytes;
    // An evicted partition is probed from then on, and a demoted one looks
    // its maybe items up: ask for its compaction at once, before its next
    // push reads a tail as long as its stay in the exact tier.
    const onEvict = (partitionId: number) => this.compactor?.request(partitionId);
    this.cache = opts.cacheMb === false ? undefined : new DedupCache({ capBytes, onWarn: opts.onCacheWarning, onEvict, onDemote: onEvict });
    poolMetrics(this.engine.pool, opts.metrics);
    opts.metrics
      .gauge('queen_dedup_cache_budget_bytes', 'Memory budget of the dedup cache (QUEEN_DEDUP_CACHE_MB; 0 = no cache)')
      .set(capBytes);
    const watermarks = this.cache
      ? new CacheWatermarks(this.cache, this.engine, opts.metrics, opts.onDedupError, true, undefined, opts.dedupLookup)
      : undefined;
    this.watermarks = watermarks;
    this.prewarm =
      watermarks && opts.prewarmPartitions > 0
        ? new CachePrewarm(watermarks, this.engine.pool, capBytes, opts.prewarmPartitions, estimateFootprintBytes, opts.metrics, (err) =>
            opts.prewarmLogger?.warn({ err }, 'dedup cache prewarm failed; partitions hydrate on their first push'),
          )
        : undefined;
    this.writer = new LogWriter(this.engine, { maxPayloadBytes: opts.maxPayloadBytes, metadataTtlMs: opts.metadataTtlMs, watermarks });
    this.fusion = new Fusion(this.writer, {
      maxItems: opts.bundleMaxItems,
      maxBytes: opts.bundleMaxBytes,
      holdMs: opts.bundleHoldMs,
      maxInflightBytes: opts.maxInflightBytes,
      // Leave two connections for provisioning, hydration and /health.
      maxConcurrentFlushes: Math.max(1, opts.poolSize - 2),
      metrics: opts.metrics,
    });
    const minTail = opts.compactionMinTail;
    this.compactor =
      minTail > 0
        ? new Compactor({
            pool: this.engine.pool,
            minTail,
            fanout: opts.compactionFanout,
            metrics: opts.metrics,
            logger: opts.compactionLogger,
          })
        : undefined;
    if (this.compactor) compactOnLongProbes(this.engine, this.compactor, minTail);
  }

  protected async onStart(): Promise<void> {
    await this.engine.start();
    await this.compactor?.start();
    await this.fusion.start();
    // In the background: start() does not wait for the pass.
    await this.prewarm?.start();
  }

  protected async onStop(): Promise<void> {
    await this.prewarm?.stop();
    await this.fusion.stop();
    // Window fetches still under way finish before the pool ends.
    await this.watermarks?.builds.idle();
    await this.compactor?.stop();
    await this.engine.stop();
  }
}

/**
 * The compactor's feeds: a push whose probe read at least `minTail` stored
 * hashes (no cache vouched for its partition) asks for that partition's
 * compaction; the items that searched a partition's runs tell the compactor
 * how wide to merge them. Returns the unsubscribe.
 */
export function compactOnLongProbes(engine: LogEngine, compactor: Compactor, minTail: number): () => void {
  const offProbed = engine.onProbed((partitionId, probeHashes) => {
    if (probeHashes >= minTail) compactor.request(partitionId);
  });
  const offReads = engine.onRunsRead((partitionId, items) => compactor.noteReads(partitionId, items));
  return () => {
    offProbed();
    offReads();
  };
}

/**
 * The PostgreSQL pool, read at scrape time: connections in use and idle,
 * callers waiting for one, and whether PostgreSQL answers at all
 * (`queen_postgres_up`, a `SELECT 1` bounded by a timeout).
 */
function poolMetrics(pool: pg.Pool, metrics: MetricsRegistry): void {
  metrics.gauge('queen_pg_pool_connections', 'PostgreSQL pool connections by state (in_use, idle)', ['state']).collectLabeled(() => [
    [{ state: 'in_use' }, pool.totalCount - pool.idleCount],
    [{ state: 'idle' }, pool.idleCount],
  ]);
  metrics.gauge('queen_pg_pool_waiting_requests', 'Callers waiting for a PostgreSQL pool connection').collect(() => pool.waitingCount);
  metrics.gaugeAsync(
    'queen_postgres_up',
    'Whether PostgreSQL answered SELECT 1 within 2 s at scrape time (1) or not (0)',
    async () => {
      let timer: NodeJS.Timeout | undefined;
      const q = pool.query('SELECT 1').then(
        () => 1,
        () => 0,
      );
      const timeout = new Promise<number>((resolve) => (timer = setTimeout(() => resolve(0), 2_000)));
      try {
        return await Promise.race([q, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
    'min',
  );
}
