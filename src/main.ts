import cluster from 'node:cluster';
import { loadConfig, redactUrl, type Config } from './config.js';
import { ConfigError } from './errors.js';
import { createLogger, type Logger } from './telemetry/logger.js';
import { buildInfo } from './telemetry/buildInfo.js';
import { startTracing } from './telemetry/sdk.js';

/**
 * Process entry point: configuration, the service, and signal handling.
 * SIGINT/SIGTERM stop fetching, finish or abandon in-flight work, commit what
 * is verified, leave the Kafka group and exit within QUEEN_SHUTDOWN_TIMEOUT_MS.
 *
 * QUEEN_WORKERS=1 runs the broker in this process. Above 1 this process is
 * the primary (cluster/primary.ts): it forks that many workers, each of
 * which runs this same file as a broker with its share of the budgets
 * (docs/scaling.md). A worker stops when the primary says so, in two phases
 * (drain, then leave: cluster/workerFleet.ts); it ignores SIGINT (a
 * terminal's Ctrl-C reaches it too, and the primary leads), and SIGTERM to it
 * alone stops it as a single process, after which the primary replaces it.
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
  let leaveTimeoutMs = 0;
  if (worker) {
    const { WorkerLink } = await import('./cluster/workerLink.js');
    leaveTimeoutMs = (await import('./cluster/protocol.js')).LEAVE_TIMEOUT_MS;
    // Above the primary's own waits (readiness 2.5 s, prom-client's 5 s aggregation).
    link = new WorkerLink(slot, 6_000);
  }
  const service = new Service(config, log, { slot, housekeeping: slot === 0, ...(link ? { fleet: link } : {}) });
  if (link) {
    const { serveClusterMetrics } = await import('./telemetry/clusterMetrics.js');
    serveClusterMetrics(service.metrics);
  }
  let stopping = false;
  /** Stops this broker and exits; `timeoutMs` bounds it (a signal: the whole drain and leave; the primary's leave: phase 2 only). */
  const shutdown = (why: { signal: string } | { phase: 'leave' }, timeoutMs: number) => {
    if (stopping) return;
    stopping = true;
    log.info(why, 'shutting down');
    backstop(timeoutMs);
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
  let backstopTimer: NodeJS.Timeout | undefined;
  const backstop = (timeoutMs: number) => {
    clearTimeout(backstopTimer);
    backstopTimer = setTimeout(() => {
      log.error({ timeoutMs }, 'shutdown timed out; exiting');
      process.exit(1);
    }, timeoutMs);
    backstopTimer.unref();
  };
  const starting = service.start();
  // Awaited below; its failure is handled there.
  starting.catch(() => undefined);
  if (link) {
    // The pod's two-phase stop, run by the primary (docs/scaling.md, "Stopping"). Each bound is 1 s inside the
    // primary's, so this worker ends on its own, logged, before the primary would SIGKILL it.
    link.onStop({
      drain: async () => {
        // Already stopping on its own (a SIGTERM to it alone came first): that stop drains too, under its own bound.
        if (stopping) return;
        log.info('draining (phase 1 of the pod stop)');
        backstop(config.shutdownTimeoutMs + leaveTimeoutMs - 1_000);
        await starting.catch(() => undefined);
        await service.drain().catch((err: unknown) => log.error({ err }, 'error during the drain'));
        log.info('drained; waiting for the primary to say leave');
      },
      leave: () => shutdown({ phase: 'leave' }, leaveTimeoutMs - 1_000),
    });
  }
  process.on('SIGINT', () => {
    // A terminal's Ctrl-C reaches every process of the group: the primary runs the pod's stop, this worker follows it.
    if (link && process.connected) return;
    shutdown({ signal: 'SIGINT' }, config.shutdownTimeoutMs);
  });
  process.on('SIGTERM', () => {
    // SIGTERM to this worker alone stops it as a single process (the primary replaces it); during the pod's stop the primary leads.
    if (link?.stopping) return;
    shutdown({ signal: 'SIGTERM' }, config.shutdownTimeoutMs);
  });
  try {
    await starting;
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
