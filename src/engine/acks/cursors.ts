import type { AckItem } from './items.js';

/**
 * A consumer group's cursor on one partition, as an ack reads it (CursorRow),
 * decides on it (CursorState) and writes it back (CursorUpdate), and the
 * lease spans through which a broker may know it without reading
 * (LeaseSpan, knownCursors). Pure.
 */

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

export interface CursorState {
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

export interface Dead {
  pid: number;
  group: string;
  offset: number;
  error: string | null;
  attempts: number;
}

export type CursorUpdate = Omit<CursorRow, 'lease_id' | 'retry_limit'>;

export const keyOf = (pid: number, group: string): string => `${pid}\x1f${group}`;

/**
 * The cursors the items' lease spans know, by cursor key; undefined when an
 * item names no partition or no known lease, two items of one cursor know it
 * differently, or a failed ack needs a retry_limit nobody read.
 */
export function knownCursors(items: readonly AckItem[], leaseSpans: LeaseSpanLookup | undefined): Map<string, CursorRow> | undefined {
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
