import { register } from 'node:module';
import { Writable } from 'node:stream';
import anyTest, { type TestFn } from 'ava';
import { context, propagation, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { tracingInstrumentations } from '../../src/telemetry/sdk.js';

// Serial tests: they share one in-memory exporter.
// Everything that loads kafkajs, pg or node:http is imported in before(), after
// the instrumentations are registered, exactly as main.ts does.
interface Helpers {
  db: typeof import('../helpers/db.js');
  kafka: typeof import('../helpers/kafka.js');
  leaks: typeof import('../helpers/leaks.js');
  stack: typeof import('../helpers/stack.js');
  http: typeof import('../helpers/httpStack.js');
  logger: typeof import('../../src/telemetry/logger.js');
}
const test = anyTest as TestFn<{ db: import('../helpers/db.js').TestDatabase; h: Helpers }>;
const exporter = new InMemorySpanExporter();

test.before(async (t) => {
  // This file runs in its own process, so the global provider is ours alone.
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- the service's hook, as src/telemetry/sdk.ts registers it (and why)
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  // kafkajs on: these tests produce through the instrumentation (it writes the send span's traceparent) and cover the opt-in.
  registerInstrumentations({ instrumentations: tracingInstrumentations({ kafkajs: true }), tracerProvider: provider });
  const h: Helpers = {
    db: await import('../helpers/db.js'),
    kafka: await import('../helpers/kafka.js'),
    leaks: await import('../helpers/leaks.js'),
    stack: await import('../helpers/stack.js'),
    http: await import('../helpers/httpStack.js'),
    logger: await import('../../src/telemetry/logger.js'),
  };
  t.context = { db: await h.db.createTestDatabase('tracing'), h };
});
test.after.always(async (t) => {
  await t.context.db?.drop();
  const live = (await import('../../src/util/lifecycle.js')).liveComponents();
  if (live.length > 0) throw new Error(`leaked components: ${live.join(', ')}`);
});

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const idOf = (s: ReadableSpan) => s.spanContext().spanId;

/**
 * Produces each record in its own send (the kafkajs instrumentation writes the
 * send span's traceparent into the record), under its producer span context
 * when it has one, then ingests them and returns the spans that ingest made.
 */
async function ingest(
  t: { context: { db: { url: string }; h: Helpers } },
  records: { key: string; producer?: { traceId: string; spanId: string }; tx: string }[],
): Promise<{ topic: string; spans: ReadableSpan[]; sends: ReadableSpan[] }> {
  const { kafka: k, leaks, stack: st } = t.context.h;
  const kafka = k.kafkaClient();
  const topic = k.uniqueName('traced');
  const group = k.uniqueName('g-traced');
  await k.createTopic(kafka, topic, 1);
  exporter.reset();
  for (const r of records) {
    const ctx = r.producer ? trace.setSpanContext(ROOT_CONTEXT, { ...r.producer, traceFlags: 1, isRemote: true }) : ROOT_CONTEXT;
    await context.with(ctx, () =>
      k.produce(kafka, topic, [{ key: r.key, value: JSON.stringify({ tx: r.tx }), headers: { transactionId: r.tx } }]),
    );
  }
  const sends = exporter.getFinishedSpans().filter((s) => s.name === `send ${topic}`);
  const stack = await st.startIngestStack({ databaseUrl: t.context.db.url, topic, group });
  try {
    await leaks.waitFor('ingest', () => k.caughtUp(kafka, group, topic), 60_000, 100);
  } finally {
    await stack.stop();
  }
  return {
    topic,
    sends,
    spans: exporter
      .getFinishedSpans()
      .filter((s) => s.instrumentationScope.name === 'queen-ingress' || s.instrumentationScope.name.includes('pg')),
  };
}

test.serial(
  'a chunk holding one producer context continues its trace: producer -> process {topic} -> flush -> PostgreSQL push -> pg query',
  async (t) => {
    const producerTrace = '0af7651916cd43dd8448eb211c80319c';
    const producerSpan = 'b7ad6b7169203331';
    const { topic, spans, sends } = await ingest(t, [
      { key: 'k1', tx: 'traced-1', producer: { traceId: producerTrace, spanId: producerSpan } },
    ]);
    t.is(sends.length, 1);
    t.is(parentOf(sends[0]!), producerSpan, 'the producer send span is in the producer trace');
    const chunk = spans.find((s) => s.name === `process ${topic}`);
    const flush = spans.find((s) => s.name === 'queen.fusion.flush' && s.spanContext().traceId === producerTrace);
    const push = spans.find((s) => s.name === 'SELECT queen.log_push_v12' && s.spanContext().traceId === producerTrace);
    t.truthy(chunk && flush && push, `spans: ${spans.map((s) => s.name).join(', ')}`);
    t.is(chunk!.spanContext().traceId, producerTrace, 'the chunk is in the producer trace');
    t.is(parentOf(chunk!), idOf(sends[0]!), "the chunk is a child of the record's producer (send) span");
    t.is(chunk!.kind, 4 /* CONSUMER */);
    t.like(chunk!.attributes, {
      'messaging.system': 'kafka',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.batch.message_count': 1,
      'messaging.kafka.message.key': 'k1',
      'messaging.kafka.offset': 0,
      'queen.verdict.queued': 1,
      'queen.verdict.duplicate': 0,
    });
    t.true(String(chunk!.attributes['messaging.consumer.group.name']).startsWith('g-traced'));
    t.is(parentOf(flush!), idOf(chunk!), 'the flush is a child of its first submitter, the chunk');
    t.is(flush!.spanContext().traceId, producerTrace);
    t.is(flush!.attributes['queen.verdict.queued'], 1);
    t.is(parentOf(push!), idOf(flush!), 'the PostgreSQL push is a child of the flush');
    t.like(push!.attributes, {
      'db.system.name': 'postgresql',
      'db.operation.name': 'SELECT',
      'db.query.summary': 'SELECT queen.log_push_v12',
      'server.address': '127.0.0.1',
      'queen.frames': 1,
      'queen.segments': 1,
    });
    t.is(
      Number(push!.attributes['queen.probes.run']) + Number(push!.attributes['queen.probes.skipped']),
      1,
      'each segment is either probed or skipped',
    );
    t.truthy(push!.attributes['db.namespace']);
    const pgQuery = spans.find((s) => parentOf(s) === idOf(push!));
    t.truthy(pgQuery, 'the pg instrumentation traced the SQL call under the push');
    t.is(pgQuery!.attributes['db.system.name'], 'postgresql');
  },
);

test.serial('a chunk holding several producer contexts links to each of them instead', async (t) => {
  const traceOf = (i: number) => String(i).padStart(32, 'a');
  const records: { key: string; tx: string; producer?: { traceId: string; spanId: string } }[] = [1, 2, 3].map((i) => ({
    key: `k${i}`,
    tx: `multi-${i}`,
    producer: { traceId: traceOf(i), spanId: String(i).padStart(16, 'b') },
  }));
  const { topic, spans, sends } = await ingest(t, [...records, { key: 'k9', tx: 'multi-untraced' }]);
  const chunk = spans.find((s) => s.name === `process ${topic}`);
  t.truthy(chunk);
  t.is(chunk!.attributes['messaging.batch.message_count'], 4);
  t.is(chunk!.attributes['messaging.kafka.message.key'], undefined, 'no per-record key on a multi-record chunk');
  t.is(sends.length, 4);
  t.deepEqual(chunk!.links.map((l) => l.context.spanId).sort(), sends.map(idOf).sort(), 'one link per distinct producer span');
  t.true(
    [1, 2, 3].every((i) => chunk!.links.some((l) => l.context.traceId === traceOf(i))),
    'each producer trace can find the ingest through its link',
  );
  t.false(
    sends.some((s) => chunk!.spanContext().traceId === s.spanContext().traceId),
    'the chunk is not parented into any one producer trace',
  );
});

test.serial(
  'HTTP push: the server span continues the request traceparent, links item traceContexts, carries verdicts; logs carry trace_id',
  async (t) => {
    const http = await t.context.h.http.startHttpStack('tracing-http');
    try {
      exporter.reset();
      const reqTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
      const reqSpan = '00f067aa0ba902b7';
      const itemCtx = `00-${'c'.repeat(32)}-${'d'.repeat(16)}-01`;
      const item = (tx: string, extra = {}) => ({ queue: 'traced', partition: 'p', transactionId: tx, payload: { tx }, ...extra });
      const res = await fetch(`${http.api.url}/api/v1/push`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', traceparent: `00-${reqTrace}-${reqSpan}-01` },
        body: JSON.stringify({ items: [item('h1', { traceContext: itemCtx }), item('h1'), item('h2')] }),
      });
      t.is(res.status, 201);
      await res.arrayBuffer();
      const leaks = t.context.h.leaks;
      const server = await leaks.waitFor('server span', () =>
        exporter.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER && s.spanContext().traceId === reqTrace),
      );
      t.is(server.name, 'POST /api/v1/push');
      t.is(parentOf(server), reqSpan, 'continues the caller trace');
      t.is(server.attributes['http.route'], '/api/v1/push');
      t.like(server.attributes, { 'queen.verdict.queued': 2, 'queen.verdict.duplicate': 1, 'queen.verdict.failed': 0 });
      t.true(
        server.links.some((l) => l.context.traceId === 'c'.repeat(32)),
        "links the item's traceContext",
      );
      const flush = exporter.getFinishedSpans().find((s) => s.name === 'queen.fusion.flush' && s.spanContext().traceId === reqTrace);
      t.is(flush && parentOf(flush), idOf(server), 'the flush continues the request trace');

      // Logs: a line written inside a span carries its ids; outside, none.
      const lines: Record<string, unknown>[] = [];
      const sink = new Writable({
        write: (chunk, _enc, done) => {
          lines.push(JSON.parse(String(chunk)));
          done();
        },
      });
      const { pino } = await import('pino');
      const log = pino({ mixin: t.context.h.logger.traceFields }, sink);
      const tracer = trace.getTracer('test');
      tracer.startActiveSpan('work', (span) => {
        log.info('inside');
        span.end();
      });
      log.info('outside');
      await leaks.waitFor('log lines', () => lines.length === 2);
      const inside = lines.find((l) => l.msg === 'inside')!;
      t.regex(String(inside.trace_id), /^[0-9a-f]{32}$/);
      t.regex(String(inside.span_id), /^[0-9a-f]{16}$/);
      t.is(lines.find((l) => l.msg === 'outside')!.trace_id, undefined);
    } finally {
      await http.stop();
    }
  },
);
