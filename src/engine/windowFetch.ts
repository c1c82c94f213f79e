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

const STATE_SQL = `SELECT lp.last_offset, lp.txns_start, q.dedup_window_seconds, lp.compacted_upto,
    (SELECT coalesce(sum(t.end_offset - t.base_offset + 1), 0)
       FROM queen.log_txns t
      WHERE t.partition_id = lp.id
        AND t.created_at >= now() - make_interval(secs => q.dedup_window_seconds + $2::integer)) AS in_window
  FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
  WHERE lp.id = $1`;

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
const SET_SQL = `SELECT set_config('queen.fetch_partition', $1::text, true), set_config('queen.fetch_seconds', $2::text, true)`;
const COPY_SQL = `COPY (
  SELECT base_offset, end_offset, (extract(epoch FROM created_at) * 1000)::float8, hashes
  FROM queen.log_txns
  WHERE partition_id = current_setting('queen.fetch_partition')::bigint
    AND created_at >= now() - make_interval(secs => current_setting('queen.fetch_seconds')::integer)
  ORDER BY end_offset
) TO STDOUT (FORMAT binary)`;

/**
 * Full-window fetch of one partition's log_txns rows for cache hydration, in
 * one REPEATABLE READ snapshot so the allocator watermark and the rows agree:
 * every row at or below lastOffset that is in the window is in `rows`.
 *
 * `admit` sees the partition state and footprint estimate before any hash is
 * moved; returning false skips the fetch (the memory-pressure gate).
 */
export async function fetchWindow(
  pool: pg.Pool,
  partitionId: number,
  admit: (s: WindowState) => boolean,
): Promise<WindowSnapshot | undefined> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const st = await client.query({ name: 'queen_window_state', text: STATE_SQL, values: [partitionId, HYDRATION_SLACK_SECONDS] });
    if (st.rowCount === 0) {
      await client.query('COMMIT');
      return undefined;
    }
    const r = st.rows[0];
    const state: WindowState = {
      lastOffset: Number(r.last_offset),
      txnsStart: Number(r.txns_start),
      windowSeconds: Number(r.dedup_window_seconds),
      inWindowHashes: Number(r.in_window),
      tailOffsets: Math.max(0, Number(r.last_offset) - Math.max(Number(r.compacted_upto), Number(r.txns_start) - 1)),
    };
    if (!admit(state)) {
      await client.query('COMMIT');
      return undefined;
    }
    await client.query(SET_SQL, [String(partitionId), String(state.windowSeconds + HYDRATION_SLACK_SECONDS)]);
    const rows = await copyRows(client);
    await client.query('COMMIT');
    return {
      lastOffset: state.lastOffset,
      txnsStart: state.txnsStart,
      windowSeconds: state.windowSeconds,
      inWindowHashes: state.inWindowHashes,
      rows,
      fetchedAtMs: Date.now(),
    };
  } catch (err) {
    broken = true;
    throw toDatabaseError(err, `fetching the dedup window of partition ${partitionId}`);
  } finally {
    // A client that failed mid-COPY is discarded rather than reused.
    client.release(broken);
  }
}

async function copyRows(client: pg.PoolClient): Promise<WindowRow[]> {
  const stream = client.query(copyTo(COPY_SQL));
  const parser = new BinaryCopyParser();
  for await (const chunk of stream as AsyncIterable<Buffer>) parser.push(chunk);
  return parser.finish();
}

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

/**
 * Incremental parser for PostgreSQL's binary COPY format, for rows of
 * (int8, int8, float8, bytea). Keeps at most one partial tuple buffered.
 */
export class BinaryCopyParser {
  private buf: Buffer = Buffer.alloc(0);
  private headerDone = false;
  private done = false;
  private readonly rows: WindowRow[] = [];

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
      if (fields !== 4) throw new Error(`binary COPY: expected 4 fields, got ${fields}`);
      // Fixed part: 3 x (len + 8 bytes) then the bytea length.
      const fixed = 2 + 3 * 12 + 4;
      if (this.buf.length - pos < fixed) break;
      const hashLen = this.buf.readInt32BE(pos + 2 + 36);
      if (this.buf.length - pos < fixed + hashLen) break;
      const baseOffset = Number(this.buf.readBigInt64BE(pos + 2 + 4));
      const endOffset = Number(this.buf.readBigInt64BE(pos + 2 + 12 + 4));
      const createdMs = this.buf.readDoubleBE(pos + 2 + 24 + 4);
      // A view, not a copy: the chunks pg-copy-streams hands over are fresh
      // socket reads or fresh allocations, and nothing here writes into them,
      // so the view stays valid; install() copies the hashes into the cache
      // and drops the rows. A copy per row was ~14 % of a hydration's time
      // (scratch kin5m: 5 M stored hashes).
      const hashes = this.buf.subarray(pos + fixed, pos + fixed + hashLen);
      this.rows.push({ baseOffset, endOffset, createdMs, hashes });
      pos += fixed + hashLen;
    }
    this.buf = this.buf.subarray(pos);
  }

  finish(): WindowRow[] {
    if (!this.done) throw new Error('binary COPY stream ended early');
    return this.rows;
  }
}
