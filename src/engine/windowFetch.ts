import type pg from 'pg';
import copyStreams from 'pg-copy-streams';
import { toDatabaseError } from './sqlstate.js';

const { to: copyTo } = copyStreams;

export interface WindowRow {
  baseOffset: number;
  endOffset: number;
  createdMs: number;
  hashes: Buffer;
}

/** A partition's state when its window is fetched, read before any hash moves. */
export interface WindowState {
  lastOffset: number;
  txnsStart: number;
  windowSeconds: number;
  /** Frames in the window at the snapshot (the footprint estimate for admission). */
  inWindowHashes: number;
  /**
   * Offsets above compacted_upto and the purge watermark: the tail a probe
   * (or lookup) of this partition would read in log_txns, the rest coming
   * from its hash runs (docs/deduplication.md, "The cold path").
   */
  tailOffsets: number;
}

export interface WindowSnapshot {
  lastOffset: number;
  txnsStart: number;
  windowSeconds: number;
  /** Frames in the window at the snapshot (the footprint estimate for admission). */
  inWindowHashes: number;
  rows: WindowRow[];
  /** Broker clock when the snapshot was taken (after it, the safe side for expiry). */
  fetchedAtMs: number;
}

/** Clock-skew slack added to the window on the safe side: extra old rows only widen coverage. */
export const HYDRATION_SLACK_SECONDS = 5;

const STATES_SQL = `SELECT lp.id, lp.last_offset, lp.txns_start, q.dedup_window_seconds, lp.compacted_upto,
    (SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0)
       FROM queen.log_txns t
      WHERE t.partition_id = lp.id
        AND t.created_at >= now() - make_interval(secs => q.dedup_window_seconds + $2::integer)) AS in_window
  FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
  WHERE lp.id = ANY($1::bigint[])`;

const TAILS_SQL = `SELECT lp.id, GREATEST(0, lp.last_offset - GREATEST(lp.compacted_upto, lp.txns_start - 1)) AS tail
  FROM queen.log_partitions lp
  WHERE lp.id = ANY($1::bigint[])`;

/**
 * The tails (WindowState.tailOffsets) of some partitions, read in one
 * statement, outside any fetch: advisory, for choosing whether a push waits
 * for a partition's window or looks its items up, which are both exact
 * whatever the tail (src/fusion/cacheWatermarks.ts).
 */
export async function readTails(pool: pg.Pool, partitionIds: readonly number[]): Promise<Map<number, number>> {
  try {
    const r = await pool.query<{ id: string; tail: string }>({ name: 'queen_window_tails', text: TAILS_SQL, values: [partitionIds] });
    return new Map(r.rows.map((row) => [Number(row.id), Number(row.tail)]));
  } catch (err) {
    throw toDatabaseError(err, 'reading partition tails');
  }
}

// COPY cannot take bind parameters, so the values travel through
// transaction-local settings set by a parameterised set_config(): no value is
// ever spliced into SQL text.
const SET_SQL = `SELECT set_config('queen.fetch_partitions', $1::text, true), set_config('queen.fetch_seconds', $2::text, true)`;
// Each partition's rows in the window its state was read with (the same
// snapshot, so the same window). The rows come grouped by partition in
// practice; copyRows groups them itself and checks each group's order, so
// nothing rests on the plan's output order.
const COPY_SQL = `COPY (
  SELECT p.id, t.base_offset, t.end_offset, (extract(epoch FROM t.created_at) * 1000)::float8, t.hashes
  FROM unnest(current_setting('queen.fetch_partitions')::bigint[], current_setting('queen.fetch_seconds')::integer[]) AS p (id, secs)
  CROSS JOIN LATERAL (
    SELECT t.base_offset, t.end_offset, t.created_at, t.hashes
    FROM queen.log_txns t
    WHERE t.partition_id = p.id
      AND t.created_at >= now() - make_interval(secs => p.secs)
    ORDER BY t.end_offset
  ) t
) TO STDOUT (FORMAT binary)`;

/**
 * What a batched fetch did with one partition: its snapshot; refused (not
 * known, or its admit returned false); or deferred, when it is too large to
 * share a batch (BATCH_MAX_HASHES) and must be fetched alone. A deferred
 * partition was not admitted, and nothing of it was read but its state.
 */
export type WindowFetchOutcome =
  { kind: 'snapshot'; snapshot: WindowSnapshot } | { kind: 'refused' } | { kind: 'deferred'; state: WindowState };

/**
 * A partition whose window holds more hashes than this is not fetched in a
 * batch of several (fetchWindows defers it, to be fetched alone): one large
 * window would hold back the installs of the small ones batched with it, and
 * a push waiting for it could not move it ahead of them.
 */
export const BATCH_MAX_HASHES = 4096;

/**
 * Full-window fetches of some partitions' log_txns rows for cache
 * hydration, in one REPEATABLE READ snapshot, so each partition's allocator
 * watermark and rows agree: every row of it at or below lastOffset that is
 * in the window is in its snapshot's `rows`.
 *
 * One transaction and one COPY for the whole batch: at 100 k small
 * partitions a fetch's round trips, not its rows, were its cost, each
 * waiting for a busy event loop (docs/history/2026-12-06-window-fetches-at-100k-partitions.md).
 *
 * `admit` sees each partition's state and footprint estimate before any of
 * its hashes is moved; returning false refuses it (the memory-pressure
 * gate). In a batch of more than one, a partition over BATCH_MAX_HASHES is
 * deferred before admit is asked. `outcome` is called once per partition,
 * in the order the partitions are settled; on an error it is not called for
 * the partitions not yet settled, and the error is thrown.
 */
export async function fetchWindows(
  pool: pg.Pool,
  partitionIds: readonly number[],
  admit: (partitionId: number, s: WindowState) => boolean,
  outcome: (partitionId: number, o: WindowFetchOutcome) => void,
): Promise<void> {
  if (partitionIds.length === 0) return;
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const st = await client.query({ name: 'queen_window_states', text: STATES_SQL, values: [partitionIds, HYDRATION_SLACK_SECONDS] });
    const states = new Map<number, WindowState>();
    for (const r of st.rows) {
      states.set(Number(r.id), {
        lastOffset: Number(r.last_offset),
        txnsStart: Number(r.txns_start),
        windowSeconds: Number(r.dedup_window_seconds),
        inWindowHashes: Number(r.in_window),
        tailOffsets: Math.max(0, Number(r.last_offset) - Math.max(Number(r.compacted_upto), Number(r.txns_start) - 1)),
      });
    }
    const batched = partitionIds.length > 1;
    const admitted: number[] = [];
    for (const pid of new Set(partitionIds)) {
      const s = states.get(pid);
      if (s === undefined) outcome(pid, { kind: 'refused' });
      else if (batched && s.inWindowHashes > BATCH_MAX_HASHES) outcome(pid, { kind: 'deferred', state: s });
      else if (!admit(pid, s)) outcome(pid, { kind: 'refused' });
      else admitted.push(pid);
    }
    if (admitted.length > 0) {
      await client.query(SET_SQL, [
        `{${admitted.join(',')}}`,
        `{${admitted.map((p) => states.get(p)!.windowSeconds + HYDRATION_SLACK_SECONDS).join(',')}}`,
      ]);
      const rows = await copyRows(client);
      const fetchedAtMs = Date.now();
      for (const pid of admitted) {
        const s = states.get(pid)!;
        outcome(pid, {
          kind: 'snapshot',
          snapshot: {
            lastOffset: s.lastOffset,
            txnsStart: s.txnsStart,
            windowSeconds: s.windowSeconds,
            inWindowHashes: s.inWindowHashes,
            rows: rows.get(pid) ?? [],
            fetchedAtMs,
          },
        });
      }
    }
    await client.query('COMMIT');
  } catch (err) {
    broken = true;
    const what = partitionIds.length === 1 ? `partition ${partitionIds[0]}` : `${partitionIds.length} partitions`;
    throw toDatabaseError(err, `fetching the dedup window of ${what}`);
  } finally {
    // A client that failed mid-COPY is discarded rather than reused.
    client.release(broken);
  }
}

/**
 * One partition's fetch (fetchWindows of one): its snapshot, or undefined
 * when it is not known or `admit` refused it.
 */
export async function fetchWindow(
  pool: pg.Pool,
  partitionId: number,
  admit: (s: WindowState) => boolean,
): Promise<WindowSnapshot | undefined> {
  let snapshot: WindowSnapshot | undefined;
  await fetchWindows(
    pool,
    [partitionId],
    (_, s) => admit(s),
    (_, o) => {
      if (o.kind === 'snapshot') snapshot = o.snapshot;
    },
  );
  return snapshot;
}

/** The COPY's rows by partition, each partition's in ascending end_offset. */
async function copyRows(client: pg.PoolClient): Promise<Map<number, WindowRow[]>> {
  const stream = client.query(copyTo(COPY_SQL));
  const parser = new BinaryCopyParser();
  for await (const chunk of stream as AsyncIterable<Buffer>) parser.push(chunk);
  const byPartition = new Map<number, WindowRow[]>();
  for (const { partitionId, row } of parser.finish()) {
    let list = byPartition.get(partitionId);
    if (list === undefined) byPartition.set(partitionId, (list = []));
    list.push(row);
  }
  for (const list of byPartition.values()) {
    // install() reads a partition's rows oldest first. The lateral ORDER BY
    // gives that order; sorting only when it did not costs one pass.
    if (list.some((r, i) => i > 0 && r.endOffset < list[i - 1]!.endOffset)) list.sort((a, b) => a.endOffset - b.endOffset);
  }
  return byPartition;
}

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

/**
 * Incremental parser for PostgreSQL's binary COPY format, for rows of
 * (int8 partition id, int8, int8, float8, bytea). Keeps at most one partial
 * tuple buffered.
 */
export class BinaryCopyParser {
  private buf: Buffer = Buffer.alloc(0);
  private headerDone = false;
  private done = false;
  private readonly rows: { partitionId: number; row: WindowRow }[] = [];

  push(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    let pos = 0;
    if (!this.headerDone) {
      if (this.buf.length < 19) return;
      if (!this.buf.subarray(0, 11).equals(SIGNATURE)) throw new Error('not a binary COPY stream');
      const extLen = this.buf.readUInt32BE(15);
      if (this.buf.length < 19 + extLen) return;
      pos = 19 + extLen;
      this.headerDone = true;
    }
    for (;;) {
      if (this.buf.length - pos < 2) break;
      const fields = this.buf.readInt16BE(pos);
      if (fields === -1) {
        this.done = true;
        pos += 2;
        break;
      }
      if (fields !== 5) throw new Error(`binary COPY: expected 5 fields, got ${fields}`);
      // Fixed part: 4 x (len + 8 bytes) then the bytea length.
      const fixed = 2 + 4 * 12 + 4;
      if (this.buf.length - pos < fixed) break;
      const hashLen = this.buf.readInt32BE(pos + 2 + 48);
      if (this.buf.length - pos < fixed + hashLen) break;
      const partitionId = Number(this.buf.readBigInt64BE(pos + 2 + 4));
      const baseOffset = Number(this.buf.readBigInt64BE(pos + 2 + 12 + 4));
      const endOffset = Number(this.buf.readBigInt64BE(pos + 2 + 24 + 4));
      const createdMs = this.buf.readDoubleBE(pos + 2 + 36 + 4);
      // A view, not a copy: the chunks pg-copy-streams hands over are fresh
      // socket reads or fresh allocations, and nothing here writes into them,
      // so the view stays valid; install() copies the hashes into the cache
      // and drops the rows. A copy per row was ~14 % of a hydration's time
      // (scratch kin5m: 5 M stored hashes).
      const hashes = this.buf.subarray(pos + fixed, pos + fixed + hashLen);
      this.rows.push({ partitionId, row: { baseOffset, endOffset, createdMs, hashes } });
      pos += fixed + hashLen;
    }
    this.buf = this.buf.subarray(pos);
  }

  finish(): { partitionId: number; row: WindowRow }[] {
    if (!this.done) throw new Error('binary COPY stream ended early');
    return this.rows;
  }
}
