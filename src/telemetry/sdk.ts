import { propagation } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';

/**
 * Starts the OpenTelemetry SDK when an OTLP endpoint is configured (Jaeger
 * v2 accepts OTLP/HTTP on :4318). Returns the shutdown function (flushes
 * pending spans). Without an endpoint, nothing is started.
 */
export function startTracing(opts: { endpoint: string | undefined; serviceName: string; exporter?: SpanExporter }): () => Promise<void> {
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const exporter = opts.exporter ?? (opts.endpoint ? new OTLPTraceExporter({ url: `${opts.endpoint.replace(/\/$/, '')}/v1/traces` }) : undefined);
  if (!exporter) return async () => undefined;
  const sdk = new NodeSDK({
    resource: resourceFromAttributes({ 'service.name': opts.serviceName }),
    spanProcessors: [new BatchSpanProcessor(exporter)],
    instrumentations: [],
  });
  sdk.start();
  return () => sdk.shutdown();
}
