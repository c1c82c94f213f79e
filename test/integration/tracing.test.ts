import anyTest, { type TestFn } from 'ava';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { caughtUp, createTopic, kafkaClient, produce, uniqueName } from '../helpers/kafka.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';
import { startIngestStack } from '../helpers/stack.js';

const test = anyTest as TestFn<{ db: TestDatabase }>;
const exporter = new InMemorySpanExporter();

test.before(async (t) => {
  // This file runs in its own process, so the global provider is ours alone.
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  t.context = { db: await createTestDatabase('tracing') };
});
teardownAndCheckLeaks(test, async (t) => {
  await t.context.db?.drop();
});

test('a record traced by its producer links Kafka chunk -> fusion flush -> PostgreSQL push', async (t) => {
  const kafka = kafkaClient();
  const topic = uniqueName('traced');
  const group = uniqueName('g-traced');
  await createTopic(kafka, topic, 1);
  const producerTrace = '0af7651916cd43dd8448eb211c80319c';
  const producerSpan = 'b7ad6b7169203331';
  await produce(kafka, topic, [{ key: 'k', value: '{"a":1}', headers: { traceparent: `00-${producerTrace}-${producerSpan}-01`, transactionId: 'traced-1' } }]);
  const stack = await startIngestStack({ databaseUrl: t.context.db.url, topic, group });
  try {
    await waitFor('ingest', () => caughtUp(kafka, group, topic), 60_000, 100);
  } finally {
    await stack.stop();
  }
  const spans = exporter.getFinishedSpans();
  const chunk = spans.find((s) => s.name === 'queen.kafka.chunk');
  const flush = spans.find((s) => s.name === 'queen.fusion.flush');
  const push = spans.find((s) => s.name === 'queen.log_push');
  t.truthy(chunk && flush && push, `spans: ${spans.map((s) => s.name).join(', ')}`);
  t.true(chunk!.links.some((l) => l.context.traceId === producerTrace && l.context.spanId === producerSpan), 'chunk links to the producer span');
  t.is(chunk!.attributes['messaging.destination.name'], topic);
  t.true(flush!.links.some((l) => l.context.spanId === chunk!.spanContext().spanId), 'flush links to the chunk that submitted');
  t.is(push!.parentSpanContext?.spanId ?? (push as unknown as { parentSpanId?: string }).parentSpanId, flush!.spanContext().spanId, 'the PostgreSQL push is a child of the flush');
  t.is(push!.attributes['db.system'], 'postgresql');
  t.is(push!.attributes['queen.frames'], 1);
});
