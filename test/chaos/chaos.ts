/**
 * `make chaos` (not part of `make test`): the whole service as OS processes
 * under faults, then a verifier.
 *
 * Workload: --records distinct events (default 1,000,000) over --keys keys,
 * plus 10 % re-sent transactionIds (same id, new Kafka offset), produced by an
 * idempotent kafkajs producer with each send's compression rotating through
 * none, gzip, lz4, zstd and snappy. Ingest: 2 service instances in one group
 * (a third comes and goes for rebalances). Faults, spread over the ingest by
 * progress: 10 x kill -9 of an instance (replaced at once), 2 PostgreSQL
 * restarts, 5 rebalances (a third instance joins or leaves), the Kafka broker
 * SIGSTOPped for 20 s. Verifier: every distinct transactionId stored exactly
 * once, per-key order, and at every sample (after each fault and at the end)
 * each partition's committed offset is not ahead of PostgreSQL: every record
 * below it is in the log. Report: bench/results/chaos/chaos-<time>.json.
 *
 * Needs DATABASE_URL and KAFKA_BROKERS from scripts/with-deps.sh, whose local
 * broker and PostgreSQL it pauses and restarts (pid/script paths under .local).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import kafkajs, { type Message } from 'kafkajs';
import pg from 'pg';
import { registerCodecs } from '../../src/ingress/codecs.js';
import { migrate } from '../../src/engine/migrate.js';
import { brokers, committed, createTopic, endOffsets, kafkaClient, storedFrames, uniqueName } from '../helpers/kafka.js';
import { waitFor } from '../helpers/leaks.js';
import { ServiceProcess } from '../helpers/serviceProcess.js';

const { CompressionTypes } = kafkajs;
const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const PG_SCRIPT = `${REPO}deploy/local/postgres.sh`;
const KAFKA_PID = `${process.env.QUEEN_LOCAL_DIR ?? `${REPO}.local`}/kafka/run/kafka.pid`;

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

const RECORDS = arg('records', 1_000_000);
const KEYS = arg('keys', 64);
const PARTITIONS = arg('partitions', 12);
const KILLS = arg('kills', 10);
const PG_RESTARTS = arg('pg-restarts', 2);
const REBALANCES = arg('rebalances', 5);
const PAUSE_S = arg('broker-pause-s', 20);

type Fault = 'kill9' | 'pgRestart' | 'rebalance' | 'brokerPause';

const log = (msg: string, extra: Record<string, unknown> = {}) =>
  process.stdout.write(`${JSON.stringify({ t: new Date().toISOString(), msg, ...extra })}\n`);

async function main(): Promise<void> {
  registerCodecs();
  const databaseUrl = process.env.DATABASE_URL!;
  if (!databaseUrl || !process.env.KAFKA_BROKERS)
    throw new Error('run through `make chaos` (scripts/with-deps.sh sets DATABASE_URL and KAFKA_BROKERS)');
  const sql = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  // Idle connections die with each PostgreSQL restart; the pool replaces them.
  sql.on('error', () => undefined);
  await migrate(sql);
  const kafka = kafkaClient();
  const topic = uniqueName('chaos');
  const group = uniqueName('g-chaos');
  await createTopic(kafka, topic, PARTITIONS);
  const started = Date.now();

  // ---- instances ----
  const env = {
    DATABASE_URL: databaseUrl,
    KAFKA_BROKERS: brokers().join(','),
    QUEEN_INGRESS_TOPICS: topic,
    QUEEN_INGRESS_GROUP: group,
    QUEEN_KAFKA_SESSION_TIMEOUT_MS: '10000',
    QUEEN_PG_POOL_SIZE: '6',
    QUEEN_LOG_LEVEL: 'warn',
  };
  const instances: ServiceProcess[] = [];
  const all: ServiceProcess[] = [];
  // An instance may end only by a fault we inject; any other exit is a finding:
  // it is logged with its last words, counted in the report (which then fails),
  // and replaced, as an orchestrator would.
  const meantToEnd = new Set<ServiceProcess>();
  const unexpectedExits: {
    pid: number | undefined;
    code: number | null;
    signal: string | null;
    at: string;
    stderr: string;
    lastLines: unknown[];
  }[] = [];
  let finished = false;
  const spawnOne = (): ServiceProcess => {
    const p = new ServiceProcess({ ...env, QUEEN_LOG_LEVEL: 'info' });
    instances.push(p);
    all.push(p);
    void p.exited.then(({ code, signal }) => {
      if (meantToEnd.has(p) || finished) return;
      const exit = { pid: p.child.pid, code, signal, at: new Date().toISOString(), stderr: p.stderrTail(), lastLines: p.lines.slice(-8) };
      unexpectedExits.push(exit);
      log('instance exited unexpectedly; replacing it', exit);
      const i = instances.indexOf(p);
      if (i >= 0) instances.splice(i, 1);
      spawnOne();
    });
    return p;
  };
  const end = (p: ServiceProcess, signal: NodeJS.Signals) => {
    meantToEnd.add(p);
    p.kill(signal);
  };
  await Promise.all([spawnOne(), spawnOne()].map((p) => p.ready('consuming', 180_000)));

  // ---- faults, spread by progress ----
  const faults: Fault[] = [
    ...Array<Fault>(KILLS).fill('kill9'),
    ...Array<Fault>(PG_RESTARTS).fill('pgRestart'),
    ...Array<Fault>(REBALANCES).fill('rebalance'),
    'brokerPause',
  ];
  for (let i = faults.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [faults[i], faults[j]] = [faults[j]!, faults[i]!];
  }
  // The stream is cut into faults+1 slices; slice j+2 is produced only once fault j fired, so every
  // fault lands mid-stream (about 1.5 slices produced but not yet stored), however fast ingest is.
  const SLICE = Math.ceil(RECORDS / (faults.length + 1));
  const fired: (() => void)[] = [];
  const gates = faults.map(() => new Promise<void>((resolve) => fired.push(resolve)));

  // ---- producer ----
  // offsetTxn[p][offset] = index into txns (or -1 when unknown: a retried send).
  const txns: string[] = [];
  const offsetTxn: number[][] = Array.from({ length: PARTITIONS }, () => []);
  const seq = new Array<number>(KEYS).fill(0);
  const codecs = [CompressionTypes.None, CompressionTypes.GZIP, CompressionTypes.LZ4, CompressionTypes.ZSTD, CompressionTypes.Snappy];
  let produced = 0;
  let resent = 0;
  const producing = (async () => {
    const producer = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      retry: { retries: 30, maxRetryTime: 10_000 },
    });
    await producer.connect();
    const CHUNK = 2000;
    let sends = 0;
    const recent: { k: number; s: number; id: number }[] = [];
    for (let i = 0; i < RECORDS;) {
      const slice = Math.floor(i / SLICE);
      if (slice >= 2 && slice - 2 < gates.length) await gates[slice - 2];
      const batch: { m: Message; p: number; id: number }[] = [];
      for (let j = 0; j < CHUNK && i < RECORDS && Math.floor(i / SLICE) === slice; j++) {
        let k: number;
        let s: number;
        let id: number;
        if (recent.length > 100 && Math.random() < 0.1 / 1.1) {
          ({ k, s, id } = recent[Math.floor(Math.random() * recent.length)]!);
          resent++;
        } else {
          k = i % KEYS;
          s = seq[k]!++;
          id = txns.push(`c-${k}-${s}`) - 1;
          recent.push({ k, s, id });
          if (recent.length > 5000) recent.shift();
          i++;
        }
        const p = k % PARTITIONS;
        batch.push({ m: { key: `key-${k}`, partition: p, value: JSON.stringify({ k, s }), headers: { transactionId: txns[id]! } }, p, id });
      }
      const compression = codecs[sends++ % codecs.length]!;
      for (let attempt = 0; ; attempt++) {
        try {
          const meta = await producer.send({ topic, acks: -1, compression, messages: batch.map((b) => b.m) });
          const next = new Map(meta.map((r) => [r.partition, Number(r.baseOffset)]));
          for (const b of batch) {
            const o = next.get(b.p)!;
            offsetTxn[b.p]![o] = b.id;
            next.set(b.p, o + 1);
          }
          break;
        } catch (err) {
          // A send that failed may or may not have been appended: its offsets stay unknown (-1), and the
          // same transactionIds are sent again; the log must still hold each once.
          log('send failed; resending', { err: (err as Error).message, attempt });
          if (attempt > 20) throw err;
        }
      }
      produced += batch.length;
    }
    await producer.disconnect();
  })();

  const samples: { after: string; committed: number; unknownOffsets: number }[] = [];
  const done: { fault: Fault; at: string; storedBefore: number; producedBefore: number }[] = [];
  for (let f = 0; f < faults.length; f++) {
    const threshold = Math.floor((f + 0.5) * SLICE);
    await waitFor(`stored >= ${threshold}`, async () => (await storedCount(sql, topic)) >= threshold, 3_600_000, 500);
    const fault = faults[f]!;
    const storedBefore = await storedCount(sql, topic);
    log('fault', { fault, n: f + 1, of: faults.length, storedBefore });
    done.push({ fault, at: new Date().toISOString(), storedBefore, producedBefore: produced });
    if (fault === 'kill9') {
      const victim = instances.splice(Math.floor(Math.random() * instances.length), 1)[0]!;
      end(victim, 'SIGKILL');
      await victim.exited;
      await spawnOne().ready('consuming', 180_000);
    } else if (fault === 'pgRestart') {
      await run('bash', [PG_SCRIPT, 'restart'], { env: process.env });
    } else if (fault === 'rebalance') {
      if (instances.length >= 3) {
        const leaving = instances.pop()!;
        end(leaving, 'SIGTERM');
        await leaving.exited;
      } else await spawnOne().ready('consuming', 180_000);
    } else {
      const pid = Number(readFileSync(KAFKA_PID, 'utf8').trim());
      process.kill(pid, 'SIGSTOP');
      await new Promise((r) => setTimeout(r, PAUSE_S * 1000));
      process.kill(pid, 'SIGCONT');
    }
    fired[f]!();
    samples.push({ after: fault, ...(await retried(() => checkCommitsBehindLog(kafka, sql, group, topic, offsetTxn, txns))) });
  }
  await producing;
  log('all produced; waiting for the group to catch up', { produced, resent });
  await waitFor(
    'caught up',
    async () => {
      const [c, e] = await Promise.all([committed(kafka, group, topic), endOffsets(kafka, topic)]);
      for (const [p, high] of e) if (high > 0 && (c.get(p) ?? -1) < high) return false;
      return true;
    },
    3_600_000,
    1000,
  );
  samples.push({ after: 'end', ...(await retried(() => checkCommitsBehindLog(kafka, sql, group, topic, offsetTxn, txns))) });

  // ---- verify ----
  const frames = await storedFrames(sql, topic);
  const ids = new Set(frames.map((f) => f.transactionId));
  const perKey = new Map<string, number[]>();
  for (const f of frames) {
    const { s } = JSON.parse(f.payload.toString()) as { s: number };
    if (!perKey.has(f.partition)) perKey.set(f.partition, []);
    perKey.get(f.partition)!.push(s);
  }
  let orderViolations = 0;
  for (const seqs of perKey.values()) seqs.forEach((s, i) => (orderViolations += s === i ? 0 : 1));
  const missing = txns.filter((t) => !ids.has(t)).length;
  const report = {
    when: new Date().toISOString(),
    durationSeconds: Math.round((Date.now() - started) / 1000),
    params: {
      records: RECORDS,
      keys: KEYS,
      partitions: PARTITIONS,
      kills: KILLS,
      pgRestarts: PG_RESTARTS,
      rebalances: REBALANCES,
      brokerPauseSeconds: PAUSE_S,
    },
    produced: { kafkaRecords: produced, distinct: txns.length, resent, compression: 'per send, rotating none/gzip/lz4/zstd/snappy' },
    faults: done,
    stored: frames.length,
    checks: {
      exactlyOncePerKey: frames.length === txns.length && ids.size === txns.length && missing === 0,
      storedTwice: frames.length - ids.size,
      missing,
      orderPerKey: orderViolations === 0,
      orderViolations,
      commitsNeverAheadOfLog: samples.every((s) => s.committed >= 0),
      noUnexpectedExits: unexpectedExits.length === 0,
      samples,
    },
    unexpectedExits,
    instances: all.map((p) => ({
      pid: p.child.pid,
      crashesLogged: p.lines.filter((l) => l.msg === 'Kafka consumer crashed; restarting').length,
    })),
  };
  const dir = `${REPO}bench/results/chaos`;
  mkdirSync(dir, { recursive: true });
  const file = `${dir}/chaos-${report.when.replace(/[:.]/g, '-')}.json`;
  writeFileSync(file, JSON.stringify(report, null, 2));
  log('report written', { file, checks: { ...report.checks, samples: undefined } });
  finished = true;
  await Promise.all(
    instances.map(async (p) => {
      p.kill('SIGTERM');
      await p.exited;
    }),
  );
  await Promise.all(all.map((p) => p.ensureDead()));
  await sql.end();
  const ok =
    report.checks.exactlyOncePerKey && report.checks.orderPerKey && report.checks.commitsNeverAheadOfLog && report.checks.noUnexpectedExits;
  process.exit(ok ? 0 : 1);
}

/** Every record below each committed offset is in the log. Throws on a violation (recorded as -1). */
async function checkCommitsBehindLog(
  kafka: ReturnType<typeof kafkaClient>,
  sql: pg.Pool,
  group: string,
  topic: string,
  offsetTxn: number[][],
  txns: string[],
): Promise<{ committed: number; unknownOffsets: number }> {
  // Committed first, then the log: the log only grows, so this order can only hide a violation's absence, never invent one.
  const c = await committed(kafka, group, topic);
  const stored = new Set((await storedFrames(sql, topic)).map((f) => f.transactionId));
  let total = 0;
  let unknown = 0;
  for (const [p, off] of c) {
    for (let o = 0; o < off; o++) {
      const id = offsetTxn[p]?.[o];
      if (id === undefined) {
        unknown++;
        continue;
      }
      if (!stored.has(txns[id]!)) {
        log('VIOLATION: committed offset ahead of the log', { partition: p, offset: o, committed: off });
        return { committed: -1, unknownOffsets: unknown };
      }
    }
    total += Math.max(0, off);
  }
  return { committed: total, unknownOffsets: unknown };
}

/** Retries what fails while PostgreSQL or the broker restarts (a check, never a verdict). */
async function retried<T>(op: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await op();
    } catch (err) {
      if (attempt >= 60) throw err;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

async function storedCount(sql: pg.Pool, queue: string): Promise<number> {
  try {
    const r = await sql.query(
      `SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0)::bigint AS n FROM queen.log_txns t
       JOIN queen.log_partitions lp ON lp.id = t.partition_id JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1`,
      [queue],
    );
    return Number(r.rows[0].n);
  } catch {
    return -1; // PostgreSQL restarting
  }
}

main().catch((err: unknown) => {
  log('chaos run failed', { err: (err as Error).stack });
  process.exit(1);
});
