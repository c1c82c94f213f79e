import type pg from 'pg';
import { HASH_BYTES } from '../../util/txnHash.js';
import { toDatabaseError } from '../sqlstate.js';

/**
 * The statements an ack runs, and the broker-side index over the log_txns
 * rows of a leased span (spanHashIndex). Every statement takes its values as
 * parameters.
 */

export const LEASE_KEYS_SQL =
  'SELECT lease_id::text AS lease_id, partition_id, consumer_group FROM queen.log_cursors WHERE lease_id = ANY($1::uuid[])';
export const CURSORS_SQL = `SELECT c.partition_id, c.consumer_group, c.committed_offset, c.settled, c.lease_end, c.lease_id::text AS lease_id,
       c.released, c.retry_offsets, c.retry_counts, q.retry_limit
FROM queen.log_cursors c
JOIN queen.log_partitions lp ON lp.id = c.partition_id
JOIN queen.queues q ON q.id = lp.queue_id
WHERE (c.partition_id, c.consumer_group) IN (SELECT * FROM unnest($1::bigint[], $2::text[]))
ORDER BY c.partition_id, c.consumer_group`;
export const LOCK_SQL = `${CURSORS_SQL}
FOR UPDATE OF c`;
// The optimistic ack's write: compare-and-set under the cursor locks (queen.log_ack_cas_v1 in sql/functions/ack.sql).
export const CAS_SQL = 'SELECT queen.log_ack_cas_v1($1::jsonb, $2::jsonb) AS applied';

// The log_txns rows covering each distinct span, located by the
// (partition_id, end_offset) key from the row holding lo to the row holding
// hi. The broker matches the items' hashes against them (spanHashIndex): in
// SQL, unrolling each row's hash blob into one row per frame and hash-joining
// it cost about 11 ms per 1 000-message ack on this machine, most of an ack's
// database time; the same match in the broker is a Map lookup per item.
export const SPAN_TXNS_SQL = `SELECT s.pid, s.lo, s.hi, t.base_offset, t.hashes
FROM (SELECT DISTINCT x.pid, x.lo, x.hi FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS x (pid, lo, hi)) s
JOIN LATERAL (
  SELECT t.base_offset, t.hashes FROM queen.log_txns t
  WHERE t.partition_id = s.pid AND t.end_offset >= s.lo
    AND t.end_offset <= coalesce((SELECT min(y.end_offset) FROM queen.log_txns y WHERE y.partition_id = s.pid AND y.end_offset >= s.hi), s.hi)
) t ON true`;

// The same for message ids, through the id directory of the span's segments.
export const BY_ID_SQL = `WITH items AS (
  SELECT x.ord, x.pid, x.lo, x.hi, substring($4::bytea FROM (x.ord::integer - 1) * 16 + 1 FOR 16) AS mid
  FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS x (pid, lo, hi, ord)
), spans AS (
  SELECT DISTINCT pid, lo, hi FROM items
), cand AS MATERIALIZED (
  SELECT s.pid, s.lo, ls.base_offset + k AS off, substring(ls.blob FROM 6 + 16 * k FOR 16) AS mid
  FROM spans s
  JOIN LATERAL (
    SELECT ls.base_offset, ls.end_offset, ls.blob FROM queen.log_segments ls
    WHERE ls.partition_id = s.pid
      AND ls.base_offset >= coalesce((SELECT max(y.base_offset) FROM queen.log_segments y WHERE y.partition_id = s.pid AND y.base_offset <= s.lo), s.lo)
      AND ls.base_offset <= s.hi
  ) ls ON true
  CROSS JOIN LATERAL generate_series(GREATEST(s.lo - ls.base_offset, 0)::integer, (LEAST(s.hi, ls.end_offset) - ls.base_offset)::integer) AS k
)
SELECT i.ord::integer AS ord, c.off FROM items i JOIN cand c ON c.pid = i.pid AND c.lo = i.lo AND c.mid = i.mid
ORDER BY i.ord, c.off`;

// Unresolved items: does the message exist at or below the cursor? (The
// error path: it reads the partition's history below the cursor.)
export const BELOW_HASH_SQL = `SELECT x.ord::integer AS ord
FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS x (pid, c, ord)
WHERE EXISTS (
  SELECT 1 FROM queen.log_txns t CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
  WHERE t.partition_id = x.pid AND t.base_offset <= x.c AND t.base_offset + th.idx <= x.c
    AND th.h = substring($3::bytea FROM (x.ord::integer - 1) * 16 + 1 FOR 16))`;
export const BELOW_ID_SQL = `SELECT x.ord::integer AS ord
FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS x (pid, c, ord)
WHERE EXISTS (
  SELECT 1 FROM queen.log_segments ls CROSS JOIN LATERAL generate_series(0, (ls.end_offset - ls.base_offset)::integer) AS k
  WHERE ls.partition_id = x.pid AND ls.base_offset <= x.c AND ls.base_offset + k <= x.c
    AND substring(ls.blob FROM 6 + 16 * k FOR 16) = substring($3::bytea FROM (x.ord::integer - 1) * 16 + 1 FOR 16))`;

// A dead letter keeps a copy of its frame (decoded by log_read_v1).
export const DEAD_SQL = `INSERT INTO queen.log_dead_letters (partition_id, consumer_group, msg_offset, message_id, transaction_id, trace_context, payload, error, attempts)
SELECT u.pid, u.grp, u.off, r.message_id, r.transaction_id, r.trace_context, r.payload, u.err, u.attempts
FROM jsonb_to_recordset($1::jsonb) AS u (pid bigint, grp text, off bigint, err text, attempts integer)
LEFT JOIN LATERAL queen.log_read_v1(u.pid, u.off, u.off) r ON true`;

export interface SpanTxnsRow {
  pid: string | number;
  lo: string | number;
  hi: string | number;
  base_offset: string | number;
  hashes: Buffer;
}

export const spanKey = (pid: number, lo: number): string => `${pid}:${lo}`;
/**
 * A stored 16-byte hash as a Map key: the 128-bit value (big-endian, as
 * writeHash stores it), so an item's key is hashString's result as is. Half
 * the cost of a latin1 string key built from a Buffer per item.
 */
const hashKey = (h: Buffer, at: number): bigint => (h.readBigUInt64BE(at) << 64n) | h.readBigUInt64BE(at + 8);

/**
 * For each span (partition, lo..hi): transactionId hash -> the span's
 * offsets holding it, ascending (a hash can occur more than once in a span;
 * the lowest open one wins, as the acks header says). Frames of a log_txns
 * row outside the span are left out.
 */
export function spanHashIndex(rows: readonly SpanTxnsRow[]): Map<string, Map<bigint, number[]>> {
  const out = new Map<string, Map<bigint, number[]>>();
  const sorted = [...rows].sort((a, b) => Number(a.base_offset) - Number(b.base_offset));
  for (const row of sorted) {
    const lo = Number(row.lo);
    const hi = Number(row.hi);
    const base = Number(row.base_offset);
    const key = spanKey(Number(row.pid), lo);
    let m = out.get(key);
    if (!m) out.set(key, (m = new Map()));
    const n = Math.floor(row.hashes.length / HASH_BYTES);
    for (let k = Math.max(0, lo - base); k < n && base + k <= hi; k++) {
      const h = hashKey(row.hashes, k * HASH_BYTES);
      const list = m.get(h);
      if (list) list.push(base + k);
      else m.set(h, [base + k]);
    }
  }
  return out;
}

export type AckQuery = (text: string, values: unknown[], what: string) => Promise<pg.QueryResult>;

export const queryOn =
  (client: pg.ClientBase): AckQuery =>
  async (text, values, what) => {
    try {
      return await client.query(text, values);
    } catch (err) {
      throw toDatabaseError(err, what);
    }
  };
