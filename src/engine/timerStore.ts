import type pg from 'pg';
import { NotFoundError, ValidationError } from '../errors.js';
import { HASH_BYTES, hashTransactionId } from '../util/txnHash.js';
import { uuidToString, uuidv7Bytes } from '../util/uuidv7.js';
import { frameOf, packSegment, type Frame } from './frames.js';
import { checkPartitionName, checkQueueName, checkTransactionId, isDotSegment, LIMITS } from './limits.js';
import { toDatabaseError } from './sqlstate.js';

/** The furthest a timer may be scheduled ahead. */
export const TIMER_HORIZON_MS = 90 * 24 * 3600 * 1000;
/** Timer keys: like partition names, UTF-8 without control characters. */
export const TIMER_KEY_MAX_BYTES = 256;

export interface ScheduleInput {
  queue: string;
  partition?: string | undefined;
  key: string;
  /** When it fires (epoch ms). In the past: it fires at the next sweep (docs/timers.md). */
  deliverAtMs: number;
  payload: Buffer;
  transactionId?: string | undefined;
  traceContext?: string | undefined;
}

export interface ScheduleResult {
  status: 'scheduled' | 'rescheduled';
  messageId: string;
  transactionId: string;
}

export interface PendingTimer {
  queue: string;
  key: string;
  partition: string;
  deliverAt: string;
  transactionId: string;
  messageId: string;
  payload: Buffer;
  attempts: number;
  lastError: string | null;
}

export function checkTimerKey(key: unknown): string {
  if (typeof key !== 'string' || key.length === 0) throw new ValidationError('key must be a non-empty string', 'key');
  if (Buffer.byteLength(key, 'utf8') > TIMER_KEY_MAX_BYTES)
    throw new ValidationError(`key must be at most ${TIMER_KEY_MAX_BYTES} UTF-8 bytes`, 'key');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(key)) throw new ValidationError('key must not contain control characters', 'key');
  // The key is a path segment of cancel and peek (/api/v1/timers/:queue/:key),
  // which "." and ".." cannot be (see checkQueueName).
  if (isDotSegment(key)) throw new ValidationError('key must not be "." or ".."', 'key');
  return key;
}

const PROVISION_SQL = 'SELECT partition_id FROM queen.log_provision_v1(ARRAY[$1]::text[], ARRAY[$2]::text[])';
const QUEUE_OF_SQL = 'SELECT queue_id FROM queen.log_partitions WHERE id = $1';
const SCHEDULE_SQL = 'SELECT status, message_id, transaction_id FROM queen.timer_schedule_v1($1, $2, $3, $4, $5, $6, $7, $8, $9)';

/**
 * Schedules (or reschedules) a timer. The queue and partition are
 * provisioned first (own short transaction, like a push), so the fire only
 * ever locks rows that exist. The message id is minted here and promised in
 * the answer; a reschedule keeps the id first promised.
 */
export async function scheduleTimer(pool: pg.Pool, input: ScheduleInput, nowMs = Date.now()): Promise<ScheduleResult> {
  const queue = checkQueueName(input.queue);
  const partition = checkPartitionName(input.partition);
  const key = checkTimerKey(input.key);
  const txn = checkTransactionId(input.transactionId);
  if (!Number.isFinite(input.deliverAtMs)) throw new ValidationError('deliverAt must be a time', 'deliverAt');
  if (input.deliverAtMs - nowMs > TIMER_HORIZON_MS) {
    throw new ValidationError(`a timer may be at most ${TIMER_HORIZON_MS / 86_400_000} days ahead`, 'deliverAt');
  }
  if (input.traceContext !== undefined && Buffer.byteLength(input.traceContext, 'utf8') > LIMITS.traceContextMaxBytes) {
    throw new ValidationError(`traceContext is over ${LIMITS.traceContextMaxBytes} bytes`, 'traceContext');
  }
  const id = uuidToString(uuidv7Bytes());
  try {
    const prov = await pool.query({ name: 'queen_timer_provision', text: PROVISION_SQL, values: [queue, partition] });
    const partitionId = prov.rows[0].partition_id;
    const queueId = (await pool.query({ name: 'queen_timer_queue_of', text: QUEUE_OF_SQL, values: [partitionId] })).rows[0].queue_id;
    const r = await pool.query({
      name: 'queen_timer_schedule_v1',
      text: SCHEDULE_SQL,
      // A timer without a transactionId gets one derived from its promised id, fixed now.
      values: [
        queueId,
        key,
        partitionId,
        new Date(input.deliverAtMs),
        txn ?? null,
        `timer:${id}`,
        id,
        input.payload,
        input.traceContext ?? null,
      ],
    });
    const row = r.rows[0];
    return { status: row.status, messageId: row.message_id, transactionId: row.transaction_id };
  } catch (err) {
    throw toDatabaseError(err, 'scheduling a timer');
  }
}

/** true: the timer was pending and is now cancelled; false ("absent"): it is no longer pending (maybe delivered). */
export async function cancelTimer(pool: pg.Pool, queue: string, key: string): Promise<boolean> {
  checkQueueName(queue);
  checkTimerKey(key);
  try {
    const r = await pool.query('SELECT queen.timer_cancel_v1($1, $2) AS cancelled', [queue, key]);
    return r.rows[0].cancelled === true;
  } catch (err) {
    throw toDatabaseError(err, 'cancelling a timer');
  }
}

export async function peekTimer(pool: pg.Pool, queue: string, key: string): Promise<PendingTimer> {
  checkQueueName(queue);
  checkTimerKey(key);
  let r: pg.QueryResult;
  try {
    r = await pool.query('SELECT * FROM queen.timer_peek_v1($1, $2)', [queue, key]);
  } catch (err) {
    throw toDatabaseError(err, 'reading a timer');
  }
  const row = r.rows[0];
  if (!row) throw new NotFoundError(`no pending timer "${key}" on queue "${queue}" (absent: never scheduled, cancelled, or already fired)`);
  return {
    queue,
    key,
    partition: row.partition,
    deliverAt: (row.deliver_at as Date).toISOString(),
    transactionId: row.transaction_id,
    messageId: row.message_id,
    payload: row.payload,
    attempts: row.attempts,
    lastError: row.last_error,
  };
}

export async function listTimers(pool: pg.Pool, queue: string, limit: number): Promise<Omit<PendingTimer, 'payload' | 'lastError'>[]> {
  checkQueueName(queue);
  try {
    const r = await pool.query('SELECT * FROM queen.timer_list_v1($1, $2)', [queue, limit]);
    return r.rows.map((row) => ({
      queue,
      key: row.timer_key,
      partition: row.partition,
      deliverAt: (row.deliver_at as Date).toISOString(),
      transactionId: row.transaction_id,
      messageId: row.message_id,
      attempts: row.attempts,
    }));
  } catch (err) {
    throw toDatabaseError(err, 'listing timers');
  }
}

/** One timer claimed by a fire (its staging row already deleted in the fire's transaction). */
export interface ClaimedTimer {
  partitionId: number;
  transactionId: string;
  messageId: string;
  payload: Buffer;
  traceContext: string | null;
}

export interface FireOutcome {
  partitionId: number;
  /** First offset of the fired segment. */
  assignedBase: number;
  count: number;
  /** Whether SQL ran the duplicate probe (a fire never should). */
  probed: boolean;
}

const CLAIM_SQL = 'SELECT partition_id, transaction_id, message_id, payload, trace_context FROM queen.timer_claim_v1($1)';
const LOCK_SQL = 'SELECT partition_id, last_offset, window_seconds FROM queen.timer_lock_partitions_v1($1::bigint[])';
// The push every broker path calls (docs/sql-layout.md: one live push version),
// with no hinted items and no runs: a fire carries only new frames.
const PUSH_SQL =
  'SELECT seg_index, assigned_base, probed, dup_idx FROM queen.log_push_v12($1::bigint[], $2::bigint[], $3::integer[], $4::integer[], $5::integer[], $6::bytea, $7::integer[], $8::bytea, $9::integer[], $10::integer[], $11::bigint[], $12::integer[])';

/** Claims (and deletes) up to `limit` due timers, in the caller's open transaction. Ordered by partition id. */
export async function claimDueTimers(client: pg.ClientBase, limit: number): Promise<ClaimedTimer[]> {
  const r = await client.query({ name: 'queen_timer_claim_v1', text: CLAIM_SQL, values: [limit] });
  return r.rows.map((row) => ({
    partitionId: Number(row.partition_id),
    transactionId: row.transaction_id,
    messageId: row.message_id,
    payload: row.payload,
    traceContext: row.trace_context,
  }));
}

/**
 * Appends the claimed timers' frames in the caller's open transaction: locks
 * their partitions in ascending id, then pushes one segment per partition
 * with p_verified = the partition's own allocator watermark, read under that
 * lock, so the push runs no duplicate probe (docs/timers.md). Each frame
 * carries the id and transactionId promised at schedule time.
 */
export async function appendFired(client: pg.ClientBase, claimed: readonly ClaimedTimer[]): Promise<FireOutcome[]> {
  if (claimed.length === 0) return [];
  const byPartition = new Map<number, ClaimedTimer[]>();
  for (const c of claimed) {
    let list = byPartition.get(c.partitionId);
    if (!list) byPartition.set(c.partitionId, (list = []));
    list.push(c);
  }
  const pids = [...byPartition.keys()].sort((a, b) => a - b);
  const locked = await client.query({ name: 'queen_timer_lock_partitions_v1', text: LOCK_SQL, values: [pids] });
  const state = new Map<number, { last: number; window: number }>();
  for (const row of locked.rows) state.set(Number(row.partition_id), { last: Number(row.last_offset), window: row.window_seconds });
  const counts: number[] = [];
  const verified: number[] = [];
  const windows: number[] = [];
  const hashes: Buffer[] = [];
  const blobs: Buffer[] = [];
  for (const pid of pids) {
    const timers = byPartition.get(pid)!;
    const st = state.get(pid);
    if (!st) throw new Error(`timer fire: partition ${pid} vanished`);
    const frames: Frame[] = timers.map((t) =>
      frameOf({
        id: Buffer.from(t.messageId.replace(/-/g, ''), 'hex'),
        transactionId: t.transactionId,
        traceContext: t.traceContext ? Buffer.from(t.traceContext, 'utf8') : undefined,
        payload: t.payload,
      }),
    );
    const h = Buffer.allocUnsafe(timers.length * HASH_BYTES);
    timers.forEach((t, i) => hashTransactionId(t.transactionId, h, i * HASH_BYTES));
    counts.push(timers.length);
    verified.push(st.last);
    windows.push(st.window);
    hashes.push(h);
    blobs.push(packSegment(frames));
  }
  const none = pids.map(() => 0);
  const r = await client.query({
    name: 'queen_timer_push_v11',
    text: PUSH_SQL,
    values: [
      pids,
      verified,
      windows,
      counts,
      none,
      Buffer.concat(hashes),
      blobs.map((b) => b.length),
      Buffer.concat(blobs),
      none,
      [],
      [],
      [],
    ],
  });
  return r.rows.map((row) => {
    const i = row.seg_index as number;
    // With p_verified = the locked watermark the probe cannot run, so nothing can come back as a duplicate.
    if (row.assigned_base === null || row.dup_idx !== null)
      throw new Error(`timer fire: partition ${pids[i]} answered a duplicate without a probe`);
    return { partitionId: pids[i]!, assignedBase: Number(row.assigned_base), count: counts[i]!, probed: row.probed as boolean };
  });
}

export async function recordFireFailure(pool: pg.Pool, messageIds: readonly string[], error: string): Promise<void> {
  await pool.query('SELECT queen.timer_record_failure_v1($1::uuid[], $2)', [messageIds, error]);
}
