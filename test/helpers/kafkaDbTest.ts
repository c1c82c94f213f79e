import anyTest, { type TestFn } from 'ava';
import type { Kafka } from 'kafkajs';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from './db.js';
import { kafkaClient } from './kafka.js';
import { teardownAndCheckLeaks } from './leaks.js';

/** What a Kafka ingress test file shares: its own database, a pool on it, a Kafka client. */
export interface KafkaDbContext {
  db: TestDatabase;
  sql: pg.Pool;
  kafka: Kafka;
}

/**
 * ava's `test` for a Kafka ingress file: a fresh database (named after
 * `label`) before the first test, the pool ended and the database dropped
 * after the last, and the file fails if a component was left running.
 */
export function kafkaDbTest(label: string): TestFn<KafkaDbContext> {
  const test = anyTest as TestFn<KafkaDbContext>;
  test.before(async (t) => {
    const db = await createTestDatabase(label);
    t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 2 }), kafka: kafkaClient() };
  });
  teardownAndCheckLeaks(test, async (t) => {
    await t.context.sql?.end();
    await t.context.db?.drop();
  });
  return test;
}
