import type { Config } from '../config.js';
import { redactUrl } from '../config.js';
import { HTTP_DEFAULTS } from '../http/server.js';
import type { Logger } from '../telemetry/logger.js';
import { WorkerFleet } from './workerFleet.js';

/** The primary's own wait past QUEEN_SHUTDOWN_TIMEOUT_MS: each worker enforces that limit itself, this only catches one that does not. */
const SHUTDOWN_MARGIN_MS = 2_000;

/**
 * The primary process of QUEEN_WORKERS > 1 (docs/scaling.md): forks the
 * workers, replaces the ones that die, and on SIGTERM/SIGINT stops them all
 * with the single process's drain (each worker stops fetching, answers
 * what is in flight, commits what PostgreSQL verified, leaves the group),
 * then exits 0 when every worker did, 1 otherwise.
 */
export async function runPrimary(config: Config, log: Logger): Promise<void> {
  log.info({ database: redactUrl(config.databaseUrl!), kafka: config.kafkaBrokers, workers: config.workers }, 'starting workers');
  const fleet = new WorkerFleet({
    workers: config.workers,
    logger: log,
    readinessTimeoutMs: HTTP_DEFAULTS.healthTimeoutMs + 500,
    restartBackoffMaxMs: config.ingressRestartBackoffMaxMs,
  });
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      log.error({ timeoutMs: config.shutdownTimeoutMs + SHUTDOWN_MARGIN_MS }, 'shutdown timed out; killing the workers left');
      fleet.killAll();
      process.exit(1);
    }, config.shutdownTimeoutMs + SHUTDOWN_MARGIN_MS);
    timer.unref();
    fleet.stop().then(
      () => {
        log.info({ clean: fleet.clean }, 'stopped');
        process.exit(fleet.clean ? 0 : 1);
      },
      (err: unknown) => {
        log.error({ err }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  await fleet.start();
  try {
    await fleet.up;
    log.info({ workers: config.workers }, 'workers started');
  } catch (err) {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- set by the signal handler while fleet.up was awaited
    if (stopping) return;
    log.fatal({ err }, 'start-up failed');
    await fleet.stop().catch(() => undefined);
    process.exit(1);
  }
}
