import { messageVerdicts, type Counter, type Histogram, type MetricsRegistry } from '../telemetry/metrics.js';

/** The Kafka ingress's counters and histogram, shared by its parts; each is undefined without a registry. */
export interface IngressMetrics {
  records: Counter | undefined;
  verdicts: Counter | undefined;
  commits: Counter | undefined;
  retries: Counter | undefined;
  dead: Counter | undefined;
  deadFailures: Counter | undefined;
  deadSkips: Counter | undefined;
  pauses: Counter | undefined;
  laneWaits: Counter | undefined;
  messages: Counter | undefined;
  commitLatency: Histogram | undefined;
}

/** Registers the ingress's metrics (in this order; the consumer-up gauge is the component's own). */
export function ingressMetrics(metrics: MetricsRegistry | undefined): IngressMetrics {
  return {
    records: metrics?.counter('queen_ingress_records_total', 'Kafka records processed by outcome', 'outcome'),
    verdicts: metrics?.counter('queen_ingress_commits_total', 'Chunks of Kafka records fully verified and committed'),
    commits: metrics?.counter(
      'queen_ingress_commit_failures_total',
      'Offset commits refused (rebalance); the records will be redelivered as duplicates',
    ),
    retries: metrics?.counter('queen_ingress_retries_total', 'Batch attempts retried after a retriable failure'),
    dead: metrics?.counter('queen_ingress_dead_letters_total', 'Records written to a dead-letter topic'),
    deadFailures: metrics?.counter(
      'queen_ingress_dead_letter_failures_total',
      'Dead-letter writes that failed (each halts its partition, or skips its records under QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE=all)',
    ),
    deadSkips: metrics?.counter(
      'queen_ingress_dead_letter_skips_total',
      'Records skipped because their dead-letter write failed (QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE=all); committed past, in neither the log nor the dead-letter topic',
    ),
    pauses: metrics?.counter(
      'queen_ingress_pauses_total',
      'Times fetching was paused because the fusion layer was over its in-flight byte budget',
    ),
    laneWaits: metrics?.counter(
      'queen_ingress_lane_waits_total',
      "Times a fetched batch waited for room in its partition's lane (or under the lanes' byte budget); fetching pauses for the whole consumer meanwhile",
    ),
    messages: metrics && messageVerdicts(metrics),
    commitLatency: metrics?.histogram(
      'queen_ingress_record_commit_seconds',
      'From a chunk of records being fetched to the broker acknowledging its offset commit',
    ),
  };
}
