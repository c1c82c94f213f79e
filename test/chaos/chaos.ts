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
 * --poison (every --poison-every records, default 2,000) mixes in records
 * that must be dead-lettered, in turn: a tombstone with null header values, a
 * 2 MiB value sent gzip-compressed (over QUEEN_MAX_PAYLOAD_BYTES), a
 * Confluent-framed Avro value with no registry configured, and a JSON value
 * without a transactionId; and 1 % of the good records carry a null header
 * value. Then also verified: every poison record is in the dead-letter topic
 * (at least once: a dead-letter write is at-least-once under kill -9) and
 * none is in the log, the good records' null headers are kept as null, and
 * the group never stalls: when committed offsets stop moving for 120 s, each
 * instance's /health/ready and queen_ingress_halted_partitions are read and
 * the stall is reported as visible (readiness names a halted partition) or
 * silent; either fails the run.
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
import { decodeOrigin } from '../../src/engine/frames.js';
import { registerCodecs } from '../../src/ingress/codecs.js';
import { allowNullHeaderValues } from '../../src/ingress/nullHeaderValues.js';
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
const POISON = process.argv.includes('--poison');
const POISON_EVERY = arg('poison-every', 2000);
const POISON_KINDS = ['tombstone-null-headers', 'oversized-gzip', 'framed-avro-no-registry', 'missing-id'] as const;
type PoisonKind = (typeof POISON_KINDS)[number];
/** Marks an offset of offsetTxn that holds a poison record (never stored). */
const POISON_OFFSET = -2;
const POISON_HEADER = 'chaos-poison';
const NULL_HEADER = 'chaos-null';

/** The i-th poison record: a marker header names it, so the verifier finds it in the dead-letter topic. */
function poisonRecord(i: number, partition: number): { m: Message; kind: PoisonKind; marker: string } {
  const kind = POISON_KINDS[i % POISON_KINDS.length]!;
  const marker = `p-${i}`;
  const headers: Record<string, string | null> = { [POISON_HEADER]: marker };
  let value: Buffer | null;
  if (kind === 'tombstone-null-headers') {
    value = null;
    headers.traceparent = null;
    headers[NULL_HEADER] = null;
  } else if (kind === 'oversized-gzip') {
    // Compresses to a few KB, so the broker takes it; 2 MiB once decompressed, over the service's 1 MiB limit.
    value = Buffer.from(JSON.stringify({ poison: marker, pad: 'x'.repeat(2 * 1024 * 1024) }));
    headers.transactionId = `poison-${marker}`;
  } else if (kind === 'framed-avro-no-registry') {
    // Magic byte 0, schema id 7, then bytes that are not JSON: only a registry could read it.
    value = Buffer.concat([Buffer.from([0, 0, 0, 0, 7]), Buffer.from([0x02, 0x0c, 0x70, 0x6f, 0x69, 0x73, 0x6f, 0x6e])]);
    headers.transactionId = `poison-${marker}`;
  } else {
    value = Buffer.from(JSON.stringify({ poison: marker }));
  }
  return { m: { key: `poison-${i}`, partition, value, headers: headers as Message['headers'] }, kind, marker };
}

type Fault = 'kill9' | 'pgRestart' | 'rebalance' | 'brokerPause';

const log = (msg: string, extra: Record<string, unknown> = {}) =>
  process.stdout.write(`${JSON.stringify({ t: new Date().toISOString(), msg, ...extra })}\n`);

async function main(): Promise<void> {
  registerCodecs();
  // The producer writes Kafka's null header values (kafkajs 2.2.4 cannot by itself; nullHeaderValues.ts).
  allowNullHeaderValues();
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
  if (POISON) await createTopic(kafka, `${topic}.dlq`, 1);
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
  const poisonSent: { marker: string; kind: PoisonKind }[] = [];
  const nullHeaderIds = new Set<string>();
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
        const headers: Record<string, string | null> = { transactionId: txns[id]! };
        if (POISON && s % 100 === 7) {
          headers[NULL_HEADER] = null;
          nullHeaderIds.add(txns[id]!);
        }
        batch.push({
          m: { key: `key-${k}`, partition: p, value: JSON.stringify({ k, s }), headers: headers as Message['headers'] },
          p,
          id,
        });
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
      // A poison record each POISON_EVERY records, in a send of its own, gzip: the oversized one only fits the broker compressed.
      while (POISON && poisonSent.length < Math.floor(i / POISON_EVERY)) {
        const n = poisonSent.length;
        const p = Math.floor(Math.random() * PARTITIONS);
        const poison = poisonRecord(n, p);
        for (let attempt = 0; ; attempt++) {
          try {
            const meta = await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages: [poison.m] });
            offsetTxn[p]![Number(meta[0]!.baseOffset)] = POISON_OFFSET;
            break;
          } catch (err) {
            log('poison send failed; resending', { err: (err as Error).message, attempt });
            if (attempt > 20) throw err;
          }
        }
        poisonSent.push({ marker: poison.marker, kind: poison.kind });
      }
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
  const stalls: Stall[] = [];
  let lastTotal = -1;
  let lastMoved = Date.now();
  await waitFor(
    'caught up',
    async () => {
      const [c, e] = await Promise.all([committed(kafka, group, topic), endOffsets(kafka, topic)]);
      let total = 0;
      for (const v of c.values()) total += Math.max(0, v);
      if (total !== lastTotal) [lastTotal, lastMoved] = [total, Date.now()];
      else if (Date.now() - lastMoved > 120_000) {
        // No commit for 120 s with records still to commit: a stall. Is it visible?
        const stall = await probeStall(instances, total);
        stalls.push(stall);
        log('STALL: committed offsets have not moved for 120 s', { ...stall });
        throw new Error(`the group stalled (${stall.visible ? 'visible in readiness' : 'silently'}) at ${total} committed`);
      }
      for (const [p, high] of e) if (high > 0 && (c.get(p) ?? -1) < high) return false;
      return true;
    },
    3_600_000,
    1000,
  ).catch((err: unknown) => {
    if (stalls.length === 0) throw err;
  });
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
  const poisonInLog = frames.filter((f) => f.transactionId.startsWith('poison-') || f.payload.includes('"poison"')).length;
  // Good records sent with a null header value: the log keeps it as null (frame format v2).
  let nullHeadersKept = 0;
  for (const f of frames) {
    if (!nullHeaderIds.has(f.transactionId) || !f.origin) continue;
    if (decodeOrigin(f.origin).headers.some((h) => h.key === NULL_HEADER && h.value === null)) nullHeadersKept++;
  }
  const dlqMarkers = POISON ? await deadLetterMarkers(kafka, `${topic}.dlq`) : new Map<string, number>();
  const poisonMissingFromDlq = poisonSent.filter((p) => !dlqMarkers.has(p.marker));
  const poisonByKind = Object.fromEntries(POISON_KINDS.map((k) => [k, poisonSent.filter((p) => p.kind === k).length]));
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
      poison: POISON ? { every: POISON_EVERY, kinds: POISON_KINDS } : false,
    },
    produced: { kafkaRecords: produced, distinct: txns.length, resent, compression: 'per send, rotating none/gzip/lz4/zstd/snappy' },
    faults: done,
    stored: frames.length,
    poison: POISON
      ? {
          sent: poisonSent.length,
          byKind: poisonByKind,
          inDeadLetterTopic: poisonSent.length - poisonMissingFromDlq.length,
          deadLetterRecordsWithAMarker: [...dlqMarkers.values()].reduce((a, b) => a + b, 0),
          missingFromDeadLetterTopic: poisonMissingFromDlq.slice(0, 20),
          inLog: poisonInLog,
          goodRecordsWithANullHeader: nullHeaderIds.size,
          nullHeadersKeptInTheLog: nullHeadersKept,
        }
      : undefined,
    stalls,
    checks: {
      exactlyOncePerKey: frames.length === txns.length && ids.size === txns.length && missing === 0,
      storedTwice: frames.length - ids.size,
      missing,
      orderPerKey: orderViolations === 0,
      orderViolations,
      commitsNeverAheadOfLog: samples.every((s) => s.committed >= 0),
      noUnexpectedExits: unexpectedExits.length === 0,
      noStall: stalls.length === 0,
      poisonDeadLetteredNeverStored: !POISON || (poisonSent.length > 0 && poisonMissingFromDlq.length === 0 && poisonInLog === 0),
      nullHeadersKept: !POISON || nullHeadersKept === nullHeaderIds.size,
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
  const c = report.checks;
  const ok =
    c.exactlyOncePerKey &&
    c.orderPerKey &&
    c.commitsNeverAheadOfLog &&
    c.noUnexpectedExits &&
    c.noStall &&
    c.poisonDeadLetteredNeverStored &&
    c.nullHeadersKept;
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
      if (id === POISON_OFFSET) continue; // dead-lettered, never in the log
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

interface Stall {
  at: string;
  committed: number;
  /** True when some instance's readiness answers 503 naming a halted partition. */
  visible: boolean;
  instances: { pid: number | undefined; ready: number | string; reasons: string; haltedPartitions: number | string }[];
}

/** What each live instance says while the group does not move: readiness and the halted-partitions gauge. */
async function probeStall(instances: ServiceProcess[], committedNow: number): Promise<Stall> {
  const out: Stall['instances'] = [];
  for (const p of instances) {
    const port = p.lines.find((l) => l.msg === 'HTTP API listening')?.port as number | undefined;
    if (port === undefined) continue;
    const base = `http://127.0.0.1:${port}`;
    let ready: number | string;
    let reasons = '';
    let halted: number | string;
    try {
      const r = await fetch(`${base}/health/ready`, { signal: AbortSignal.timeout(5000) });
      ready = r.status;
      reasons = await r.text();
    } catch (err) {
      ready = (err as Error).message;
    }
    try {
      const m = /^queen_ingress_halted_partitions (\d+)/m.exec(
        await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5000) })).text(),
      );
      halted = m ? Number(m[1]) : 'absent';
    } catch (err) {
      halted = (err as Error).message;
    }
    out.push({ pid: p.child.pid, ready, reasons: reasons.slice(0, 2000), haltedPartitions: halted });
  }
  const visible = out.some((i) => i.ready === 503 && i.reasons.includes('halted'));
  return { at: new Date().toISOString(), committed: committedNow, visible, instances: out };
}

/** How often each poison marker header occurs in the dead-letter topic (read from the beginning to its end). */
async function deadLetterMarkers(kafka: ReturnType<typeof kafkaClient>, dlq: string): Promise<Map<string, number>> {
  const ends = await endOffsets(kafka, dlq);
  const want = [...ends.values()].reduce((a, b) => a + b, 0);
  const markers = new Map<string, number>();
  if (want === 0) return markers;
  let seen = 0;
  const c = kafka.consumer({ groupId: uniqueName('g-chaos-dlq') });
  await c.connect();
  try {
    await c.subscribe({ topic: dlq, fromBeginning: true });
    await c.run({
      eachMessage: async ({ message }) => {
        seen++;
        const v = message.headers?.[POISON_HEADER];
        const marker = Array.isArray(v) ? v[0] : v;
        if (marker !== undefined && marker !== null) markers.set(marker.toString(), (markers.get(marker.toString()) ?? 0) + 1);
      },
    });
    await waitFor(`${want} dead letters read`, () => seen >= want, 300_000, 200);
  } finally {
    await c.disconnect();
  }
  return markers;
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
