import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import anyTest, { type TestFn } from 'ava';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { brokers, caughtUp, createTopic, kafkaClient, produce, uniqueName } from '../helpers/kafka.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';
import { ServiceProcess } from '../helpers/serviceProcess.js';

/**
 * `make test-jaeger`: the real service process exports OTLP to a real Jaeger
 * v2 (JAEGER_BIN, built by the Makefile), and the chain is read back from
 * Jaeger's HTTP query API, as an operator would find it.
 */
interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: { refType: string; spanID: string; traceID: string }[];
  tags: { key: string; value: unknown }[];
  processID: string;
}
interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string; tags: { key: string; value: unknown }[] }>;
}
interface Ctx {
  db: TestDatabase;
  jaeger: ChildProcess;
  query: string;
  otlp: string;
}
const test = anyTest as TestFn<Ctx>;

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

test.before(async (t) => {
  const bin = process.env.JAEGER_BIN;
  if (!bin) throw new Error('JAEGER_BIN is not set: run `make test-jaeger`');
  const [grpc, http, query] = [await freePort(), await freePort(), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'queen-jaeger-'));
  const config = join(dir, 'jaeger.yaml');
  writeFileSync(
    config,
    `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: { receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter] }
  telemetry: { metrics: { level: none } }
extensions:
  jaeger_query: { storage: { traces: memstore }, http: { endpoint: 127.0.0.1:${query} }, grpc: { endpoint: 127.0.0.1:${await freePort()} } }
  jaeger_storage: { backends: { memstore: { memory: { max_traces: 10000 } } } }
receivers:
  otlp: { protocols: { grpc: { endpoint: 127.0.0.1:${grpc} }, http: { endpoint: 127.0.0.1:${http} } } }
processors:
  batch: {}
exporters:
  jaeger_storage_exporter: { trace_storage: memstore }
`,
  );
  const jaeger = spawn(bin, ['--config', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  jaeger.stderr.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
  const queryUrl = `http://127.0.0.1:${query}`;
  await waitFor(
    `Jaeger query API (${log})`,
    () =>
      fetch(`${queryUrl}/api/services`).then(
        (r) => r.ok,
        () => false,
      ),
    60_000,
    200,
  );
  t.context = { db: await createTestDatabase('jaeger'), jaeger, query: queryUrl, otlp: `http://127.0.0.1:${http}` };
});
teardownAndCheckLeaks(test, async (t) => {
  t.context.jaeger?.kill('SIGTERM');
  await t.context.db?.drop();
});

const tag = (s: JaegerSpan, key: string) => s.tags.find((x) => x.key === key)?.value;
const parent = (s: JaegerSpan) => s.references.find((r) => r.refType === 'CHILD_OF')?.spanID;

async function traceOf(t: { context: Ctx }, traceId: string, wanted: (tr: JaegerTrace) => boolean): Promise<JaegerTrace> {
  return waitFor(
    `trace ${traceId} in Jaeger`,
    async () => {
      const r = await fetch(`${t.context.query}/api/traces/${traceId}`);
      if (!r.ok) return undefined;
      const tr = ((await r.json()) as { data: JaegerTrace[] }).data[0];
      return tr && wanted(tr) ? tr : undefined;
    },
    30_000,
    200,
  );
}

test('producer -> consume -> flush -> PostgreSQL push, for a Kafka record and for an HTTP push, in Jaeger', async (t) => {
  const kafka = kafkaClient();
  const topic = uniqueName('jaeger');
  const group = uniqueName('g-jaeger');
  await createTopic(kafka, topic, 1);
  const kTrace = '5b8efff798038103d269b633813fc60c';
  const kSpan = 'eee19b7ec3c1b174';
  await produce(kafka, topic, [
    { key: 'order-1', value: '{"n":1}', headers: { transactionId: 'jaeger-1', traceparent: `00-${kTrace}-${kSpan}-01` } },
  ]);
  const service = new ServiceProcess({
    DATABASE_URL: t.context.db.url,
    KAFKA_BROKERS: brokers().join(','),
    QUEEN_INGRESS_TOPICS: topic,
    QUEEN_INGRESS_GROUP: group,
    QUEEN_HTTP_HOST: '127.0.0.1',
    OTEL_EXPORTER_OTLP_ENDPOINT: t.context.otlp,
    OTEL_SERVICE_NAME: 'queen-ingress-jaeger-test',
    // 0: nothing this service starts is sampled, so only the callers' sampled traces arrive.
    OTEL_TRACES_SAMPLER_ARG: '0',
  });
  const hTrace = '0af7651916cd43dd8448eb211c80319c';
  const hSpan = 'b7ad6b7169203331';
  try {
    await service.ready('consuming');
    await waitFor('ingest', () => caughtUp(kafka, group, topic), 60_000, 100);
    const port = (service.lines.find((l) => l.msg === 'HTTP API listening') as { port: number }).port;
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/push`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${hTrace}-${hSpan}-01` },
      body: JSON.stringify({ items: [{ queue: 'jaeger', transactionId: 'h-1', payload: { n: 1 } }] }),
    });
    t.is(res.status, 201);
    await res.arrayBuffer();
    service.kill('SIGTERM'); // shutdown flushes the span exporter
    t.is((await service.exited).code, 0);
  } finally {
    await service.ensureDead();
  }

  const k = await traceOf(t, kTrace, (tr) => tr.spans.length >= 3);
  // Kept for docs/observability.md's picture: node scripts/trace-svg.mjs .local/tmp/jaeger-trace.json
  mkdirSync('.local/tmp', { recursive: true });
  writeFileSync('.local/tmp/jaeger-trace.json', JSON.stringify({ data: [k] }, null, 2));
  const process = k.spans.find((s) => s.operationName === `process ${topic}`);
  const flush = k.spans.find((s) => s.operationName === 'queen.fusion.flush');
  const push = k.spans.find((s) => s.operationName === 'SELECT queen.log_push_v12');
  t.truthy(process && flush && push, `spans: ${k.spans.map((s) => s.operationName).join(', ')}`);
  t.is(parent(process!), kSpan, 'consume is a child of the producer span');
  t.is(parent(flush!), process!.spanID, 'flush is a child of the consume span');
  t.is(parent(push!), flush!.spanID, 'the PostgreSQL push is a child of the flush');
  t.is(tag(process!, 'messaging.system'), 'kafka');
  t.is(tag(process!, 'messaging.operation.type'), 'process');
  t.is(tag(process!, 'messaging.destination.name'), topic);
  t.is(tag(process!, 'messaging.consumer.group.name'), group);
  t.is(tag(process!, 'messaging.kafka.message.key'), 'order-1');
  t.is(tag(process!, 'queen.verdict.queued'), 1);
  t.is(tag(push!, 'db.system.name'), 'postgresql');
  t.is(tag(push!, 'db.query.summary'), 'SELECT queen.log_push_v12');
  t.truthy(tag(push!, 'db.namespace'));
  t.is(tag(push!, 'server.address'), '127.0.0.1');
  const proc = k.processes[process!.processID]!;
  t.is(proc.serviceName, 'queen-ingress-jaeger-test');
  t.is(proc.tags.find((x) => x.key === 'service.version')?.value, '0.1.0');
  t.true(
    k.spans.some((s) => parent(s) === push!.spanID && tag(s, 'db.system.name') === 'postgresql'),
    'the pg instrumentation span is under the push',
  );

  const h = await traceOf(t, hTrace, (tr) => tr.spans.length >= 3);
  const server = h.spans.find((s) => s.operationName === 'POST /api/v1/push');
  const hFlush = h.spans.find((s) => s.operationName === 'queen.fusion.flush');
  const hPush = h.spans.find((s) => s.operationName === 'SELECT queen.log_push_v12');
  t.truthy(server && hFlush && hPush, `spans: ${h.spans.map((s) => s.operationName).join(', ')}`);
  t.is(parent(server!), hSpan, 'the server span continues the request traceparent');
  t.is(tag(server!, 'http.route'), '/api/v1/push');
  t.is(tag(server!, 'queen.verdict.queued'), 1);
  t.is(parent(hFlush!), server!.spanID);
  t.is(parent(hPush!), hFlush!.spanID);
});
