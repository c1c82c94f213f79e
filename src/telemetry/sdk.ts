import { register } from 'node:module';
import { propagation } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { KafkaJsInstrumentation } from '@opentelemetry/instrumentation-kafkajs';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';

export interface TracingOptions {
  endpoint: string | undefined;
  serviceName: string;
  serviceVersion: string;
  /** Head sampling for traces that start here; a sampled remote parent (traceparent) is always followed. */
  sampleRatio: number;
  /**
   * Whether @opentelemetry/instrumentation-kafkajs runs. Off by default: it
   * starts a span per consumed record (context extraction, attributes, a
   * sampling decision, a duration metric) even when 1 % of traces are kept,
   * which measured as most of tracing's cost on the ingest (docs/observability.md).
   * Our chunk span already reads each record's traceparent itself.
   */
  kafkajsInstrumentation?: boolean;
  exporter?: SpanExporter;
}

/**
 * Starts the OpenTelemetry SDK when an OTLP endpoint is configured (Jaeger
 * v2 accepts OTLP/HTTP on :4318). Returns the shutdown function (flushes
 * pending spans). Without an endpoint nothing is started, no module is
 * patched, and every span call in the code is the API's no-op.
 *
 * The maintained instrumentations (node:http server, kafkajs, pg) patch
 * modules as they are loaded. This code base is ESM, so besides the CommonJS
 * require hook the ESM loader hook must be registered -- both before the
 * modules they patch are imported: main.ts imports the service only after
 * calling this.
 */
export function startTracing(opts: TracingOptions): () => Promise<void> {
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const exporter =
    opts.exporter ?? (opts.endpoint ? new OTLPTraceExporter({ url: `${opts.endpoint.replace(/\/$/, '')}/v1/traces` }) : undefined);
  if (!exporter) return async () => undefined;
  // Node 24 deprecates module.register in its docs only (no runtime warning,
  // even with --pending-deprecation). The OpenTelemetry hook is an async loader
  // for it; the in-thread replacement (import-in-the-middle's registerHooks
  // entry, Node >= 24.11.1) is not what @opentelemetry/instrumentation ships.
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- see above
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);
  const sdk = new NodeSDK({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: opts.serviceName, [ATTR_SERVICE_VERSION]: opts.serviceVersion }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(opts.sampleRatio) }),
    spanProcessors: [new BatchSpanProcessor(exporter)],
    // Traces only. Metrics are Prometheus' on /metrics and logs are pino's on
    // stdout; left to its defaults the SDK would also start OTLP metric and
    // log exporters towards the trace endpoint (Jaeger answers them 404) and
    // record every instrumentation's per-message histograms.
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: tracingInstrumentations({ kafkajs: opts.kafkajsInstrumentation ?? false }),
  });
  sdk.start();
  return () => sdk.shutdown();
}

/** The maintained instrumentations the service uses (also for tests that install their own provider). */
const UNTRACED_PATHS = /^\/(metrics|health(\/live|\/ready)?|livez|readyz)(\?|$)/;

export function tracingInstrumentations(opts: { kafkajs: boolean }) {
  return [
    // Scrapes and probes (/metrics, /health, /health/live|ready, /livez, /readyz) would otherwise be most of the traces.
    new HttpInstrumentation({
      ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.test(req.url ?? ''),
      ignoreOutgoingRequestHook: () => true,
    }),
    ...(opts.kafkajs ? [new KafkaJsInstrumentation()] : []),
    // Only queries inside one of our spans (a push, a hydration): pool pings and migrations stay untraced.
    new PgInstrumentation({ requireParentSpan: true }),
  ];
}
