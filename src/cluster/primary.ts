import type { Config } from '../config.js';
import { redactUrl } from '../config.js';
import { HTTP_DEFAULTS } from '../http/server.js';
import type { Logger } from '../telemetry/logger.js';
import { LEAVE_TIMEOUT_MS } from './protocol.js';
import { WorkerFleet } from './workerFleet.js';

/** The primary's own last resort past the fleet's two bounded phases: only a stop that hangs in the primary itself reaches it. */
const SHUTDOWN_MARGIN_MS = 3_000;

/**
 * The primary process of QUEEN_WORKERS > 1 (docs/scaling.md): forks the
 * workers, replaces the ones that die, and on SIGTERM/SIGINT stops them in
 * two phases (WorkerFleet): every worker drains (stops fetching, settles
 * what is in flight, commits what PostgreSQL verified) while all stay in the
 * Kafka group, then all leave and exit. It exits 0 when every worker exited
 * 0, 1 otherwise. A second SIGTERM/SIGINT during the stop forces it: every
 * worker is SIGKILLed and the primary exits 1 (what is uncommitted is
 * redelivered and answers duplicate; nothing is lost).
 */
export async function runPrimary(config: Config, log: Logger): Promise<void> {
  log.info({ database: redactUrl(config.databaseUrl!), kafka: config.kafkaBrokers, workers: config.workers }, 'starting workers');
  const fleet = new WorkerFleet({
    workers: config.workers,
    logger: log,
    readinessTimeoutMs: HTTP_DEFAULTS.healthTimeoutMs + 500,
    restartBackoffMaxMs: config.ingressRestartBackoffMaxMs,
    drainTimeoutMs: config.shutdownTimeoutMs,
    leaveTimeoutMs: LEAVE_TIMEOUT_MS,
  });
  let stopping = false;
  const force = (signal: string) => {
    log.warn({ signal }, 'second signal during the stop: killing the workers');
    fleet.killAll();
    process.exit(1);
  };
  const shutdown = (signal: string) => {
    if (stopping) return force(signal);
    stopping = true;
    log.info({ signal }, 'shutting down');
    const limitMs = config.shutdownTimeoutMs + LEAVE_TIMEOUT_MS + SHUTDOWN_MARGIN_MS;
    const timer = setTimeout(() => {
      log.error({ timeoutMs: limitMs }, 'shutdown timed out; killing the workers left');
      fleet.killAll();
      process.exit(1);
    }, limitMs);
    timer.unref();
    fleet.stop().then(
      () => {
        log.info({ clean: fleet.clean }, 'stopped');
        process.exit(fleet.clean ? 0 : 1);
      },
      (err: unknown) => {
        log.error({ err }, 'error during shutdown');
        fleet.killAll();
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
    // A signal during this stop forces it (exit 1 either way).
    stopping = true;
    log.fatal({ err }, 'start-up failed');
    await fleet.stop().catch(() => undefined);
    process.exit(1);
  }
}
