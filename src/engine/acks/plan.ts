import { hashString, hashTransactionId } from '../../util/txnHash.js';
import {
  keyOf,
  knownCursors,
  type CursorRow,
  type CursorState,
  type CursorUpdate,
  type Dead,
  type LeaseSpan,
  type LeaseSpanLookup,
} from './cursors.js';
import { uuidBytes, type AckItem, type AckOutcome, type AckResult } from './items.js';
import {
  BELOW_HASH_SQL,
  BELOW_ID_SQL,
  BY_ID_SQL,
  CURSORS_SQL,
  LEASE_KEYS_SQL,
  LOCK_SQL,
  SPAN_TXNS_SQL,
  spanHashIndex,
  spanKey,
  type AckQuery,
  type SpanTxnsRow,
} from './sql.js';

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
export interface AckPlan extends AppliedAcks {
  /** Every cursor the decision read, as read (what the optimistic write compares). */
  expected: CursorRow[];
  /** The new state of each changed cursor. */
  updates: CursorUpdate[];
  dead: Dead[];
}

/**
 * Resolves and decides every item against the cursors: read under FOR UPDATE
 * ('lock'), read plainly ('read'), or as the lease spans know them ('known':
 * undefined unless every item names a lease this broker knows the cursor of).
 */
export async function planAcks(
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
