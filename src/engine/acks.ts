import type pg from 'pg';
import { ValidationError } from '../errors.js';
import { HASH_BYTES, hashString, hashTransactionId } from '../util/txnHash.js';
import { toDatabaseError } from './sqlstate.js';

/**
 * Acks: settling leased messages of a consumer group's cursor.
 *
 * applyAcks runs on a client inside a transaction the caller opened (POST
 * /transaction shares one with its pushes; POST /ack opens its own when the
 * optimistic ack gives way). The cursor rows are locked FOR UPDATE in
 * ascending (partition_id, consumer_group), the second level of the global
 * lock order (docs/read-path.md); no log_partitions row is locked here.
 * ackOptimistic (POST /ack first) decides the same way on cursors read
 * without a lock and writes only if none changed (sql/000034), taking the
 * same locks in the same order.
 *
 * Resolution: an item names its message by transactionId (through the
 * log_txns hashes, 16 bytes per frame, which is why log_txns is written even
 * with the dedup window at 0) or by message id (through the segments' id
 * directories), always inside the cursor's leased span (committed, lease_end].
 * When a hash occurs more than once in that span, the lowest open offset wins
 * (a second item with the same transactionId takes the next one). Outside
 * the span: below the cursor answers already_acked, anything else not_found.
 *
 * Settlement: completed and dlq settle the offset; failed counts an attempt
 * and releases it for redelivery, or, past the queue's retry_limit, dead-
 * letters it (settled); retry releases it without counting. The cursor then
 * advances over the contiguous prefix of settled offsets, and the lease ends
 * once every offset of its span is settled or released.
 */

export const ACK_STATUSES = ['completed', 'failed', 'retry', 'dlq'] as const;
export type AckStatus = (typeof ACK_STATUSES)[number];

export interface AckItem {
  consumerGroup: string;
  status: AckStatus;
  partitionId?: number | undefined;
  transactionId?: string | undefined;
  id?: string | undefined;
  leaseId?: string | undefined;
  error?: string | undefined;
}

/** acked / released (failed or retry: will be redelivered) / dead_lettered, or why nothing changed. */
export type AckResult = 'acked' | 'released' | 'dead_lettered' | 'already_acked' | 'not_found' | 'lease_expired';

export interface AckOutcome {
  result: AckResult;
  partitionId: number | null;
  offset: number | null;
  /** Failed acks counted for this message so far (failed only). */
  attempts?: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: unknown): s is string => typeof s === 'string' && UUID.test(s);
const uuidBytes = (s: string): Buffer => Buffer.from(s.replace(/-/g, ''), 'hex');
/** Longest error text kept with a dead letter. */
const MAX_ERROR_CHARS = 4096;

interface CursorState {
  pid: number;
  group: string;
  committed: number;
  settled: Set<number>;
  leaseEnd: number | null;
  leaseId: string | null;
  released: Set<number>;
  retries: Map<number, number>;
  /** null only on a known cursor, and then no item is a failed ack (knownCursors). */
  retryLimit: number | null;
  changed: boolean;
  /** Offsets an earlier item of this ack call already took. */
  taken: Set<number>;
}

interface Dead {
  pid: number;
  group: string;
  offset: number;
  error: string | null;
  attempts: number;
}

const LEASE_KEYS_SQL =
  'SELECT lease_id::text AS lease_id, partition_id, consumer_group FROM queen.log_cursors WHERE lease_id = ANY($1::uuid[])';
const CURSORS_SQL = `SELECT c.partition_id, c.consumer_group, c.committed_offset, c.settled, c.lease_end, c.lease_id::text AS lease_id,
       c.released, c.retry_offsets, c.retry_counts, q.retry_limit
FROM queen.log_cursors c
JOIN queen.log_partitions lp ON lp.id = c.partition_id
JOIN queen.queues q ON q.id = lp.queue_id
WHERE (c.partition_id, c.consumer_group) IN (SELECT * FROM unnest($1::bigint[], $2::text[]))
ORDER BY c.partition_id, c.consumer_group`;
const LOCK_SQL = `${CURSORS_SQL}
FOR UPDATE OF c`;
// The optimistic ack's write: compare-and-set under the cursor locks (sql/000034).
const CAS_SQL = 'SELECT queen.log_ack_cas_v1($1::jsonb, $2::jsonb) AS applied';

// The log_txns rows covering each distinct span, located by the
// (partition_id, end_offset) key from the row holding lo to the row holding
// hi. The broker matches the items' hashes against them (spanHashIndex): in
// SQL, unrolling each row's hash blob into one row per frame and hash-joining
// it cost about 11 ms per 1 000-message ack on this machine, most of an ack's
// database time; the same match in the broker is a Map lookup per item.
const SPAN_TXNS_SQL = `SELECT s.pid, s.lo, s.hi, t.base_offset, t.hashes
FROM (SELECT DISTINCT x.pid, x.lo, x.hi FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS x (pid, lo, hi)) s
JOIN LATERAL (
  SELECT t.base_offset, t.hashes FROM queen.log_txns t
  WHERE t.partition_id = s.pid AND t.end_offset >= s.lo
    AND t.end_offset <= coalesce((SELECT min(y.end_offset) FROM queen.log_txns y WHERE y.partition_id = s.pid AND y.end_offset >= s.hi), s.hi)
) t ON true`;

// The same for message ids, through the id directory of the span's segments.
const BY_ID_SQL = `WITH items AS (
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
const BELOW_HASH_SQL = `SELECT x.ord::integer AS ord
FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS x (pid, c, ord)
WHERE EXISTS (
  SELECT 1 FROM queen.log_txns t CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
  WHERE t.partition_id = x.pid AND t.base_offset <= x.c AND t.base_offset + th.idx <= x.c
    AND th.h = substring($3::bytea FROM (x.ord::integer - 1) * 16 + 1 FOR 16))`;
const BELOW_ID_SQL = `SELECT x.ord::integer AS ord
FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS x (pid, c, ord)
WHERE EXISTS (
  SELECT 1 FROM queen.log_segments ls CROSS JOIN LATERAL generate_series(0, (ls.end_offset - ls.base_offset)::integer) AS k
  WHERE ls.partition_id = x.pid AND ls.base_offset <= x.c AND ls.base_offset + k <= x.c
    AND substring(ls.blob FROM 6 + 16 * k FOR 16) = substring($3::bytea FROM (x.ord::integer - 1) * 16 + 1 FOR 16))`;

// A dead letter keeps a copy of its frame (decoded by log_read_v1).
const DEAD_SQL = `INSERT INTO queen.log_dead_letters (partition_id, consumer_group, msg_offset, message_id, transaction_id, trace_context, payload, error, attempts)
SELECT u.pid, u.grp, u.off, r.message_id, r.transaction_id, r.trace_context, r.payload, u.err, u.attempts
FROM jsonb_to_recordset($1::jsonb) AS u (pid bigint, grp text, off bigint, err text, attempts integer)
LEFT JOIN LATERAL queen.log_read_v1(u.pid, u.off, u.off) r ON true`;

interface SpanTxnsRow {
  pid: string | number;
  lo: string | number;
  hi: string | number;
  base_offset: string | number;
  hashes: Buffer;
}

const spanKey = (pid: number, lo: number): string => `${pid}:${lo}`;
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

/** Checks one wire ack item; throws ValidationError naming the field. */
export function checkAckItem(raw: unknown, defaults: { consumerGroup?: unknown; leaseId?: unknown }, at: string): AckItem {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ValidationError(`${at} must be an object`, at);
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!['transactionId', 'partitionId', 'id', 'leaseId', 'consumerGroup', 'status', 'error'].includes(k)) {
      throw new ValidationError(`${at}: unknown field "${k}"`, `${at}.${k}`);
    }
  }
  const status = o.status ?? 'completed';
  if (typeof status !== 'string' || !(ACK_STATUSES as readonly string[]).includes(status)) {
    throw new ValidationError(`${at}.status must be one of ${ACK_STATUSES.join(', ')}, got ${JSON.stringify(o.status)}`, `${at}.status`);
  }
  const group = o.consumerGroup ?? defaults.consumerGroup ?? QUEUE_MODE_GROUP;
  checkGroupName(group, `${at}.consumerGroup`);
  const leaseId = o.leaseId ?? defaults.leaseId;
  if (leaseId !== undefined && leaseId !== null && !isUuid(leaseId))
    throw new ValidationError(`${at}.leaseId must be a UUID`, `${at}.leaseId`);
  const pid = o.partitionId;
  if (pid !== undefined && pid !== null && !(typeof pid === 'number' && Number.isSafeInteger(pid) && pid > 0)) {
    throw new ValidationError(`${at}.partitionId must be a positive integer`, `${at}.partitionId`);
  }
  const hasTxn = o.transactionId !== undefined && o.transactionId !== null;
  const hasId = o.id !== undefined && o.id !== null;
  if (hasTxn === hasId) throw new ValidationError(`${at}: give either transactionId or id`, at);
  if (hasTxn && (typeof o.transactionId !== 'string' || o.transactionId.length === 0))
    throw new ValidationError(`${at}.transactionId must be a non-empty string`, `${at}.transactionId`);
  if (hasId && !isUuid(o.id)) throw new ValidationError(`${at}.id must be a message id (UUID)`, `${at}.id`);
  if ((pid === undefined || pid === null) && (leaseId === undefined || leaseId === null)) {
    throw new ValidationError(`${at}: give partitionId or leaseId (which partition the message is in)`, `${at}.partitionId`);
  }
  if (o.error !== undefined && o.error !== null && typeof o.error !== 'string')
    throw new ValidationError(`${at}.error must be a string`, `${at}.error`);
  return {
    consumerGroup: group as string,
    status: status as AckStatus,
    partitionId: (pid as number | undefined) ?? undefined,
    transactionId: hasTxn ? (o.transactionId as string) : undefined,
    id: hasId ? (o.id as string) : undefined,
    leaseId: (leaseId as string | undefined) ?? undefined,
    error: typeof o.error === 'string' ? o.error.slice(0, MAX_ERROR_CHARS) : undefined,
  };
}

/** Queue mode: the group used when none is given (as in Queen). */
export const QUEUE_MODE_GROUP = '__QUEUE_MODE__';

export function checkGroupName(g: unknown, field = 'consumerGroup'): string {
  if (typeof g !== 'string' || !/^[A-Za-z0-9._:-]{1,128}$/.test(g))
    throw new ValidationError(`${field} must be 1-128 characters of A-Z a-z 0-9 . _ : -`, field);
  return g;
}

const keyOf = (pid: number, group: string): string => `${pid}\x1f${group}`;

/**
 * The frames a lease was given, as the pop that took it decoded them: every
 * offset of its span (from..to, settled ones included) by transactionId,
 * ascending. Segments never change once written, so this is the content
 * SPAN_TXNS would read back, matched by the exact transactionId instead of
 * its hash. Kept by the broker that popped (src/read/leaseIndex.ts).
 */
export interface LeaseSpan {
  pid: number;
  group: string;
  from: number;
  to: number;
  /** By transactionId: its offset, or its offsets (ascending) when it occurs more than once in the span. */
  offsets: Map<string, number | number[]>;
  /**
   * The lease's cursor as this broker last saw it: set by the pop that took
   * the lease, moved by this broker's optimistic acks. Only ever a guess: an
   * ack decides on it and the compare-and-set writes only if the row still
   * equals it, else the ack reads the row.
   */
  cursor?: CursorRow | undefined;
}

/** A cursor as an ack decides on it (CURSORS_SQL's row). */
export interface CursorRow {
  partition_id: number;
  consumer_group: string;
  committed_offset: number;
  settled: number[];
  lease_end: number | null;
  lease_id: string | null;
  released: number[];
  retry_offsets: number[];
  retry_counts: number[];
  /** The queue's retry_limit; null when not known (only a failed ack reads it, and then the row is read). */
  retry_limit: number | null;
}

/** The broker's lease spans by lease id; undefined = resolve through SQL. */
export type LeaseSpanLookup = (leaseId: string) => LeaseSpan | undefined;

type AckQuery = (text: string, values: unknown[], what: string) => Promise<pg.QueryResult>;

const queryOn =
  (client: pg.ClientBase): AckQuery =>
  async (text, values, what) => {
    try {
      return await client.query(text, values);
    } catch (err) {
      throw toDatabaseError(err, what);
    }
  };

export interface AppliedAcks {
  outcomes: AckOutcome[];
  /**
   * Partitions whose lease this ack ended, by completion or with released
   * offsets. Either way the partition is open to the group's other consumers
   * now (its released offsets, and whatever was appended past the lease while
   * it was held), so long polls on its queue are woken: a waiting pop that
   * only saw it leased would otherwise wait for its re-check interval.
   */
  freedPartitions: number[];
  /** Leases this ack ended. */
  endedLeases: string[];
}

/** What an ack decided, before anything is written. */
interface AckPlan extends AppliedAcks {
  /** Every cursor the decision read, as read (what the optimistic write compares). */
  expected: CursorRow[];
  /** The new state of each changed cursor. */
  updates: CursorUpdate[];
  dead: Dead[];
}

type CursorUpdate = Omit<CursorRow, 'lease_id' | 'retry_limit'>;

/**
 * Applies acks on `client` (inside the caller's transaction). One outcome per
 * item, in order; per-item answers (already_acked, not_found, lease_expired)
 * never fail the batch.
 */
export async function applyAcks(client: pg.ClientBase, items: readonly AckItem[], leaseSpans?: LeaseSpanLookup): Promise<AppliedAcks> {
  const q = queryOn(client);
  const plan = (await planAcks(q, items, leaseSpans, 'lock'))!;
  // The same write as the optimistic ack's. Under the row locks just taken
  // the cursors cannot differ from what was read; the queue's retry_limit is
  // not locked, so it is not compared (a change racing the ack applies from
  // the next one, as it always did).
  if (plan.updates.length > 0) {
    const expected = plan.expected.map((e) => ({ ...e, retry_limit: null }));
    // No lease spans: this transaction may still roll back (/transaction).
    if (!(await compareAndSet(q, { ...plan, expected }, undefined))) throw new Error('acks: a cursor changed under its row lock');
  }
  if (plan.dead.length > 0) await writeDead(q, plan.dead);
  return { outcomes: plan.outcomes, freedPartitions: plan.freedPartitions, endedLeases: plan.endedLeases };
}

/**
 * The same acks in two round trips and no explicit transaction (POST /ack's
 * common case): read the cursors without a lock, decide exactly as
 * applyAcks does, then write with one compare-and-set call that applies the
 * decision only if every cursor read is still as read (sql/000034). Returns
 * why it could not answer instead: a cursor changed in between ('conflict';
 * nothing was written), or the decision dead-letters ('dead_letter': that
 * takes a second statement, so it belongs in a transaction). Either way the
 * caller acks under the lock (applyAcks); the result is the same as if it
 * had done so from the start. `client` must not be inside a transaction.
 */
export async function ackOptimistic(
  client: pg.ClientBase,
  items: readonly AckItem[],
  leaseSpans?: LeaseSpanLookup,
): Promise<AppliedAcks | 'conflict' | 'dead_letter'> {
  const q = queryOn(client);
  // One round trip when this broker knows every cursor from its own pop or
  // its last ack of the lease: the compare-and-set alone. A decision that
  // writes nothing is not taken from a guess (nothing would check it).
  const guessed = await planAcks(q, items, leaseSpans, 'known');
  if (guessed?.dead.length === 0 && guessed.updates.length > 0 && (await compareAndSet(q, guessed, leaseSpans))) {
    return { outcomes: guessed.outcomes, freedPartitions: guessed.freedPartitions, endedLeases: guessed.endedLeases };
  }
  const plan = (await planAcks(q, items, leaseSpans, 'read'))!;
  if (plan.dead.length > 0) return 'dead_letter';
  // Nothing changes (already acked, not found, stale leases): the answers
  // hold at the moment of the read, one consistent snapshot.
  if (plan.updates.length > 0 && !(await compareAndSet(q, plan, leaseSpans))) return 'conflict';
  return { outcomes: plan.outcomes, freedPartitions: plan.freedPartitions, endedLeases: plan.endedLeases };
}

/** The optimistic write; on success, each changed cursor's lease span learns the cursor's new state. */
async function compareAndSet(q: AckQuery, plan: AckPlan, leaseSpans: LeaseSpanLookup | undefined): Promise<boolean> {
  const r = await q(CAS_SQL, [JSON.stringify(plan.expected), JSON.stringify(plan.updates)], 'advancing cursors');
  if (r.rows[0]?.applied !== true) return false;
  if (leaseSpans) {
    for (const u of plan.updates) {
      const before = plan.expected.find((e) => e.partition_id === u.partition_id && e.consumer_group === u.consumer_group);
      const span = before?.lease_id ? leaseSpans(before.lease_id) : undefined;
      if (!before || !span || u.lease_end === null) continue;
      span.cursor = { ...u, lease_id: before.lease_id, retry_limit: before.retry_limit };
    }
  }
  return true;
}

/**
 * Resolves and decides every item against the cursors: read under FOR UPDATE
 * ('lock'), read plainly ('read'), or as the lease spans know them ('known':
 * undefined unless every item names a lease this broker knows the cursor of).
 */
async function planAcks(
  q: AckQuery,
  items: readonly AckItem[],
  leaseSpans: LeaseSpanLookup | undefined,
  source: 'lock' | 'read' | 'known',
): Promise<AckPlan | undefined> {
  const outcomes: AckOutcome[] = new Array(items.length);
  if (items.length === 0) return { outcomes, freedPartitions: [], endedLeases: [], expected: [], updates: [], dead: [] };

  // Items that name only a lease find their cursor through it.
  const leaseOnly = [...new Set(items.filter((i) => i.partitionId === undefined).map((i) => i.leaseId!))];
  const byLease = new Map<string, { pid: number; group: string }>();
  if (leaseOnly.length > 0) {
    for (const r of (await q(LEASE_KEYS_SQL, [leaseOnly], 'finding leases')).rows)
      byLease.set(r.lease_id, { pid: r.partition_id, group: r.consumer_group });
  }
  // Each item's cursor key, and its map key. The items of one request
  // nearly always name one cursor after another in runs (a batch's acks), so
  // a run shares one key object and one key string: a new string per item
  // was built and hashed for every map lookup below.
  const keys: ({ pid: number; group: string } | undefined)[] = new Array(items.length);
  const keyStrings: (string | undefined)[] = new Array(items.length);
  let last: { pid: number; group: string } | undefined;
  let lastString = '';
  items.forEach((it, i) => {
    const k = it.partitionId !== undefined ? { pid: it.partitionId, group: it.consumerGroup } : byLease.get(it.leaseId!);
    if (k === undefined) return;
    if (last?.pid !== k.pid || last.group !== k.group) {
      last = k;
      lastString = keyOf(k.pid, k.group);
    }
    keys[i] = last;
    keyStrings[i] = lastString;
  });

  // Lock the cursors, ascending (partition_id, consumer_group).
  const uniq = new Map<string, { pid: number; group: string }>();
  keys.forEach((k, i) => {
    if (k) uniq.set(keyStrings[i]!, k);
  });
  const sorted = [...uniq.values()].sort((a, b) => a.pid - b.pid || (a.group < b.group ? -1 : a.group > b.group ? 1 : 0));
  const cursors = new Map<string, CursorState>();
  const expected: CursorRow[] = [];
  if (sorted.length > 0) {
    let rows: CursorRow[];
    if (source === 'known') {
      const known = knownCursors(items, leaseSpans);
      if (!known) return undefined;
      rows = sorted.map((k) => known.get(keyOf(k.pid, k.group))!);
    } else {
      const r = await q(
        source === 'lock' ? LOCK_SQL : CURSORS_SQL,
        [sorted.map((k) => k.pid), sorted.map((k) => k.group)],
        'reading cursors',
      );
      rows = r.rows as CursorRow[];
    }
    for (const row of rows) {
      expected.push(row);
      const retryOffsets = row.retry_offsets;
      const retryCounts = row.retry_counts;
      cursors.set(keyOf(row.partition_id, row.consumer_group), {
        pid: row.partition_id,
        group: row.consumer_group,
        committed: row.committed_offset,
        settled: new Set(row.settled),
        leaseEnd: row.lease_end,
        leaseId: row.lease_id,
        released: new Set(row.released),
        retries: new Map(retryOffsets.map((o, i) => [o, retryCounts[i]!])),
        retryLimit: row.retry_limit,
        changed: false,
        taken: new Set(),
      });
    }
  }
  // Each item's cursor, looked up once (a 1 000-item ack asks several times per item).
  const itemCursors = keyStrings.map((k) => (k !== undefined ? cursors.get(k) : undefined));
  const cursorOf = (i: number): CursorState | undefined => itemCursors[i];

  // Resolve inside each cursor's leased span.
  // Per item (by index): the span offsets holding its message, ascending; a
  // number when there is one (nearly always: no array per acked message).
  const candidates: (number | number[] | undefined)[] = new Array(items.length);
  const resolveIn = async (sql: string, pick: (it: AckItem) => Buffer | undefined, what: string): Promise<void> => {
    const idx: number[] = [];
    const bytes: Buffer[] = [];
    items.forEach((it, i) => {
      const c = cursorOf(i);
      const b = pick(it);
      if (!c || !b || c.leaseEnd === null || c.leaseEnd <= c.committed) return;
      idx.push(i);
      bytes.push(b);
    });
    if (idx.length === 0) return;
    const cs = idx.map((i) => cursorOf(i)!);
    const r = await q(sql, [cs.map((c) => c.pid), cs.map((c) => c.committed + 1), cs.map((c) => c.leaseEnd), Buffer.concat(bytes)], what);
    for (const row of r.rows) {
      const i = idx[(row.ord as number) - 1]!;
      const prev = candidates[i];
      const off = row.off as number;
      candidates[i] = prev === undefined ? off : typeof prev === 'number' ? [prev, off] : (prev.push(off), prev);
    }
  };
  // A cursor whose live lease (read under the row lock just taken) is one
  // this broker popped, over the same span end: its items resolve against
  // the pop's decoded frames. The cursor only moves up inside a lease, so
  // (committed, lease_end] is part of the popped span, and the candidates
  // are exactly the span offsets SPAN_TXNS would return, minus the 2^-128
  // chance of two transactionIds sharing a hash.
  const localSpan = (c: CursorState): LeaseSpan | undefined => {
    if (!leaseSpans || c.leaseId === null) return undefined;
    const l = leaseSpans(c.leaseId);
    return l?.pid === c.pid && l.group === c.group && l.to === c.leaseEnd && l.from <= c.committed + 1 ? l : undefined;
  };
  // By transactionId: fetch the spans' log_txns rows, match in the broker.
  const resolveByHash = async (): Promise<void> => {
    const idx: number[] = [];
    // One entry per cursor, not per item: a 1 000-item ack of one lease
    // sends one span, not 1 000 copies of it for SQL to make distinct.
    const spanCursors = new Set<CursorState>();
    const local = new Map<CursorState, LeaseSpan | undefined>();
    items.forEach((it, i) => {
      const c = cursorOf(i);
      if (c && it.transactionId !== undefined && c.leaseEnd !== null && c.leaseEnd > c.committed) {
        if (!local.has(c)) local.set(c, localSpan(c));
        const l = local.get(c);
        if (l) {
          const held = l.offsets.get(it.transactionId);
          if (typeof held === 'number') {
            if (held > c.committed) candidates[i] = held;
          } else if (held !== undefined) {
            const offs = held.filter((o) => o > c.committed);
            if (offs.length > 0) candidates[i] = offs;
          }
          return;
        }
        idx.push(i);
        spanCursors.add(c);
      }
    });
    if (idx.length === 0) return;
    const cs = [...spanCursors];
    const r = await q(
      SPAN_TXNS_SQL,
      [cs.map((c) => c.pid), cs.map((c) => c.committed + 1), cs.map((c) => c.leaseEnd)],
      'resolving acks by transactionId',
    );
    const spans = spanHashIndex(r.rows as SpanTxnsRow[]);
    for (const i of idx) {
      const c = cursorOf(i)!;
      const offs = spans.get(spanKey(c.pid, c.committed + 1))?.get(hashString(items[i]!.transactionId!));
      if (offs) candidates[i] = offs.slice();
    }
  };
  const txnHash = (it: AckItem): Buffer | undefined => (it.transactionId !== undefined ? hashTransactionId(it.transactionId) : undefined);
  const idBytes = (it: AckItem): Buffer | undefined => (it.id !== undefined ? uuidBytes(it.id) : undefined);
  await resolveByHash();
  await resolveIn(BY_ID_SQL, idBytes, 'resolving acks by id');

  // Decide, item by item, in request order.
  const unresolved: number[] = [];
  const dead: Dead[] = [];
  const freedPartitions = new Set<number>();
  items.forEach((it, i) => {
    const c = cursorOf(i);
    if (!c) {
      outcomes[i] = { result: keys[i] ? 'not_found' : 'lease_expired', partitionId: keys[i]?.pid ?? null, offset: null };
      return;
    }
    // The lowest candidate still open (candidates ascend).
    const all = candidates[i];
    const open = (o: number): boolean => o > c.committed && !c.settled.has(o) && !c.taken.has(o);
    let off = -1;
    if (typeof all === 'number') {
      if (open(all)) off = all;
    } else if (all) {
      for (const o of all) {
        if (open(o)) {
          off = o;
          break;
        }
      }
    }
    if (off < 0) {
      // In the span but settled already (or named twice in this batch).
      const first = typeof all === 'number' ? all : all?.[0];
      if (first !== undefined) outcomes[i] = { result: 'already_acked', partitionId: c.pid, offset: first };
      else unresolved.push(i);
      return;
    }
    if (it.leaseId !== undefined && it.leaseId !== c.leaseId) {
      outcomes[i] = { result: 'lease_expired', partitionId: c.pid, offset: off };
      return;
    }
    c.taken.add(off);
    c.changed = true;
    if (it.status === 'completed') {
      c.settled.add(off);
      outcomes[i] = { result: 'acked', partitionId: c.pid, offset: off };
    } else if (it.status === 'dlq') {
      c.settled.add(off);
      dead.push({ pid: c.pid, group: c.group, offset: off, error: it.error ?? null, attempts: c.retries.get(off) ?? 0 });
      outcomes[i] = { result: 'dead_lettered', partitionId: c.pid, offset: off };
    } else if (it.status === 'retry') {
      c.released.add(off);
      outcomes[i] = { result: 'released', partitionId: c.pid, offset: off };
    } else {
      const attempts = (c.retries.get(off) ?? 0) + 1;
      c.retries.set(off, attempts);
      if (c.retryLimit === null) throw new Error('acks: a failed ack was decided without the queue retry_limit');
      if (attempts > c.retryLimit) {
        c.settled.add(off);
        dead.push({ pid: c.pid, group: c.group, offset: off, error: it.error ?? null, attempts });
        outcomes[i] = { result: 'dead_lettered', partitionId: c.pid, offset: off, attempts };
      } else {
        c.released.add(off);
        outcomes[i] = { result: 'released', partitionId: c.pid, offset: off, attempts };
      }
    }
  });

  // Unresolved in the span: below the cursor is already_acked, else not_found.
  const below = async (sql: string, pick: (it: AckItem) => Buffer | undefined, what: string): Promise<void> => {
    const idx = unresolved.filter((i) => pick(items[i]!) !== undefined);
    if (idx.length === 0) return;
    const cs = idx.map((i) => cursorOf(i)!);
    const r = await q(sql, [cs.map((c) => c.pid), cs.map((c) => c.committed), Buffer.concat(idx.map((i) => pick(items[i]!)!))], what);
    const hit = new Set(r.rows.map((row) => idx[(row.ord as number) - 1]!));
    idx.forEach((i, j) => {
      const c = cs[j]!;
      const it = items[i]!;
      // Not below the cursor and not in the live lease: a stale lease id says why.
      const result: AckResult = hit.has(i)
        ? 'already_acked'
        : it.leaseId !== undefined && it.leaseId !== c.leaseId
          ? 'lease_expired'
          : 'not_found';
      outcomes[i] = { result, partitionId: c.pid, offset: null };
    });
  };
  await below(BELOW_HASH_SQL, txnHash, 'checking acks below the cursor');
  await below(BELOW_ID_SQL, idBytes, 'checking acks below the cursor');

  // Advance each changed cursor over its contiguous settled prefix; end a
  // lease whose every offset is settled or released.
  const updates: CursorUpdate[] = [];
  const endedLeases: string[] = [];
  for (const c of cursors.values()) {
    if (!c.changed) continue;
    while (c.settled.has(c.committed + 1)) {
      c.settled.delete(c.committed + 1);
      c.committed++;
    }
    let leaseEnd = c.leaseEnd;
    if (leaseEnd !== null) {
      let open = false;
      for (let o = c.committed + 1; o <= leaseEnd && !open; o++) if (!c.settled.has(o) && !c.released.has(o)) open = true;
      if (!open) {
        freedPartitions.add(c.pid);
        if (c.leaseId !== null) endedLeases.push(c.leaseId);
        leaseEnd = null;
        c.released.clear();
      }
    }
    const retryOffsets = [...c.retries.keys()].filter((o) => o > c.committed).sort((a, b) => a - b);
    updates.push({
      partition_id: c.pid,
      consumer_group: c.group,
      committed_offset: c.committed,
      settled: [...c.settled].filter((o) => o > c.committed).sort((a, b) => a - b),
      released: [...c.released].sort((a, b) => a - b),
      retry_offsets: retryOffsets,
      retry_counts: retryOffsets.map((o) => c.retries.get(o)!),
      lease_end: leaseEnd,
    });
  }
  return { outcomes, freedPartitions: [...freedPartitions], endedLeases, expected, updates, dead };
}

/**
 * The cursors the items' lease spans know, by cursor key; undefined when an
 * item names no partition or no known lease, two items of one cursor know it
 * differently, or a failed ack needs a retry_limit nobody read.
 */
function knownCursors(items: readonly AckItem[], leaseSpans: LeaseSpanLookup | undefined): Map<string, CursorRow> | undefined {
  if (!leaseSpans) return undefined;
  const out = new Map<string, CursorRow>();
  let last: CursorRow | undefined;
  for (const it of items) {
    if (it.partitionId === undefined || it.leaseId === undefined) return undefined;
    const row = leaseSpans(it.leaseId)?.cursor;
    if (row?.partition_id !== it.partitionId || row.consumer_group !== it.consumerGroup) return undefined;
    if (it.status === 'failed' && row.retry_limit === null) return undefined;
    // A run of items on one lease is one row: checked once (planAcks' keys).
    if (row === last) continue;
    last = row;
    const key = keyOf(row.partition_id, row.consumer_group);
    const seen = out.get(key);
    if (seen && seen !== row) return undefined;
    out.set(key, row);
  }
  return out;
}

async function writeDead(q: AckQuery, dead: readonly Dead[]): Promise<void> {
  await q(
    DEAD_SQL,
    [JSON.stringify(dead.map((d) => ({ pid: d.pid, grp: d.group, off: d.offset, err: d.error, attempts: d.attempts })))],
    'dead-lettering',
  );
}
