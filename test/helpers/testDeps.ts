#!/usr/bin/env node
/**
 * The test dependencies switch, called by scripts/with-deps.sh for
 * `make test` when neither DATABASE_URL nor KAFKA_BROKERS is set:
 *
 *   node dist/test/helpers/testDeps.js choose
 *       prints "docker" or "local" (and why, on stderr)
 *   node dist/test/helpers/testDeps.js containers [--kafka] -- CMD ARGS...
 *       starts PostgreSQL 15 (and Kafka in KRaft mode) with testcontainers,
 *       runs CMD with DATABASE_URL (and KAFKA_BROKERS) set, stops them after
 *
 * The local path (deploy/local scripts) stays the default wherever no engine
 * answers, CI included. Images are the same versions docker-compose.yml uses.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { chooseDeps } from './docker.js';

const POSTGRES_IMAGE = 'postgres:15.15-bookworm';
const KAFKA_IMAGE = 'apache/kafka:4.3.1';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function containers(withKafka: boolean, command: string[]): Promise<number> {
  // Loaded only here: without an engine this module is never imported.
  const { GenericContainer, Wait } = await import('testcontainers');
  const started: { stop(): Promise<unknown> }[] = [];
  try {
    const pg = await new GenericContainer(POSTGRES_IMAGE)
      .withEnvironment({ POSTGRES_USER: 'queen', POSTGRES_PASSWORD: 'queen', POSTGRES_DB: 'queen' })
      .withCommand([
        'postgres',
        '-c',
        'fsync=off',
        '-c',
        'synchronous_commit=off',
        '-c',
        'full_page_writes=off',
        '-c',
        'max_connections=400',
      ])
      .withExposedPorts(5432)
      .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
      .start();
    started.push(pg);
    const env: Record<string, string> = { DATABASE_URL: `postgres://queen:queen@${pg.getHost()}:${pg.getMappedPort(5432)}/queen` };
    if (withKafka) {
      // The broker must advertise the port clients reach it on, so the host port is chosen first.
      const port = await freePort();
      const kafka = await new GenericContainer(KAFKA_IMAGE)
        .withEnvironment({
          KAFKA_NODE_ID: '1',
          KAFKA_PROCESS_ROLES: 'broker,controller',
          KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
          KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
          KAFKA_LISTENERS: 'PLAINTEXT://:9092,CONTROLLER://:9093',
          KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://127.0.0.1:${port}`,
          KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
          KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
          KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
          KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
          KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
        })
        .withExposedPorts({ container: 9092, host: port })
        .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
        .start();
      started.push(kafka);
      env.KAFKA_BROKERS = `127.0.0.1:${port}`;
    }
    process.stderr.write(
      `with-deps: testcontainers up (${Object.entries(env)
        .map(([k, v]) => `${k}=${v.replace(/:[^:@/]+@/, ':***@')}`)
        .join(' ')})\n`,
    );
    return await new Promise<number>((resolve) => {
      const child = spawn(command[0]!, command.slice(1), {
        stdio: 'inherit',
        env: { ...process.env, ...env, QUEEN_TEST_DEPS_MODE: 'docker' },
      });
      for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => child.kill(sig));
      child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 + 15 : 1)));
    });
  } finally {
    for (const c of started.reverse()) await c.stop().catch(() => undefined);
  }
}

async function main(argv: string[]): Promise<number> {
  const [what, ...rest] = argv;
  if (what === 'choose') {
    const { mode, why } = await chooseDeps(process.env);
    process.stderr.write(
      `with-deps: ${mode === 'docker' ? 'PostgreSQL and Kafka through testcontainers' : 'local PostgreSQL and Kafka'}: ${why}\n`,
    );
    process.stdout.write(`${mode}\n`);
    return 0;
  }
  if (what === 'containers') {
    const sep = rest.indexOf('--');
    if (sep < 0 || sep === rest.length - 1) throw new Error('usage: testDeps.js containers [--kafka] -- CMD ARGS...');
    return containers(rest.slice(0, sep).includes('--kafka'), rest.slice(sep + 1));
  }
  throw new Error('usage: testDeps.js choose | containers [--kafka] -- CMD ARGS...');
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    process.stderr.write(`with-deps: ${(err as Error).message}\n`);
    process.exitCode = 2;
  },
);
