import type { Config } from './config.js';
import { LogEngine } from './engine/logEngine.js';
import { migrate } from './engine/migrate.js';
import type { Logger } from './telemetry/logger.js';
import { MetricsRegistry } from './telemetry/metrics.js';
import { Component } from './util/lifecycle.js';

/**
 * The whole service: engine, (cache, fusion, HTTP API, Kafka ingress as they
 * are wired in). Started in dependency order, stopped in reverse.
 */
export class Service extends Component {
  readonly metrics = new MetricsRegistry();
  readonly engine: LogEngine;

  constructor(
    readonly config: Config,
    private readonly log: Logger,
  ) {
    super('Service');
    this.engine = new LogEngine({ connectionString: config.databaseUrl, poolSize: config.pgPoolSize, metrics: this.metrics });
  }

  protected async onStart(): Promise<void> {
    await this.engine.start();
    const { applied } = await migrate(this.engine.pool);
    this.log.info({ applied }, 'migrations applied');
  }

  protected async onStop(): Promise<void> {
    await this.engine.stop();
  }
}
