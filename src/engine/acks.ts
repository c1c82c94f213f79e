import type pg from 'pg';
import type { Dead, LeaseSpanLookup } from './acks/cursors.js';
import type { AckItem } from './acks/items.js';
import { planAcks, type AckPlan, type AppliedAcks } from './acks/plan.js';
import { CAS_SQL, DEAD_SQL, queryOn, type AckQuery } from './acks/sql.js';

/**
 * Acks: settling leased messages of a consumer group's cursor.
 *
 * applyAcks runs on a client inside a transaction the caller opened (POST
 * /transaction shares one with its pushes; POST /ack opens its own when the
 * optimistic ack gives way). The cursor rows are locked FOR UPDATE in
 * ascending (partition_id, consumer_group), the second level of the global
 * lock order (docs/read-path.md); no log_partitions row is locked here.
 * ackOptimistic (POST /ack first) decides the same way on cursors read
 * without a lock and writes only if none changed (queen.log_ack_cas_v1 in sql/functions/ack.sql), taking the
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

// The ack's parts, one job each: items.ts (what a request says), cursors.ts
// (the cursor state decided on), sql.ts (the statements, the span index),
// plan.ts (resolve and decide, nothing written). This file writes.
export { ACK_STATUSES, checkAckItem, checkGroupName, isUuid, QUEUE_MODE_GROUP } from './acks/items.js';
export type { AckItem, AckOutcome, AckResult, AckStatus } from './acks/items.js';
export type { CursorRow, LeaseSpan, LeaseSpanLookup } from './acks/cursors.js';
export type { AppliedAcks } from './acks/plan.js';
export { spanHashIndex } from './acks/sql.js';

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
 * decision only if every cursor read is still as read (queen.log_ack_cas_v1 in sql/functions/ack.sql). Returns
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

async function writeDead(q: AckQuery, dead: readonly Dead[]): Promise<void> {
  await q(
    DEAD_SQL,
    [JSON.stringify(dead.map((d) => ({ pid: d.pid, grp: d.group, off: d.offset, err: d.error, attempts: d.attempts })))],
    'dead-lettering',
  );
}
