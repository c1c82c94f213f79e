import anyTest, { type TestFn } from 'ava';
import type { Kafka, Message } from 'kafkajs';
import { loadConfig } from '../../src/config.js';
import { DEPRECATED_LAG_METRIC, LagMonitor } from '../../src/ingress/lagMonitor.js';
import { Service } from '../../src/service.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { brokers, createTopic, kafkaClient, produce, uniqueName } from '../helpers/kafka.js';
import { teardownAndCheckLeaks, waitFor } from '../helpers/leaks.js';
import { startIngestStack } from '../helpers/stack.js';

interface Ctx {
  db: TestDatabase;
  kafka: Kafka;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  t.context = { db: await createTestDatabase('metrics'), kafka: kafkaClient() };
});
teardownAndCheckLeaks(test, async (t) => {
  await t.context.db?.drop();
});

/** One sample's value in a Prometheus text scrape, or undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

function records(from: number, n: number, tag: string): Message[] {
  return Array.from({ length: n }, (_, i) => ({
    key: `k${(from + i) % 4}`,
    value: JSON.stringify({ i: from + i }),
    headers: { transactionId: `${tag}-${from + i}` },
  }));
}

test('consumer lag rises while ingest is stopped and falls to zero after; verdicts, commit latency and consumer-up move', async (t) => {
  const { kafka } = t.context;
  const topic = uniqueName('lag');
  const group = uniqueName('g-lag');
  await createTopic(kafka, topic, 2);
  // The lag monitor reads the broker on its own, like the service's: it keeps seeing lag while no consumer runs.
  const watch = new MetricsRegistry();
  const lag = new LagMonitor({ brokers: brokers(), groupId: group, topics: [topic], intervalMs: 100 }, silentLogger, watch);
  await lag.start();
  try {
    await produce(kafka, topic, records(0, 30, 'lag'));
    await waitFor('lag of the 30 unread records', () => lag.total() === 30n, 30_000, 50);
    const scraped = await watch.render();
    const perPartition = [0, 1].map((p) => sample(scraped, `queen_kafka_consumer_lag_records{topic="${topic}",partition="${p}"}`) ?? NaN);
    t.is(perPartition[0]! + perPartition[1]!, 30, `per-partition lag in the scrape: ${perPartition.join(',')}`);
    t.true(
      perPartition.every((v) => v > 0),
      'both partitions hold unread records',
    );
    // The name before the unit suffix stays for one release, with the same series.
    t.deepEqual(
      [0, 1].map((p) => sample(scraped, `${DEPRECATED_LAG_METRIC}{topic="${topic}",partition="${p}"}`)),
      perPartition,
    );

    let stack = await startIngestStack({ databaseUrl: t.context.db.url, topic, group });
    try {
      await waitFor(
        'consumer up',
        () => stack.metrics.find('queen_kafka_consumer_up') && stack.metrics.gauge('queen_kafka_consumer_up', '').get() === 1,
        30_000,
        50,
      );
      await waitFor('lag back to zero', () => lag.total() === 0n, 60_000, 50);
      const verdicts = stack.metrics.counter('queen_messages_total', '');
      t.is(verdicts.get({ source: 'kafka', status: 'queued' }), 30);
      t.true(stack.metrics.histogram('queen_ingress_record_commit_seconds', '').count() > 0, 'record->commit latency observed');
      t.true(
        stack.metrics.histogram('queen_bundle_push_duration_seconds', '', { labelKeys: ['result'] }).count({ result: 'ok' }) > 0,
        'bundle push latency observed',
      );
    } finally {
      await stack.stop();
    }
    t.is(stack.metrics.gauge('queen_kafka_consumer_up', '').get(), 0, 'consumer down after stop');

    // Stopped: 20 more records (10 of them re-sends of earlier transactionIds) pile up as lag.
    await produce(kafka, topic, [...records(30, 10, 'lag'), ...records(0, 10, 'lag')]);
    await waitFor('lag rises to 20 while stopped', () => lag.total() === 20n, 30_000, 50);

    stack = await startIngestStack({ databaseUrl: t.context.db.url, topic, group });
    try {
      await waitFor('lag falls to zero after restart', () => lag.total() === 0n, 60_000, 50);
      const verdicts = stack.metrics.counter('queen_messages_total', '');
      t.is(verdicts.get({ source: 'kafka', status: 'queued' }), 10);
      t.is(verdicts.get({ source: 'kafka', status: 'duplicate' }), 10);
    } finally {
      await stack.stop();
    }
    t.true(watch.counter('queen_kafka_lag_reads_total', '').get('ok') > 3);
  } finally {
    await lag.stop();
  }
});

test('the service exposes build info, process metrics, PostgreSQL pool and health, HTTP durations and HTTP verdicts', async (t) => {
  const config = loadConfig({
    DATABASE_URL: t.context.db.url,
    QUEEN_HTTP_PORT: '0',
    QUEEN_HTTP_HOST: '127.0.0.1',
    QUEEN_BUILD_COMMIT: 'feedc0ffee12',
  });
  const service = new Service(config, silentLogger);
  await service.start();
  try {
    const base = service.http.url;
    const push = (items: unknown[]) =>
      fetch(`${base}/api/v1/push`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ items }),
      }).then(async (r) => ({ status: r.status, body: await r.json() }));
    const item = (tx: string) => ({ queue: 'm', partition: 'p', transactionId: tx, payload: { tx } });
    const first = await push([item('a'), item('b'), item('c')]);
    t.is(first.status, 201, JSON.stringify(first.body));
    await push([item('a'), item('d'), { queue: 'm', payload: 1, transactionID: 'misspelt' }]);

    const text = await fetch(`${base}/metrics`).then((r) => r.text());
    t.is(sample(text, 'queen_build_info{version="0.1.0",commit="feedc0ffee12"}'), 1);
    t.true((sample(text, 'process_cpu_seconds_total') ?? 0) > 0);
    t.not(sample(text, 'nodejs_eventloop_lag_seconds'), undefined);
    t.is(sample(text, 'queen_postgres_up'), 1);
    t.not(sample(text, 'queen_pg_pool_connections{state="idle"}'), undefined);
    t.is(sample(text, 'queen_pg_pool_waiting_requests'), 0);
    t.is(sample(text, 'queen_messages_total{source="http",status="queued"}'), 4);
    t.is(sample(text, 'queen_messages_total{source="http",status="duplicate"}'), 1);
    t.is(sample(text, 'queen_messages_total{source="http",status="failed"}'), 1);
    t.is(sample(text, 'queen_http_request_duration_seconds_count{method="POST",route="/api/v1/push",status_code="201"}'), 2);
    t.is(sample(text, 'queen_dedup_cache_budget_bytes'), 512 * 1024 * 1024);
    t.true((sample(text, 'queen_bundle_push_duration_seconds_count{result="ok"}') ?? 0) >= 2);
    t.true(text.includes('# TYPE queen_dedup_hydrations_total counter'));
  } finally {
    await service.stop();
  }
});

test('every queen_* metric the dashboard and the alert rules query is exposed by a running service', async (t) => {
  const { readFileSync } = await import('node:fs');
  const dashboard = JSON.parse(readFileSync('observability/grafana/queen-ingress.json', 'utf8')) as {
    panels: { targets?: { expr?: string }[] }[];
  };
  const exprs = [
    ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((x) => x.expr ?? '')),
    readFileSync('observability/prometheus/alerts.yml', 'utf8'),
  ];
  const used = new Set(exprs.flatMap((e) => [...e.matchAll(/\bqueen_[a-z0-9_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, ''))));
  t.true(used.size >= 8, `queries found: ${[...used].join(', ')}`);
  const topic = uniqueName('families');
  await createTopic(t.context.kafka, topic, 1);
  await produce(t.context.kafka, topic, records(0, 5, 'families'));
  const config = loadConfig({
    DATABASE_URL: t.context.db.url,
    KAFKA_BROKERS: brokers().join(','),
    QUEEN_INGRESS_TOPICS: topic,
    QUEEN_INGRESS_GROUP: uniqueName('g-families'),
    QUEEN_HTTP_PORT: '0',
    QUEEN_HTTP_HOST: '127.0.0.1',
    QUEEN_LAG_INTERVAL_MS: '200',
  });
  const service = new Service(config, silentLogger);
  await service.start();
  try {
    await waitFor(
      'the 5 records ingested',
      () => service.metrics.counter('queen_messages_total', '').get({ source: 'kafka', status: 'queued' }) === 5,
      60_000,
      20,
    );
    const text = await fetch(`${service.http.url}/metrics`).then((r) => r.text());
    const missing = [...used].filter((name) => !text.includes(`# TYPE ${name} `));
    t.deepEqual(missing, [], 'a dashboard panel or an alert on a metric the service does not expose would stay empty forever');
    t.true(
      (sample(text, 'queen_dedup_resident_bytes') ?? 0) > 0,
      'the cache holds the 5 ingested hashes: its resident bytes moved off zero',
    );
  } finally {
    await service.stop();
  }
});
