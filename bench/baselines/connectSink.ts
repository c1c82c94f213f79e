import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { freePort } from '../lib/freePort.js';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Admin } from 'kafkajs';
import { sleep } from '../lib/stats.js';

/**
 * The baseline a Kafka user would most likely pick instead of queen: Kafka
 * Connect (standalone worker, connect-runtime 4.3.1) running Debezium's JDBC
 * sink connector (3.6.0.Final) in upsert mode keyed on (key, transactionId),
 * writing into a table of the same PostgreSQL the service uses. Jars come
 * from Maven Central through deploy/local/connect/connect.sh (cached under
 * .local/connect).
 *
 * Each run is its own JVM with worker and connector properties written to a
 * fresh temp dir (offsets file there too, REST listener on loopback only),
 * and its own connector name, hence its own consumer group
 * `connect-<name>`, which starts from the earliest offset (a sink's default).
 * Values are JSON in the schema envelope (JsonConverter, schemas.enable=true):
 * the sink needs a schema to map fields to columns.
 */

const HERE = dirname(fileURLToPath(import.meta.url));
/** dist/bench/baselines -> repository root. */
const REPO_ROOT = resolve(HERE, '..', '..', '..');
const CONNECT_SH = join(REPO_ROOT, 'deploy', 'local', 'connect', 'connect.sh');

export interface ConnectHome {
  libs: string;
  plugins: string;
}

/** Fetches the jars once (idempotent and offline when cached) and returns their folders. */
export async function fetchConnect(): Promise<ConnectHome> {
  const out = await new Promise<string>((ok, fail) =>
    execFile('bash', [CONNECT_SH, 'fetch'], { maxBuffer: 1 << 20 }, (err, stdout, stderr) =>
      err ? fail(new Error(`connect.sh fetch failed: ${stderr || err.message}`)) : ok(stdout),
    ),
  );
  const get = (k: string): string => {
    const line = out.split('\n').find((l) => l.startsWith(`${k}=`));
    if (!line) throw new Error(`connect.sh fetch printed no ${k}`);
    return line.slice(k.length + 1);
  };
  return { libs: get('CONNECT_LIBS'), plugins: get('CONNECT_PLUGINS') };
}

/**
 * Two configurations of the same sink (issue 39):
 *
 * - `tuned`: as its users run it when throughput matters, the settings
 *   Debezium's and pgjdbc's documentation point at: `batch.size=5000`
 *   (records per statement batch; default 500), the sink consumers'
 *   `max.poll.records=5000` (Kafka's default 500; Debezium's docs: a poll
 *   smaller than `batch.size` caps the batch), `reWriteBatchedInserts=true` on
 *   the JDBC URL (pgjdbc sends a batch as multi-row INSERTs instead of one
 *   statement per row), and one task per partition up to the cores, since a
 *   task is one consumer thread: min(topic partitions, cores). Plus
 *   `use.reduction.buffer=true`, which that rewrite makes necessary: a
 *   multi-row upsert holding one key twice (a re-sent id inside one batch)
 *   fails with SQLSTATE 21000, "ON CONFLICT DO UPDATE command cannot affect
 *   row a second time", and the task stops (seen here with 20k records, 10 %
 *   re-sent); Debezium's reduction buffer keeps one record per primary key in
 *   a batch, its documented remedy.
 * - `default`: the configuration this baseline ran with before (Debezium's and
 *   Kafka's defaults, `tasks.max=2`), kept as an info row so the two can be
 *   compared and older results read against it.
 *
 * The consumer setting goes into the worker properties as
 * `consumer.max.poll.records`: a standalone worker applies its `consumer.*`
 * keys to every sink task's consumer (a per-connector
 * `consumer.override.*` would need the worker's client override policy to
 * allow it; one connector per worker makes the two equivalent here).
 */
export type ConnectProfile = 'tuned' | 'default';

export interface ConnectSettings {
  profile: ConnectProfile;
  tasksMax: number;
  insertMode: 'upsert';
  primaryKeyMode: 'record_value';
  primaryKeyFields: string;
  /** Debezium's `batch.size`; undefined: its default (500). */
  batchSize: number | undefined;
  /** The sink consumers' `max.poll.records`; undefined: Kafka's default (500). */
  maxPollRecords: number | undefined;
  /** pgjdbc's `reWriteBatchedInserts` on the connection URL (its default: false). */
  reWriteBatchedInserts: boolean;
  /** Debezium's `use.reduction.buffer` (its default: false). */
  useReductionBuffer: boolean;
  /**
   * How often the worker commits the sink's consumer offsets (default 60 s).
   * Throughput is read from those commits, so a long interval would charge the
   * sink up to a minute of idle time; 500 ms bounds that error well below 1 s.
   * The same in both profiles: it is how this benchmark reads progress.
   */
  offsetFlushIntervalMs: number;
  heapOpts: readonly string[];
}

const COMMON = {
  insertMode: 'upsert',
  primaryKeyMode: 'record_value',
  primaryKeyFields: 'key,transactionId',
  offsetFlushIntervalMs: 500,
  heapOpts: ['-Xms256m', '-Xmx1g'],
} as const;

/** The settings of one profile for a topic of `topicPartitions` partitions on a machine of `cores` cores. */
export function connectSettings(profile: ConnectProfile, topicPartitions: number, cores: number = availableParallelism()): ConnectSettings {
  if (profile === 'default') {
    return {
      profile,
      ...COMMON,
      tasksMax: 2,
      batchSize: undefined,
      maxPollRecords: undefined,
      reWriteBatchedInserts: false,
      useReductionBuffer: false,
    };
  }
  return {
    profile,
    ...COMMON,
    tasksMax: Math.max(1, Math.min(topicPartitions, cores)),
    batchSize: 5000,
    maxPollRecords: 5000,
    reWriteBatchedInserts: true,
    useReductionBuffer: true,
  };
}

function jdbcOf(databaseUrl: string, reWriteBatchedInserts: boolean): { url: string; user: string; password: string } {
  const u = new URL(databaseUrl);
  return {
    url: `jdbc:postgresql://${u.hostname}:${u.port || '5432'}${u.pathname}${reWriteBatchedInserts ? '?reWriteBatchedInserts=true' : ''}`,
    user: decodeURIComponent(u.username || 'postgres'),
    password: decodeURIComponent(u.password),
  };
}

const LOG4J2 = `status = warn
name = queen-bench-connect
appender.out.type = Console
appender.out.name = STDOUT
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = STDOUT
logger.connect.name = org.apache.kafka.connect.runtime.WorkerSinkTask
logger.connect.level = WARN
logger.configs.name = org.apache.kafka.common.config.AbstractConfig
logger.configs.level = INFO
logger.sinkconfig.name = io.debezium.connector.jdbc.JdbcSinkConnectorTask
logger.sinkconfig.level = INFO
`;

/*
 * Two INFO loggers above: the clients' config dumps (each sink task's
 * "ConsumerConfig values", with max.poll.records) and the Debezium task's
 * "Starting JdbcSinkConnectorConfig" dump (each setting given, once per
 * task). A few hundred lines per start; checkApplied() reads them.
 */

/**
 * Workers still running. bench/run.ts exits the process on SIGINT/SIGTERM;
 * a worker JVM must not outlive it (it would keep consuming and writing).
 */
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

export interface RunningConnect {
  /** The sink connector's consumer group (`connect-<connector name>`). */
  group: string;
  child: ChildProcess;
  /** The worker's log so far (for error messages). */
  log(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Starts ConnectStandalone with a Debezium JDBC sink from `topic` into
 * `table` (which the caller creates, with PRIMARY KEY (key, transactionid)).
 * Resolves once the JVM is launched; use waitJoined() for the moment its
 * tasks' consumers form the group.
 */
export async function startConnectSink(opts: {
  home: ConnectHome;
  brokers: string[];
  databaseUrl: string;
  topic: string;
  table: string;
  connector: string;
  settings: ConnectSettings;
}): Promise<RunningConnect> {
  if (!/^[a-z_][a-z0-9_]*$/.test(opts.table)) throw new Error(`bad Connect sink table name ${opts.table}`);
  const cfg = opts.settings;
  const dir = await mkdtemp(join(tmpdir(), 'queen-bench-connect-'));
  const jdbc = jdbcOf(opts.databaseUrl, cfg.reWriteBatchedInserts);
  const port = await freePort();
  const worker = [
    `bootstrap.servers=${opts.brokers.join(',')}`,
    'key.converter=org.apache.kafka.connect.storage.StringConverter',
    'value.converter=org.apache.kafka.connect.json.JsonConverter',
    'value.converter.schemas.enable=true',
    `offset.storage.file.filename=${join(dir, 'connect.offsets')}`,
    `offset.flush.interval.ms=${cfg.offsetFlushIntervalMs}`,
    `plugin.path=${opts.home.plugins}`,
    // Every plugin here ships ServiceLoader manifests: skip the reflective scan (a faster start).
    'plugin.discovery=service_load',
    // Loopback only; a free port so parallel runs never collide.
    `listeners=http://127.0.0.1:${port}`,
    'rest.advertised.host.name=127.0.0.1',
    'consumer.auto.offset.reset=earliest',
    ...(cfg.maxPollRecords === undefined ? [] : [`consumer.max.poll.records=${cfg.maxPollRecords}`]),
  ];
  const sink = [
    `name=${opts.connector}`,
    'connector.class=io.debezium.connector.jdbc.JdbcSinkConnector',
    `tasks.max=${cfg.tasksMax}`,
    `topics=${opts.topic}`,
    `connection.url=${jdbc.url}`,
    `connection.username=${jdbc.user}`,
    `connection.password=${jdbc.password}`,
    `insert.mode=${cfg.insertMode}`,
    'delete.enabled=false',
    `primary.key.mode=${cfg.primaryKeyMode}`,
    `primary.key.fields=${cfg.primaryKeyFields}`,
    ...(cfg.batchSize === undefined ? [] : [`batch.size=${cfg.batchSize}`]),
    ...(cfg.useReductionBuffer ? ['use.reduction.buffer=true'] : []),
    'schema.evolution=basic',
    `collection.name.format=${opts.table}`,
  ];
  await writeFile(join(dir, 'worker.properties'), worker.join('\n') + '\n');
  await writeFile(join(dir, 'sink.properties'), sink.join('\n') + '\n', { mode: 0o600 });
  await writeFile(join(dir, 'log4j2.properties'), LOG4J2);
  const logFile = join(dir, 'connect.log');
  const fd = openSync(logFile, 'a');
  const child = spawn(
    'java',
    [
      ...cfg.heapOpts,
      '-XX:+UseG1GC',
      '-Djava.awt.headless=true',
      `-Dlog4j2.configurationFile=${join(dir, 'log4j2.properties')}`,
      '-cp',
      `${opts.home.libs}/*`,
      'org.apache.kafka.connect.cli.ConnectStandalone',
      join(dir, 'worker.properties'),
      join(dir, 'sink.properties'),
    ],
    { stdio: ['ignore', fd, fd] },
  );
  closeSync(fd);
  live.add(child);
  let exited = false;
  const exit = once(child, 'exit').then(() => {
    exited = true;
    live.delete(child);
  });
  const log = async (): Promise<string> => readFile(logFile, 'utf8').catch(() => '');
  return {
    group: `connect-${opts.connector}`,
    child,
    log,
    async stop() {
      if (!exited) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 20_000);
        await exit;
        clearTimeout(t);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Fails unless the worker's log shows every task running with `cfg`: each
 * task's consumer with its max.poll.records (Kafka's 500 when unset), and
 * each Debezium task with the batch size, reduction buffer and JDBC URL given.
 * A setting Connect or Debezium silently ignored (a misspelt key, a prefix
 * the worker does not pass on) would otherwise measure another sink than the
 * one named. Call after waitJoined(): tasks log their configs before their
 * consumers join the group.
 */
export async function checkApplied(c: RunningConnect, cfg: ConnectSettings): Promise<void> {
  const log = await c.log();
  const count = (re: RegExp): number => log.match(new RegExp(re.source, 'gm'))?.length ?? 0;
  const want: [string, RegExp][] = [
    ['tasks started', /Starting JdbcSinkConnectorConfig with configuration/],
    [`max.poll.records = ${cfg.maxPollRecords ?? 500}`, new RegExp(`^\\s+max\\.poll\\.records = ${cfg.maxPollRecords ?? 500}$`)],
  ];
  if (cfg.batchSize !== undefined) want.push([`batch.size = ${cfg.batchSize}`, new RegExp(` batch\\.size = ${cfg.batchSize} \\(`)]);
  if (cfg.useReductionBuffer) want.push(['use.reduction.buffer = true', / use\.reduction\.buffer = true \(/]);
  if (cfg.reWriteBatchedInserts) want.push(['reWriteBatchedInserts=true', / connection\.url = \S+\?reWriteBatchedInserts=true \(/]);
  const short = want.filter(([, re]) => count(re) < cfg.tasksMax).map(([what, re]) => `${what} (${count(re)} of ${cfg.tasksMax} tasks)`);
  if (short.length > 0) {
    throw new Error(
      `Kafka Connect (${cfg.profile}) is not running as configured: ${short.join(', ')}; log tail:\n${log.split('\n').slice(-30).join('\n')}`,
    );
  }
}

/**
 * Waits until the sink's consumer group is Stable with `members` members
 * (both tasks joined); fails early with the worker's log if the JVM died.
 */
export async function waitJoined(admin: Admin, c: RunningConnect, members: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (c.child.exitCode !== null || c.child.signalCode !== null) {
      throw new Error(
        `Kafka Connect exited (${c.child.exitCode ?? c.child.signalCode}) before joining; log tail:\n${(await c.log()).split('\n').slice(-30).join('\n')}`,
      );
    }
    const { groups } = await admin.describeGroups([c.group]);
    const g = groups[0];
    if (g?.state === 'Stable' && g.members.length >= members) return;
    if (performance.now() > deadline)
      throw new Error(
        `Kafka Connect group ${c.group} not joined within ${timeoutMs} ms (state ${g?.state}, ${g?.members.length ?? 0} members); log tail:\n${(await c.log()).split('\n').slice(-30).join('\n')}`,
      );
    await sleep(50);
  }
}
