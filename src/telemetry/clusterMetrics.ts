import client from 'prom-client';
import type { MetricsRegistry } from './metrics.js';

/**
 * /metrics over a pod's worker processes, on prom-client's AggregatorRegistry
 * (docs/scaling.md): the primary asks every worker for its registry as JSON
 * and combines the series by name and labels with each metric's aggregator
 * (counters and histograms sum; gauges per GaugeAggregator; prom-client's
 * default metrics carry their own, e.g. the start time is omitted and the
 * event-loop lag averaged).
 */

/** In a worker: answer the primary's metric requests with this registry (call once, before serving). */
export function serveClusterMetrics(metrics: MetricsRegistry): void {
  client.AggregatorRegistry.setRegistries(metrics.registry);
  // The constructor installs the worker's listener for the primary's requests.
  new client.AggregatorRegistry();
}

/** In the primary: the aggregate of every connected worker's registry (rejects after prom-client's 5 s timeout). */
export class ClusterMetrics {
  private readonly aggregator = new client.AggregatorRegistry();

  get contentType(): string {
    return this.aggregator.contentType;
  }

  render(): Promise<string> {
    return this.aggregator.clusterMetrics();
  }
}
