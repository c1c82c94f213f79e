import anyTest, { type TestFn } from 'ava';
import { metrics } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { startTracing } from '../../src/telemetry/sdk.js';

// The production start-up path (startTracing, as main.ts calls it) with its
// defaults: traces only, and no per-record kafkajs spans. This file runs in its
// own process, so the global providers it installs are its alone; everything
// that loads kafkajs or pg is imported after startTracing, as in main.ts.
interface Helpers {
  db: typeof import('../helpers/db.js');
  kafka: typeof import('../helpers/kafka.js');
  leaks: typeof import('../helpers/leaks.js');
  stack: typeof import('../helpers/stack.js');
}
const test = anyTest as TestFn<{ db: import('../helpers/db.js').TestDatabase; h: Helpers; stopTracing: () => Promise<void> }>;
const exporter = new InMemorySpanExporter();
const noMeters = metrics.getMeterProvider();

test.before(async (t) => {
  const stopTracing = startTracing({
    endpoint: undefined,
    exporter,
    serviceName: 'tracing-default-test',
    serviceVersion: '0.0.0',
    sampleRatio: 1,
  });
  const h: Helpers = {
    db: await import('../helpers/db.js'),
    kafka: await import('../helpers/kafka.js'),
    leaks: await import('../helpers/leaks.js'),
    stack: await import('../helpers/stack.js'),
  };
  t.context = { db: await h.db.createTestDatabase('tracing_default'), h, stopTracing };
});
test.after.always(async (t) => {
  await t.context.stopTracing?.();
  await t.context.db?.drop();
  const live = (await import('../../src/util/lifecycle.js')).liveComponents();
  if (live.length > 0) throw new Error(`leaked components: ${live.join(', ')}`);
});

test.serial('the SDK starts traces only: no OTLP meter provider is installed', (t) => {
  // Our metrics are prom-client's; a global SDK MeterProvider would export
  // OTLP metrics to the trace endpoint and record per-message histograms.
  t.is(metrics.getMeterProvider(), noMeters, 'the global meter provider is still the API no-op');
});

test.serial(
  "without the kafkajs instrumentation a record's traceparent still parents its chunk, and no per-record spans are made",
  async (t) => {
    const { kafka: k, leaks, stack: st } = t.context.h;
    const kafka = k.kafkaClient();
    const topic = k.uniqueName('traced-default');
    const group = k.uniqueName('g-traced-default');
    const producerTrace = '5bf92f3577b34da6a3ce929d0e0e4736';
    const producerSpan = '10f067aa0ba902b7';
    await k.createTopic(kafka, topic, 1);
    // Everything is sampled here (ratio 1), so per-record kafkajs spans, if any ran, would be exported.
    await k.produce(kafka, topic, [
      { key: 'd1', value: '{"n":1}', headers: { transactionId: 'default-1', traceparent: `00-${producerTrace}-${producerSpan}-01` } },
    ]);
    // An untraced record in the same chunk does not change the parent.
    await k.produce(kafka, topic, [{ key: 'd2', value: '{"n":2}', headers: { transactionId: 'default-2' } }]);
    exporter.reset();
    const stack = await st.startIngestStack({ databaseUrl: t.context.db.url, topic, group });
    try {
      await leaks.waitFor('ingest', () => k.caughtUp(kafka, group, topic), 60_000, 100);
    } finally {
      await stack.stop();
    }
    // The SDK's batch processor exports on its schedule (shutting it down would also clear the in-memory exporter).
    // The chunk span ends last (it waits for the flush and the push under it).
    await leaks.waitFor(
      'the chunk span exported',
      () => exporter.getFinishedSpans().some((s) => s.name === `process ${topic}` && s.spanContext().traceId === producerTrace),
      30_000,
      100,
    );
    const spans: ReadableSpan[] = exporter.getFinishedSpans();
    const chunks = spans.filter((s) => s.name === `process ${topic}` && s.spanContext().traceId === producerTrace);
    t.is(chunks.length, 1, `spans: ${spans.map((s) => `${s.instrumentationScope.name}:${s.name}`).join(', ')}`);
    t.is(chunks[0]!.spanContext().traceId, producerTrace);
    t.is(chunks[0]!.parentSpanContext?.spanId, producerSpan, "the chunk is a child of the record's producer span");
    t.is(chunks[0]!.instrumentationScope.name, 'queen-ingress');
    t.false(
      spans.some((s) => s.instrumentationScope.name.includes('kafkajs')),
      'no kafkajs instrumentation spans',
    );
    t.true(
      spans.some((s) => s.name === 'SELECT queen.log_push_v12' && s.spanContext().traceId === producerTrace),
      'the push is in the producer trace',
    );
  },
);
