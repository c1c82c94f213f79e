import { loadConfig, redactUrl } from './config.js';
import { ConfigError } from './errors.js';
import { createLogger } from './telemetry/logger.js';
import { buildInfo } from './telemetry/buildInfo.js';
import { startTracing } from './telemetry/sdk.js';

/**
 * Process entry point: configuration, the service, and signal handling.
 * SIGINT/SIGTERM stop fetching, finish or abandon in-flight work, commit what
 * is verified, and exit within QUEEN_SHUTDOWN_TIMEOUT_MS.
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
  log.info({ database: redactUrl(config.databaseUrl), kafka: config.kafkaBrokers }, 'starting');
  // A fault nothing handled still ends the process (nothing is lost: offsets
  // are committed only behind PostgreSQL, and the orchestrator restarts it),
  // but as a structured log line operators can find, not only a stderr trace.
  process.on('uncaughtException', (err, origin) => {
    log.fatal({ err, origin }, 'unhandled error; exiting');
    process.exit(1);
  });
  const stopTracing = startTracing({
    endpoint: config.otlpEndpoint,
    serviceName: config.serviceName,
    serviceVersion: buildInfo(config.buildCommit).version,
    sampleRatio: config.traceSampleRatio,
    kafkajsInstrumentation: config.traceKafkaRecords,
  });
  // Imported only now, so the tracing instrumentations see kafkajs, pg and node:http load.
  const { Service } = await import('./service.js');
  const service = new Service(config, log);
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
}

void main();
