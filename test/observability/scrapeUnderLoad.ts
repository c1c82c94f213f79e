import { loadConfig } from '../../src/config.js';
import { Service } from '../../src/service.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { createTestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/leaks.js';
import { brokers, createTopic, kafkaClient, produce, uniqueName } from '../helpers/kafka.js';

/**
 * `make check-observability`: runs the service on a fresh database and topic,
 * produces records and pushes over HTTP, and prints a /metrics scrape taken
 * while the ingest is still running (for `promtool check metrics`). Every
 * metric family the service registers is present in that scrape.
 */
async function main(): Promise<void> {
  const db = await createTestDatabase('scrape');
  const kafka = kafkaClient();
  const topic = uniqueName('scrape');
  await createTopic(kafka, topic, 4);
  await produce(
    kafka,
    topic,
    Array.from({ length: 20_000 }, (_, i) => ({
      key: `k${i % 16}`,
      value: JSON.stringify({ i }),
      headers: { transactionId: `s-${i % 15_000}` },
    })),
  );
  const config = loadConfig({
    DATABASE_URL: db.url,
    KAFKA_BROKERS: brokers().join(','),
    QUEEN_INGRESS_TOPICS: topic,
    QUEEN_INGRESS_GROUP: uniqueName('g-scrape'),
    QUEEN_HTTP_PORT: '0',
    QUEEN_HTTP_HOST: '127.0.0.1',
    QUEEN_LAG_INTERVAL_MS: '200',
    QUEEN_INGRESS_COMMIT_EVERY: '500',
  });
  const service = new Service(config, silentLogger);
  await service.start();
  try {
    await fetch(`${service.http.url}/api/v1/push`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        items: [
          { queue: 'scrape', payload: 1, transactionId: 'x' },
          { queue: 'scrape', payload: 1, transactionId: 'x' },
        ],
      }),
    }).then((r) => r.arrayBuffer());
    // Under load: as soon as some, not all, records have a verdict.
    const verdicts = service.metrics.counter('queen_messages_total', '');
    await waitFor('first Kafka verdicts', () => verdicts.get({ source: 'kafka', status: 'queued' }) > 0, 60_000, 5);
    process.stdout.write(await fetch(`${service.http.url}/metrics`).then((r) => r.text()));
  } finally {
    await service.stop();
    await db.drop();
  }
}

await main();
