import cluster from 'node:cluster';
import { loadConfig, redactUrl, type Config } from './config.js';
import { ConfigError } from './errors.js';
import { createLogger, type Logger } from './telemetry/logger.js';
import { buildInfo } from './telemetry/buildInfo.js';
import { startTracing } from './telemetry/sdk.js';

/**
 * Process entry point: configuration, the service, and signal handling.
 * SIGINT/SIGTERM stop fetching, finish or abandon in-flight work, commit what
 * is verified, and exit within QUEEN_SHUTDOWN_TIMEOUT_MS.
 *
 * QUEEN_WORKERS=1 runs the broker in this process. Above 1 this process is
 * the primary (cluster/primary.ts): it forks that many workers, each of
 * which runs this same file as a broker with its share of the budgets
 * (docs/scaling.md).
 */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(config.logLevel);
  if (!config.databaseUrl) {
    log.fatal('DATABASE_URL is not set (make run starts a local PostgreSQL and sets it)');
    process.exit(2);
  }
  // A fault nothing handled still ends the process (nothing is lost: offsets
  // are committed only behind PostgreSQL, and the orchestrator -- or for a
  // worker, the primary -- restarts it), but as a structured log line
  // operators can find, not only a stderr trace.
  process.on('uncaughtException', (err, origin) => {
    log.fatal({ err, origin }, 'unhandled error; exiting');
    process.exit(1);
  });
  if (config.workers > 1 && cluster.isPrimary) {
    const { runPrimary } = await import('./cluster/primary.js');
    await runPrimary(config, log);
    return;
  }
  await runBroker(config, cluster.isWorker ? log.child({ worker: config.workerSlot ?? 0 }) : log);
}

/** One broker: the single process, or one worker of a primary. */
async function runBroker(podConfig: Config, log: Logger): Promise<void> {
  const worker = cluster.isWorker;
  const slot = podConfig.workerSlot ?? 0;
  const { workerConfig } = await import('./cluster/share.js');
  const config = worker ? workerConfig(podConfig, slot) : podConfig;
  log.info(
    {
      database: redactUrl(config.databaseUrl!),
      kafka: config.kafkaBrokers,
      ...(worker ? { slot, workers: config.workers, dedupCacheMb: config.dedupCacheMb, pgPoolSize: config.pgPoolSize } : {}),
    },
    'starting',
  );
  const stopTracing = startTracing({
    endpoint: config.otlpEndpoint,
    serviceName: config.serviceName,
    serviceVersion: buildInfo(config.buildCommit).version,
    sampleRatio: config.traceSampleRatio,
    kafkajsInstrumentation: config.traceKafkaRecords,
  });
  // Imported only now, so the tracing instrumentations see kafkajs, pg and node:http load.
  const { Service } = await import('./service.js');
  let link: import('./cluster/workerLink.js').WorkerLink | undefined;
  if (worker) {
    const { WorkerLink } = await import('./cluster/workerLink.js');
    // Above the primary's own waits (readiness 2.5 s, prom-client's 5 s aggregation).
    link = new WorkerLink(slot, 6_000);
  }
  const service = new Service(config, log, { slot, housekeeping: slot === 0, ...(link ? { fleet: link } : {}) });
  if (link) {
    const { serveClusterMetrics } = await import('./telemetry/clusterMetrics.js');
    serveClusterMetrics(service.metrics);
  }
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      log.error({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown timed out; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    timer.unref();
    service
      .stop()
      .then(() => stopTracing().catch(() => undefined))
      .then(
        () => {
          log.info('stopped');
          process.exit(0);
        },
        (err: unknown) => {
          log.error({ err }, 'error during shutdown');
          process.exit(1);
        },
      );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  try {
    await service.start();
  } catch (err) {
    log.fatal({ err }, 'start-up failed');
    await service.stop().catch(() => undefined);
    process.exit(1);
  }
  if (link) {
    link.serve(() => service.readiness());
    link.started();
  }
}

void main();
