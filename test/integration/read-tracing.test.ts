import anyTest, { type TestFn } from 'ava';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

const test = anyTest as TestFn<{ s: HttpStack }>;
const exporter = new InMemorySpanExporter();

test.before(async (t) => {
  // This file runs in its own process, so the global provider is ours alone.
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  t.context = { s: await startHttpStack('read_tracing') };
});
teardownAndCheckLeaks(test, async (t) => {
  await t.context.s?.stop();
});

test('a pop continues the producer trace: its span links to the context stored in each frame', async (t) => {
  const producerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
  const producerSpan = '00f067aa0ba902b7';
  await t.context.s.client.queue('traced').push([
    { transactionId: 't1', data: 1, traceContext: `00-${producerTrace}-${producerSpan}-01` },
    { transactionId: 't2', data: 2 },
  ]);
  const msgs = await t.context.s.client.queue('traced').pop({ group: 'g', batch: 10 });
  t.is(msgs.length, 2);
  const pop = exporter.getFinishedSpans().find((s) => s.name === 'queen.pop');
  t.truthy(pop);
  t.deepEqual(
    pop!.links.map((l) => [l.context.traceId, l.context.spanId]),
    [[producerTrace, producerSpan]],
  );
  t.is(pop!.attributes['messaging.destination.name'], 'traced');
  t.is(pop!.attributes['messaging.batch.message_count'], 2);
});
