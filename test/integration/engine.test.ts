import anyTest, { type TestFn } from 'ava';
import pg from 'pg';
import { LogEngine, TXNS_ROW_FRAMES } from '../../src/engine/logEngine.js';
import { LogWriter, type PushItem, type PushResult } from '../../src/engine/writer.js';
import { migrate } from '../../src/engine/migrate.js';
import { unpackSegment } from '../../src/engine/frames.js';
import { hashTransactionId } from '../../src/util/txnHash.js';
import { NIL_UUID, uuidToString } from '../../src/util/uuidv7.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { partitionIdOf, retainPast } from '../helpers/retain.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

interface Ctx {
  db: TestDatabase;
  engine: LogEngine;
  writer: LogWriter;
  metrics: MetricsRegistry;
  sql: pg.Pool;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('engine');
  const metrics = new MetricsRegistry();
  const engine = new LogEngine({ connectionString: db.url, poolSize: 12, metrics });
  await engine.start();
  const sql = new pg.Pool({ connectionString: db.url, max: 2 });
  t.context = { db, engine, metrics, sql, writer: new LogWriter(engine, { maxPayloadBytes: 1024 * 1024, metadataTtlMs: 0 }) };
});

teardownAndCheckLeaks(test, async (t) => {
  await t.context.engine?.stop();
  await t.context.sql?.end();
  await t.context.db?.drop();
});

const json = (v: unknown) => Buffer.from(JSON.stringify(v));
const item = (queue: string, partition: string, transactionId: string | undefined, data: unknown = {}): PushItem => ({
  queue,
  partition,
  transactionId,
  payload: json(data),
});

async function counts(t: { context: Ctx }, queue: string, partition: string) {
  const r = await t.context.sql.query(
    `SELECT lp.last_offset,
            (SELECT count(*) FROM queen.log_segments s WHERE s.partition_id = lp.id) AS segments,
            (SELECT count(*) FROM queen.log_txns x WHERE x.partition_id = lp.id) AS txns
     FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
     WHERE q.name = $1 AND lp.name = $2`,
    [queue, partition],
  );
  const row = r.rows[0];
  return { lastOffset: Number(row.last_offset), segments: Number(row.segments), txns: Number(row.txns) };
}

async function setWindow(t: { context: Ctx }, queue: string, seconds: number) {
  await t.context.sql.query('UPDATE queen.queues SET dedup_window_seconds = $2 WHERE name = $1', [queue, seconds]);
}

test('the seed example: a retry answers duplicate with the first id and writes nothing', async (t) => {
  const { writer } = t.context;
  const push = () => writer.push([item('payments', 'customer-42', 'order-9137-paid', { orderId: 9137, amount: 99.5 })]);
  const [first] = await push();
  t.is(first!.status, 'queued');
  t.regex(first!.id!, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const before = await counts(t, 'payments', 'customer-42');
  const [retry] = await push();
  t.is(retry!.status, 'duplicate');
  t.is(retry!.id, first!.id);
  t.is(retry!.offset, first!.offset);
  t.deepEqual(await counts(t, 'payments', 'customer-42'), before);
  t.deepEqual(before, { lastOffset: 0, segments: 1, txns: 1 });
});

test('deduplication is on by default with a 3600 s window', async (t) => {
  await t.context.writer.push([item('defaults-q', 'p', 'x')]);
  const r = await t.context.sql.query('SELECT dedup_window_seconds FROM queen.queues WHERE name = $1', ['defaults-q']);
  t.is(r.rows[0].dedup_window_seconds, 3600);
});

test('the stored frame holds the id, transactionId, trace context and payload', async (t) => {
  const [r] = await t.context.writer.push([
    {
      queue: 'frames',
      partition: 'p',
      transactionId: 'tx-frame',
      payload: json({ a: 1 }),
      traceContext: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    },
  ]);
  const seg = await t.context.sql.query(
    'SELECT s.blob, x.hashes FROM queen.log_segments s JOIN queen.log_txns x USING (partition_id, base_offset) JOIN queen.log_partitions lp ON lp.id = s.partition_id WHERE lp.name = $1 AND lp.queue_id = (SELECT id FROM queen.queues WHERE name = $2)',
    ['p', 'frames'],
  );
  const [frame] = unpackSegment(seg.rows[0].blob);
  t.is(uuidToString(frame!.id), r!.id!);
  t.is(frame!.transactionId, 'tx-frame');
  t.is(frame!.traceContext, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
  t.deepEqual(JSON.parse(frame!.payload.toString()), { a: 1 });
  t.deepEqual(seg.rows[0].hashes, hashTransactionId('tx-frame'));
});

test('window 0 skips the probe but still writes log_txns', async (t) => {
  const { writer } = t.context;
  await writer.push([item('nodedup', 'p', 'seed')]);
  await setWindow(t, 'nodedup', 0);
  const a = await writer.push([item('nodedup', 'p', 'same')]);
  const b = await writer.push([item('nodedup', 'p', 'same')]);
  t.is(a[0]!.status, 'queued');
  t.is(b[0]!.status, 'queued');
  t.not(a[0]!.id, b[0]!.id);
  t.deepEqual(await counts(t, 'nodedup', 'p'), { lastOffset: 2, segments: 3, txns: 3 });
});

test('a retry older than the window is accepted as new', async (t) => {
  const { writer, sql } = t.context;
  const [first] = await writer.push([item('aging', 'p', 'old-order')]);
  await setWindow(t, 'aging', 60);
  // Age the stored row past the window instead of waiting for it.
  await sql.query(
    `UPDATE queen.log_txns SET created_at = created_at - interval '61 seconds' WHERE partition_id = (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'aging')`,
  );
  const [again] = await writer.push([item('aging', 'p', 'old-order')]);
  t.is(again!.status, 'queued');
  t.not(again!.id, first!.id);
  // Within the window it is a duplicate again (of the newer copy).
  const [third] = await writer.push([item('aging', 'p', 'old-order')]);
  t.is(third!.status, 'duplicate');
  t.is(third!.id, again!.id);
});

test('rows below txns_start (purged) are not compared', async (t) => {
  const { writer, sql } = t.context;
  await writer.push([item('purged', 'p', 'a'), item('purged', 'p', 'b')]);
  await sql.query(`UPDATE queen.log_partitions SET txns_start = 2 WHERE queue_id = (SELECT id FROM queen.queues WHERE name = 'purged')`);
  const [a] = await writer.push([item('purged', 'p', 'a')]);
  t.is(a!.status, 'queued');
  t.is(a!.offset, 2);
});

test('MIN: a hash stored twice answers the original (earliest) id', async (t) => {
  const { writer } = t.context;
  await writer.push([item('minq', 'p', 'filler')]);
  await setWindow(t, 'minq', 0);
  const [one] = await writer.push([item('minq', 'p', 'twice')]);
  const [two] = await writer.push([item('minq', 'p', 'twice')]);
  t.is(two!.status, 'queued');
  await setWindow(t, 'minq', 3600);
  const [dup] = await writer.push([item('minq', 'p', 'twice')]);
  t.is(dup!.status, 'duplicate');
  t.is(dup!.id, one!.id);
  t.is(dup!.offset, one!.offset);
});

test('bundle isolation: a duplicate in one partition does not roll back another partition', async (t) => {
  const { writer } = t.context;
  const [orig] = await writer.push([item('bundle', 'a', 'dup-me')]);
  const res = await writer.push([item('bundle', 'a', 'dup-me'), item('bundle', 'b', 'fresh-1'), item('bundle', 'b', 'fresh-2')]);
  t.deepEqual(
    res.map((r) => r.status),
    ['duplicate', 'queued', 'queued'],
  );
  t.is(res[0]!.id, orig!.id);
  t.deepEqual(await counts(t, 'bundle', 'b'), { lastOffset: 1, segments: 1, txns: 1 });
  t.deepEqual(await counts(t, 'bundle', 'a'), { lastOffset: 0, segments: 1, txns: 1 });
});

test('log_push_v12 refuses malformed hint runs for the whole bundle, naming the segment, and writes nothing', async (t) => {
  const { writer, sql } = t.context;
  await writer.push([item('badruns', 'a', 'x'), item('badruns', 'b', 'y')]);
  const ids = (
    await sql.query(
      `SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'badruns' ORDER BY lp.name`,
    )
  ).rows.map((r) => r.id as string);
  // Two segments of one frame each; the second also names one expected duplicate (item 1).
  const call = (runCounts: number[], runItems: number[]) =>
    sql.query(
      `SELECT * FROM queen.log_push_v12($1::bigint[], $2::bigint[], $3::integer[], $4::integer[], $5::integer[], $6::bytea,
                                       $7::integer[], $8::bytea, $9::integer[], $10::integer[], $11::bigint[], $12::integer[])`,
      [
        ids,
        [-1, -1],
        [3600, 3600],
        [1, 1],
        [0, 1],
        Buffer.alloc(48, 7),
        [0, 0],
        Buffer.alloc(0),
        runCounts,
        runItems,
        runItems.map(() => 0),
        runItems.map(() => 1),
      ],
    );
  // The run of segment 1 names item 0, a frame of that segment, not one of its expected duplicates.
  const bad = await t.throwsAsync(call([0, 1], [0]));
  t.is((bad as { code?: string }).code, '22023');
  t.regex(bad.message, /segment 1 has malformed hint runs/);
  // A run no segment claims.
  const stray = await t.throwsAsync(call([0, 0], [1]));
  t.is((stray as { code?: string }).code, '22023');
  t.regex(stray.message, /1 hint runs belong to no segment/);
  t.deepEqual(await counts(t, 'badruns', 'a'), { lastOffset: 0, segments: 1, txns: 1 });
  t.deepEqual(await counts(t, 'badruns', 'b'), { lastOffset: 0, segments: 1, txns: 1 });
});

test('re-submission: new frames of a segment that had a duplicate are written as their own segment', async (t) => {
  const { writer } = t.context;
  const [orig] = await writer.push([item('resub', 'p', 'old')]);
  const res = await writer.push([item('resub', 'p', 'new-1'), item('resub', 'p', 'old'), item('resub', 'p', 'new-2')]);
  t.deepEqual(
    res.map((r) => r.status),
    ['queued', 'duplicate', 'queued'],
  );
  t.is(res[1]!.id, orig!.id);
  t.deepEqual([res[0]!.offset, res[2]!.offset], [1, 2]);
  t.deepEqual(await counts(t, 'resub', 'p'), { lastOffset: 2, segments: 2, txns: 2 });
});

test('followers in one request inherit the leader, also when the leader is a stored duplicate', async (t) => {
  const { writer } = t.context;
  const [orig] = await writer.push([item('follow', 'p', 'stored')]);
  const res = await writer.push([
    item('follow', 'p', 'n'),
    item('follow', 'p', 'n'),
    item('follow', 'p', 'stored'),
    item('follow', 'p', 'stored'),
    item('follow', 'q', 'n'),
  ]);
  t.deepEqual(
    res.map((r) => r.status),
    ['queued', 'duplicate', 'duplicate', 'duplicate', 'queued'],
  );
  t.is(res[1]!.id, res[0]!.id);
  t.is(res[2]!.id, orig!.id);
  t.is(res[3]!.id, orig!.id);
  t.not(res[4]!.id, res[0]!.id, 'same transactionId in another partition is not a duplicate');
  t.deepEqual(await counts(t, 'follow', 'p'), { lastOffset: 1, segments: 2, txns: 2 });
});

test('a missing transactionId is minted, so such items are never duplicates', async (t) => {
  const res = await t.context.writer.push([item('mint', 'p', undefined, 1), item('mint', 'p', undefined, 1)]);
  t.deepEqual(
    res.map((r) => r.status),
    ['queued', 'queued'],
  );
  t.truthy(res[0]!.transactionId);
  t.not(res[0]!.transactionId, res[1]!.transactionId);
});

test('bad items fail alone; the valid items of the same call are written', async (t) => {
  const writer = new LogWriter(t.context.engine, { maxPayloadBytes: 64, metadataTtlMs: 0 });
  const res = await writer.push([
    item('', 'p', 'a'),
    item('ok-q', 'p', 'good-1'),
    item('bad queue!', 'p', 'b'),
    item('ok-q', '', 'c'),
    item('ok-q', 'x'.repeat(300), 'd'),
    item('ok-q', 'p', 'y'.repeat(600)),
    item('ok-q', 'p', ''),
    { queue: 'ok-q', partition: 'p', transactionId: 'big', payload: Buffer.alloc(65) },
    { queue: 'ok-q', partition: 'p', transactionId: 'nobytes', payload: 'text' as unknown as Buffer },
    item('ok-q', 'p\u0001', 'ctl'),
    item('ok-q', 'p', 'good-2'),
  ]);
  t.deepEqual(
    res.map((r) => r.status),
    ['failed', 'queued', 'failed', 'failed', 'failed', 'failed', 'failed', 'failed', 'failed', 'failed', 'queued'],
  );
  for (const r of res.filter((x) => x.status === 'failed')) t.truthy(r.error, 'every failure has a reason');
  t.regex(res[7]!.error!, /over the limit of 64/);
  t.deepEqual(await counts(t, 'ok-q', 'p'), { lastOffset: 1, segments: 1, txns: 1 });
});

test('a duplicate whose original segment was removed by retention answers the all-zero id', async (t) => {
  const { writer, sql } = t.context;
  await writer.push([item('retained', 'p', 'gone')]);
  t.is(await retainPast(sql, await partitionIdOf(sql, 'retained', 'p'), 0), 1);
  const [dup] = await writer.push([item('retained', 'p', 'gone')]);
  t.is(dup!.status, 'duplicate');
  t.is(dup!.id, NIL_UUID);
});

test('a replay across several segments, the first ones removed by retention, answers each original id and the all-zero id for the removed ones', async (t) => {
  const { writer, sql } = t.context;
  const first: PushResult[] = [];
  for (let s = 0; s < 4; s++)
    first.push(...(await writer.push(Array.from({ length: 4 }, (_, i) => item('retained-span', 'p', `s${s}-${i}`)))));
  // Retention removes the segments at 0 and 4; the hashes stay (the window keeps log_txns).
  t.is(await retainPast(sql, await partitionIdOf(sql, 'retained-span', 'p'), 7), 2);
  // One push naming every stored id: its originals are one range of
  // consecutive offsets 0..15 over four segments, the first two gone.
  const replay = await writer.push(first.map((r) => item('retained-span', 'p', r.transactionId!)));
  t.deepEqual(
    replay.map((r) => [r.status, r.offset, r.id]),
    first.map((r) => ['duplicate', r.offset, r.offset! < 8 ? NIL_UUID : r.id]),
  );
  // Scattered retries (runs of one) across the boundary answer the same way.
  const scattered = [1, 6, 9, 14].map((o) => first[o]!);
  const again = await writer.push(scattered.map((r) => item('retained-span', 'p', r.transactionId!)));
  t.deepEqual(
    again.map((r) => [r.status, r.offset, r.id]),
    scattered.map((r) => ['duplicate', r.offset, r.offset! < 8 ? NIL_UUID : r.id]),
  );
});

test('segment blobs are stored lz4-compressed where the server has lz4 (migration 000031), and read back intact', async (t) => {
  const { writer, sql } = t.context;
  const lz4 = (await sql.query(`SELECT 'lz4' = ANY (enumvals) AS on FROM pg_settings WHERE name = 'default_toast_compression'`)).rows[0].on;
  // A compressible segment well over the TOAST threshold.
  const payload = Buffer.from(JSON.stringify({ kind: 'order', note: 'x'.repeat(200) }));
  const res = await writer.push(Array.from({ length: 50 }, (_, i) => ({ ...item('lz4q', 'p', `z-${i}`), payload })));
  const row = (
    await sql.query(
      `SELECT pg_column_compression(blob) AS method, blob FROM queen.log_segments
       WHERE partition_id = (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'lz4q')`,
    )
  ).rows[0];
  t.is(row.method, lz4 ? 'lz4' : 'pglz');
  const frames = unpackSegment(row.blob as Buffer);
  t.is(frames.length, 50);
  t.deepEqual(
    frames.map((f) => [uuidToString(f.id), f.payload.toString()]),
    res.map((r) => [r.id, payload.toString()]),
  );
});

test('a segment is written to log_txns as rows of at most 250 frames, each whole in the heap (000033, log_push_v8, v9)', async (t) => {
  const { writer, sql } = t.context;
  // pg_column_size of an uncompressed value: its length + a 4-byte header
  // when it sits in the row, its bare length when it was moved to TOAST.
  const layout = async (queue: string): Promise<string[]> => {
    const r = await sql.query(
      `SELECT x.base_offset, x.end_offset, pg_column_size(x.hashes) - octet_length(x.hashes) AS h, pg_column_size(x.ids) - octet_length(x.ids) AS i
       FROM queen.log_txns x
       WHERE x.partition_id = (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1)
       ORDER BY x.end_offset`,
      [queue],
    );
    const where = (d: number): string => (d === 4 ? 'inline' : d === 0 ? 'toast' : `header ${d}`);
    return r.rows.map((x) => `${x.base_offset}-${x.end_offset} ${where(x.h as number)}/${where(x.i as number)}`);
  };
  t.is(TXNS_ROW_FRAMES, 250);
  // 200 frames: one row, 3.2 kB of hashes + 3.2 kB of ids.
  await writer.push(Array.from({ length: 200 }, (_, i) => item('inline200', 'p', `a-${i}`)));
  t.deepEqual(await layout('inline200'), ['0-199 inline/inline']);
  // 250 frames: the largest row, 8 064 bytes, still whole.
  await writer.push(Array.from({ length: 250 }, (_, i) => item('inline250', 'p', `b-${i}`)));
  t.deepEqual(await layout('inline250'), ['0-249 inline/inline']);
  // 600 frames (v7 toasted both columns of its one row): three rows, all whole.
  await writer.push(Array.from({ length: 600 }, (_, i) => item('inline600', 'p', `c-${i}`)));
  t.deepEqual(await layout('inline600'), ['0-249 inline/inline', '250-499 inline/inline', '500-599 inline/inline']);
  // The rows together hold the segment's hashes and its id directory, in order.
  const whole = await sql.query(
    `SELECT string_agg(x.hashes, ''::bytea ORDER BY x.end_offset) AS h, string_agg(x.ids, ''::bytea ORDER BY x.end_offset) AS i,
            (SELECT substring(s.blob FROM 6 FOR 600 * 16) FROM queen.log_segments s WHERE s.partition_id = min(x.partition_id)) AS dir
     FROM queen.log_txns x
     WHERE x.partition_id = (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'inline600')`,
  );
  const expectHashes = Buffer.concat(Array.from({ length: 600 }, (_, i) => hashTransactionId(`c-${i}`)));
  t.true((whole.rows[0].h as Buffer).equals(expectHashes));
  t.true((whole.rows[0].i as Buffer).equals(whole.rows[0].dir as Buffer));
});

test('duplicates of a segment spread over several log_txns rows answer each original id through the probe, on and across row boundaries', async (t) => {
  const { writer } = t.context;
  const first = await writer.push(Array.from({ length: 600 }, (_, i) => item('spread', 'p', `s-${i}`)));
  // Scattered retries (several ranges) and one range crossing two row boundaries.
  const picks = [0, 1, 248, 249, 250, 251, 499, 500, 599, ...Array.from({ length: 60 }, (_, k) => 220 + k), 420];
  const again = await writer.push(picks.map((o) => item('spread', 'p', `s-${o}`)));
  t.deepEqual(
    again.map((r) => [r.status, r.offset, r.id]),
    picks.map((o) => ['duplicate', o, first[o]!.id]),
  );
});

test('each log_txns row keeps a copy of its segment id directory; a row without one (written before 000030) still answers the original id', async (t) => {
  const { writer, sql } = t.context;
  const first = await writer.push(Array.from({ length: 30 }, (_, i) => item('idcopy', 'p', `c-${i}`)));
  const pid = `(SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'idcopy')`;
  const rows = await sql.query(
    `SELECT x.ids, substring(s.blob FROM 6 FOR (s.end_offset - s.base_offset + 1)::integer * 16) AS dir
     FROM queen.log_txns x JOIN queen.log_segments s USING (partition_id, base_offset) WHERE x.partition_id = ${pid}`,
  );
  t.is(rows.rows.length, 1);
  t.true(Buffer.isBuffer(rows.rows[0].ids) && (rows.rows[0].ids as Buffer).equals(rows.rows[0].dir as Buffer));
  t.deepEqual(
    [...Array(30).keys()].map((i) => uuidToString((rows.rows[0].ids as Buffer).subarray(i * 16, i * 16 + 16))),
    first.map((r) => r.id),
  );
  await sql.query(`UPDATE queen.log_txns SET ids = NULL WHERE partition_id = ${pid}`);
  const again = await writer.push([item('idcopy', 'p', 'c-7'), item('idcopy', 'p', 'c-21')]);
  t.deepEqual(
    again.map((r) => [r.status, r.id]),
    [
      ['duplicate', first[7]!.id],
      ['duplicate', first[21]!.id],
    ],
  );
});

test('p_verified: a correct watermark skips the probe, a partial one narrows it, -1 is exact; verdicts never change', async (t) => {
  // Its own engine and registry: counters shared with concurrently running tests would race.
  const metrics = new MetricsRegistry();
  const engine = new LogEngine({ pool: t.context.engine.pool, metrics });
  await engine.start();
  t.teardown(() => engine.stop());
  const { writer } = t.context;
  const first = await writer.push(Array.from({ length: 10 }, (_, i) => item('vouch', 'p', `v-${i}`)));
  const pid = (await engine.provision([{ queue: 'vouch', partition: 'p' }]))[0]!.partitionId;
  const seg = (txns: string[], verified: number, verifiedWindowSeconds = 3600) => {
    const hashes = Buffer.concat(txns.map((x) => hashTransactionId(x)));
    return {
      partitionId: pid,
      verified,
      verifiedWindowSeconds,
      count: txns.length,
      hashes,
      blob: Buffer.from([1, 0, 0, 0, 0]),
      expected: 0,
      runs: [],
    };
  };
  // Watermark at last_offset: the probe does not run at all.
  const runBefore = metrics.counter('queen_probe_run_total', '').get();
  const [skip] = await engine.pushSegments([seg(['fresh-a'], 9)]);
  t.false(skip!.probed);
  t.is(skip!.assignedBase, 10);
  t.is(metrics.counter('queen_probe_run_total', '').get(), runBefore);
  // A watermark of 5 narrows the probe to (5, 10]: a duplicate at offset 7 is found.
  const [narrow] = await engine.pushSegments([seg(['v-7'], 5)]);
  t.true(narrow!.probed);
  t.deepEqual(
    narrow!.duplicates.map((d) => [d.offset, d.id]),
    [[7, first[7]!.id]],
  );
  // -1 always finds it.
  const [full] = await engine.pushSegments([seg(['v-2'], -1)]);
  t.deepEqual(
    full!.duplicates.map((d) => [d.offset, d.id]),
    [[2, first[2]!.id]],
  );
  // A watermark above the allocator cannot be trusted and is treated as -1.
  const [bogus] = await engine.pushSegments([seg(['v-3'], 1_000_000)]);
  t.true(bogus!.probed);
  t.deepEqual(
    bogus!.duplicates.map((d) => d.offset),
    [3],
  );
  // A watermark vouched under a smaller window than the queue has now does not cover the older rows.
  const [grown] = await engine.pushSegments([seg(['v-4'], 10, 60)]);
  t.true(grown!.probed);
  t.deepEqual(
    grown!.duplicates.map((d) => d.offset),
    [4],
  );
});

test('concurrency: 8 connections pushing overlapping transactionIds store each exactly once', async (t) => {
  const { engine } = t.context;
  const writers = Array.from({ length: 8 }, () => new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0 }));
  const parts = ['c0', 'c1', 'c2', 'c3'];
  const txns = Array.from({ length: 60 }, (_, i) => `tx-${i}`);
  const results = await Promise.all(
    writers.map(async (w, wi) => {
      const out = [];
      for (let round = 0; round < 6; round++) {
        // Each writer pushes a rotating, shuffled bundle over overlapping partitions.
        const items = txns
          .filter((_, i) => (i + wi + round) % 3 !== 0)
          .map((x, i) => item('conc', parts[(i + wi) % parts.length]!, x))
          .sort(() => Math.random() - 0.5);
        out.push(...(await w.push(items)));
      }
      return out;
    }),
  );
  const all = results.flat();
  const byKey = new Map<string, Set<string>>();
  const queuedPerKey = new Map<string, number>();
  for (const r of all) {
    const k = `${r.partition}/${r.transactionId}`;
    t.not(r.status, 'failed');
    if (!byKey.has(k)) byKey.set(k, new Set());
    byKey.get(k)!.add(r.id!);
    if (r.status === 'queued') queuedPerKey.set(k, (queuedPerKey.get(k) ?? 0) + 1);
  }
  for (const [k, ids] of byKey) {
    t.is(ids.size, 1, `every answer for ${k} carries the same id`);
    t.is(queuedPerKey.get(k), 1, `${k} was queued exactly once`);
  }
  const stored = await t.context.sql.query(
    `SELECT count(*)::int AS n, sum(end_offset - base_offset + 1)::int AS frames FROM queen.log_txns WHERE partition_id IN (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = 'conc')`,
  );
  t.is(stored.rows[0].frames, byKey.size);
});

test('random bundle orders over overlapping partition sets never deadlock', async (t) => {
  const { engine } = t.context;
  const parts = Array.from({ length: 12 }, (_, i) => `d${i}`);
  const w = new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0 });
  await w.push(parts.map((p) => item('dl', p, 'init')));
  let n = 0;
  await Promise.all(
    Array.from({ length: 10 }, async (_, wi) => {
      for (let round = 0; round < 15; round++) {
        const chosen = parts.filter(() => Math.random() < 0.6).sort(() => Math.random() - 0.5);
        const res = await w.push(chosen.map((p) => item('dl', p, `w${wi}-r${round}`)));
        n += res.filter((r) => r.status === 'queued').length;
      }
    }),
  );
  t.true(n > 0);
});

test('migration runner: concurrent runners on an empty database apply once; a second run is a no-op', async (t) => {
  const empty = await createTestDatabase('migrate', { empty: true });
  const pools = Array.from({ length: 3 }, () => new pg.Pool({ connectionString: empty.url, max: 1 }));
  try {
    const runs = await Promise.all(pools.map((p) => migrate(p)));
    const appliedCounts = runs.map((r) => r.applied.length).sort();
    t.deepEqual(appliedCounts.slice(0, 2), [0, 0], 'only one runner applies');
    t.true(appliedCounts[2]! >= 2);
    t.deepEqual((await migrate(pools[0]!)).applied, []);
    const n = await pools[0]!.query('SELECT count(*)::int AS n FROM queen.migrations');
    t.is(n.rows[0].n, appliedCounts[2]);
  } finally {
    await Promise.all(pools.map((p) => p.end()));
    await empty.drop();
  }
});

test('the tail probe is exact both ways: a byte search for few items (misaligned matches fall back) and the unroll for many', async (t) => {
  const { engine, writer, sql } = t.context;
  await writer.push([item('align', 'p', 'seed')]);
  const pid = (await engine.provision([{ queue: 'align', partition: 'p' }]))[0]!.partitionId;
  const T = hashTransactionId('target');
  const A = Buffer.concat([Buffer.alloc(8, 0xaa), T.subarray(0, 8)]);
  const B = Buffer.concat([T.subarray(8, 16), Buffer.alloc(8, 0xbb)]);
  // Row at offsets 1..3: A, B, T. T's bytes first appear misaligned (across A|B), then aligned at index 2.
  // Row at offsets 4..5: A, B only: a misaligned match and no real occurrence.
  const ids = [Buffer.alloc(16, 1), Buffer.alloc(16, 2), Buffer.alloc(16, 3), Buffer.alloc(16, 4), Buffer.alloc(16, 5)];
  const blob = (from: number, n: number) => Buffer.concat([Buffer.from([1]), Buffer.from([0, 0, 0, n]), ...ids.slice(from, from + n)]);
  await sql.query(
    'INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes) VALUES ($1, 1, 3, now(), $2), ($1, 4, 5, now(), $3)',
    [pid, Buffer.concat([A, B, T]), Buffer.concat([A, B])],
  );
  await sql.query(
    'INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, blob) VALUES ($1, 1, 3, now(), $2), ($1, 4, 5, now(), $3)',
    [pid, blob(0, 3), blob(3, 2)],
  );
  await sql.query('UPDATE queen.log_partitions SET last_offset = 5 WHERE id = $1', [pid]);
  const seg = (hashes: Buffer[]) => ({
    partitionId: pid,
    verified: -1,
    verifiedWindowSeconds: 3600,
    count: hashes.length,
    expected: 0,
    hashes: Buffer.concat(hashes),
    blob: Buffer.from([1, 0, 0, 0, 0]),
    runs: [],
  });
  const few = [T, hashTransactionId('other-1')];
  const many = [...Array.from({ length: 40 }, (_, i) => hashTransactionId(`filler-${i}`)), T];
  for (const [name, hashes, at] of [
    ['few (byte search)', few, 0],
    ['many (unroll)', many, 40],
  ] as const) {
    const [o] = await engine.pushSegments([seg([...hashes])]);
    t.true(o!.probed, name);
    t.is(o!.assignedBase, null, `${name}: the aligned occurrence is a duplicate`);
    t.deepEqual(
      o!.duplicates.map((d) => [d.index, d.offset, d.id]),
      [[at, 3, uuidToString(ids[2]!)]],
      `${name}: MIN over aligned occurrences only`,
    );
  }
  // Without the aligned occurrence (only the A|B row in the window), T is new both ways.
  await sql.query("UPDATE queen.log_txns SET created_at = now() - interval '2 hours' WHERE partition_id = $1 AND base_offset = 1", [pid]);
  const [o] = await engine.pushSegments([seg([T])]);
  t.deepEqual(o!.duplicates, [], 'a misaligned byte match is not an occurrence');
  t.is(o!.assignedBase, 6);
});

test.serial(
  'a checked-out client whose connection drops between queries does not crash the process (database restart mid-push)',
  async (t) => {
    const client = await t.context.engine.pool.connect();
    let released = false;
    try {
      const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
      // No query in flight: pg emits the drop as an 'error' event on the client itself.
      await t.context.sql.query('SELECT pg_terminate_backend($1)', [pid]);
      await ended;
      await t.throwsAsync(client.query('SELECT 1'), undefined, 'the holder learns of the drop at its next query');
      client.release(new Error('connection dropped'));
      released = true;
      const r = await t.context.engine.pool.query<{ one: number }>('SELECT 1 AS one');
      t.is(r.rows[0]!.one, 1, 'the pool serves a fresh connection');
    } finally {
      if (!released) client.release(new Error('test ended'));
    }
  },
);

test('provisioning answers each distinct pair once with its row: new and existing pairs, repeats, one name in two queues', async (t) => {
  const { engine, sql } = t.context;
  await engine.provision([
    { queue: 'prov-a', partition: 'p1' },
    { queue: 'prov-a', partition: 'p2' },
  ]);
  const pairs = [
    { queue: 'prov-a', partition: 'p1' },
    { queue: 'prov-a', partition: 'p3' },
    { queue: 'prov-b', partition: 'p1' },
    { queue: 'prov-a', partition: 'p1' },
    { queue: 'prov-a', partition: 'p2' },
    { queue: 'prov-b', partition: 'p1' },
  ];
  await sql.query("INSERT INTO queen.queues (name, dedup_window_seconds) VALUES ('prov-b', 60)");
  const got = await engine.provision(pairs);
  const rows = await sql.query<{ queue: string; partition: string; id: string; win: number }>(
    `SELECT q.name AS queue, lp.name AS partition, lp.id, q.dedup_window_seconds AS win
     FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name LIKE 'prov-%'`,
  );
  const want = new Map(rows.rows.map((r) => [`${r.queue}/${r.partition}`, { id: Number(r.id), win: r.win }]));
  t.deepEqual([...want.keys()].sort(), ['prov-a/p1', 'prov-a/p2', 'prov-a/p3', 'prov-b/p1']);
  t.deepEqual(got.map((g) => `${g.queue}/${g.partition}`).sort(), [...want.keys()].sort(), 'one answer per distinct pair');
  for (const g of got) {
    const w = want.get(`${g.queue}/${g.partition}`)!;
    t.is(g.partitionId, w.id, `${g.queue}/${g.partition}`);
    t.is(g.windowSeconds, w.win, `${g.queue}/${g.partition}`);
  }
  t.not(want.get('prov-a/p1')!.id, want.get('prov-b/p1')!.id, 'the same name in two queues is two partitions');
});
