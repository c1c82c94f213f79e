import { Kafka, logLevel, type Admin, type KafkaConfig } from 'kafkajs';
import type { Logger } from '../telemetry/logger.js';
import type { Labels, MetricsRegistry } from '../telemetry/metrics.js';
import { Component } from '../util/lifecycle.js';

export interface LagMonitorOptions {
  brokers: string[];
  groupId: string;
  /** The topics, or a function that names them at each pass (the ingress's, after its patterns resolved). */
  topics: readonly string[] | (() => readonly string[]);
  /** How often the broker is asked for log-end and committed offsets. */
  intervalMs: number;
  /** The consumer's own connection settings: a managed broker asks the lag reader for the same TLS/SASL. */
  clientId?: string;
  ssl?: KafkaConfig['ssl'];
  sasl?: KafkaConfig['sasl'];
}

/** The lag gauge's name before it got its unit suffix (`_records`); exported as well until the next release. */
export const DEPRECATED_LAG_METRIC = 'queen_kafka_consumer_lag';

/** One partition's offsets as last read from the broker. */
export interface PartitionLag {
  topic: string;
  partition: number;
  /** High watermark: the offset the next produced record will get. */
  logEnd: bigint;
  /** The group's committed offset (next to read); the log start when the group has none. */
  committed: bigint;
  lag: bigint;
}

/**
 * Consumer lag per topic/partition, from the broker's point of view: log-end
 * offset minus the group's committed offset. It is read with its own admin
 * client, independently of the consumer, so a consumer that is stuck,
 * crashed or paused still shows up as lag that grows. Committed offsets move
 * only behind PostgreSQL verdicts, so this lag is exactly the number of
 * records not yet verified (or verified but not yet committed).
 *
 * States: Component lifecycle. start() connects the admin client and reads
 * once (so the gauges exist from the first scrape), then every intervalMs;
 * a failed read is logged, counted and leaves the last values in place.
 * stop() cancels the timer, waits for a read in progress and disconnects.
 */
export class LagMonitor extends Component {
  private readonly admin: Admin;
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private latest = new Map<string, PartitionLag>();
  private readonly reads;

  constructor(
    private readonly opts: LagMonitorOptions,
    private readonly log: Logger,
    metrics: MetricsRegistry,
  ) {
    super('LagMonitor');
    this.admin = new Kafka({
      clientId: `${opts.clientId ?? 'queen-ingress'}-lag`,
      brokers: opts.brokers,
      ssl: opts.ssl,
      sasl: opts.sasl,
      logLevel: logLevel.NOTHING,
    }).admin();
    const lagSeries = (): [Labels, number][] =>
      [...this.latest.values()].map((p) => [{ topic: p.topic, partition: p.partition }, Number(p.lag)]);
    metrics
      .gauge('queen_kafka_consumer_lag_records', 'Records behind: log-end offset minus the committed offset, per topic/partition', [
        'topic',
        'partition',
      ])
      .collectLabeled(lagSeries);
    // The name before the unit suffix, kept for one release so dashboards and
    // rules outside this repository can move over (docs/observability.md).
    metrics
      .gauge(DEPRECATED_LAG_METRIC, 'Deprecated: the same series as queen_kafka_consumer_lag_records, removed in the next release', [
        'topic',
        'partition',
      ])
      .collectLabeled(lagSeries);
    metrics
      .gauge('queen_kafka_log_end_offset', 'Log-end offset (high watermark) per topic/partition', ['topic', 'partition'])
      .collectLabeled(() => [...this.latest.values()].map((p) => [{ topic: p.topic, partition: p.partition }, Number(p.logEnd)]));
    this.reads = metrics.counter('queen_kafka_lag_reads_total', 'Lag reads from the broker by result', 'result');
  }

  /** The last read, per topic/partition (tests, readiness). */
  snapshot(): PartitionLag[] {
    return [...this.latest.values()];
  }

  /** Total lag over every partition of the last read. */
  total(): bigint {
    let n = 0n;
    for (const p of this.latest.values()) n += p.lag;
    return n;
  }

  protected async onStart(): Promise<void> {
    await this.admin.connect();
    await this.readOnce();
    this.schedule();
  }

  protected async onStop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.reading;
    await this.admin.disconnect();
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.reading = this.readOnce().finally(() => {
        this.reading = undefined;
        if (this.state === 'running') this.schedule();
      });
    }, this.opts.intervalMs);
    this.timer.unref();
  }

  private async readOnce(): Promise<void> {
    try {
      const next = new Map<string, PartitionLag>();
      const topics = typeof this.opts.topics === 'function' ? this.opts.topics() : this.opts.topics;
      for (const topic of topics) {
        const ends = await this.admin.fetchTopicOffsets(topic);
        const [committed] = await this.admin.fetchOffsets({ groupId: this.opts.groupId, topics: [topic] });
        const committedOf = new Map((committed?.partitions ?? []).map((p) => [p.partition, p.offset]));
        for (const e of ends) {
          const logEnd = BigInt(e.high);
          const c = committedOf.get(e.partition);
          // -1: the group has committed nothing here yet; it starts from the log start.
          const from = c === undefined || c === '-1' ? BigInt(e.low) : BigInt(c);
          next.set(`${topic}\x1f${e.partition}`, {
            topic,
            partition: e.partition,
            logEnd,
            committed: from,
            lag: logEnd > from ? logEnd - from : 0n,
          });
        }
      }
      this.latest = next;
      this.reads.inc(1, 'ok');
    } catch (err) {
      this.reads.inc(1, 'failed');
      this.log.warn({ err: (err as Error).message }, 'reading consumer lag from the broker failed; keeping the last values');
    }
  }
}
