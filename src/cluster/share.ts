import type { Config } from '../config.js';

/**
 * A worker's configuration: the pod's, with its per-process budgets split
 * over QUEEN_WORKERS (docs/scaling.md), so N workers hold what one process
 * held, not N times it:
 *   - QUEEN_DEDUP_CACHE_MB / N each (in bytes, so nothing is rounded away);
 *   - QUEEN_PG_POOL_SIZE / N connections each, rounded down, at least 1 (the
 *     pod's total stays within the setting whenever it is >= N).
 * Everything else every worker takes whole: a payload limit, a bundle size,
 * a shutdown timeout are per request or per process by nature.
 */
export function workerConfig(config: Config, slot: number): Config {
  const n = config.workers;
  return {
    ...config,
    workerSlot: slot,
    dedupCacheMb: config.dedupCacheMb / n,
    pgPoolSize: Math.max(1, Math.floor(config.pgPoolSize / n)),
  };
}
