import type pg from 'pg';
import { decodeOrigin, unpackSegment, type DecodedFrame, type KafkaOrigin } from './frames.js';
import type { LeaseSpan } from './acks.js';
import { toDatabaseError } from './sqlstate.js';
import { uuidToString } from '../util/uuidv7.js';

/** Where a consumer group starts the first time it pops a queue. */
export type SubscriptionMode = 'all' | 'new' | 'from';

export interface PopRequest {
  queue: string;
  /** A single partition; undefined = any partition of the queue. */
  partition?: string | undefined;
  consumerGroup: string;
  batch: number;
  /** undefined = the queue's lease_seconds. */
  leaseSeconds?: number | undefined;
  subscriptionMode: SubscriptionMode;
  subscriptionFrom?: Date | undefined;
  workerId?: string | undefined;
  autoAck: boolean;
}

/** One delivered message, decoded from its frame. */
export interface PoppedMessage {
  id: string;
  transactionId: string;
  partition: string;
  partitionId: number;
  offset: number;
  createdAt: Date;
  payload: Buffer;
  traceContext: string | undefined;
  /** The Kafka record it came from, when it came from Kafka (frame format v2). */
  kafka?: KafkaOrigin | undefined;
}

export interface PopOutcome {
  /** null with autoAck, or when nothing was leased. */
  leaseId: string | null;
  leaseExpiresAt: Date | null;
  partition: string | null;
  partitionId: number | null;
  messages: PoppedMessage[];
  /** Offsets the cursor skipped because they are below the partition's log_start. */
  skipped: number;
  /** Whether the span was taken over from an expired lease. */
  redelivered: boolean;
  /** Nothing delivered: when the first live lease over pending messages expires (null: none). */
  nextExpiry?: Date | null;
  /**
   * A lease's whole span by transactionId (settled offsets included), when
   * every segment of it was read: acks on this broker resolve against it
   * (applyAcks). Undefined without a lease or when a segment was missing.
   */
  leaseSpan?: LeaseSpan | undefined;
}

export const EMPTY_POP: PopOutcome = {
  leaseId: null,
  leaseExpiresAt: null,
  partition: null,
  partitionId: null,
  messages: [],
  skipped: 0,
  redelivered: false,
};

/**
 * Segment blobs travel as base64 text (encode(..., 'base64')), not as bytea's
 * hex text: node-pg reads every result field as a string, and a hex field is
 * twice the blob's size, built as a string and then parsed digit pair by
 * digit pair (~7 % of a pop+ack drain's broker CPU, profiled). base64 is a
 * third larger than the blob and Node decodes it natively; the newlines
 * PostgreSQL puts every 76 characters are skipped by Buffer.from.
 */
const POP_SQL =
  "SELECT lease_id, lease_expires_at, partition_id, partition_name, span_from, span_to, skipped, redelivered, settled, seg_base, seg_end, seg_created, encode(seg_blob, 'base64') AS seg_blob64 " +
  'FROM queen.log_pop_v3($1, $2, $3, $4::integer, $5::integer, $6, $7::timestamptz, $8, $9::boolean, $10::integer)';
const SEGMENT_SQL =
  "SELECT base_offset, encode(blob, 'base64') AS blob64 FROM queen.log_segments WHERE partition_id = $1 AND base_offset = ANY($2::bigint[])";
const fromBase64 = (v: unknown): Buffer | null => (typeof v === 'string' ? Buffer.from(v, 'base64') : null);

/**
 * A small LRU of decoded segments keyed (partition, base offset). Segments
 * are immutable once written, so a hit is always exact; it spares a pop of a
 * few messages from a segment of thousands the cost of re-reading the whole
 * blob (SQL inlines only segments of at most `inlineMax` frames).
 */
export class SegmentCache {
  private readonly map = new Map<string, { frames: DecodedFrame[]; bytes: number }>();
  private bytes = 0;
  constructor(private readonly capBytes: number) {}

  get(pid: number, base: number): DecodedFrame[] | undefined {
    const k = `${pid}:${base}`;
    const e = this.map.get(k);
    if (!e) return undefined;
    this.map.delete(k);
    this.map.set(k, e);
    return e.frames;
  }

  put(pid: number, base: number, frames: DecodedFrame[], bytes: number): void {
    if (bytes > this.capBytes) return;
    const k = `${pid}:${base}`;
    if (this.map.has(k)) return;
    this.map.set(k, { frames, bytes });
    this.bytes += bytes;
    for (const [key, e] of this.map) {
      if (this.bytes <= this.capBytes) break;
      this.map.delete(key);
      this.bytes -= e.bytes;
    }
  }
}

/**
 * Runs one pop (queen.log_pop_v3, one round trip; a second one only for big
 * segments not in `cache`) and decodes the span's frames. Offsets the cursor
 * already settled out of order are not delivered again.
 *
 * The pop runs alone in its own implicit transaction, never inside a wider
 * one: log_pop_v3 turns synchronous_commit off for a lease-only pop, which
 * would apply to everything else in that transaction (sql/000028).
 */
export async function popOnce(pool: pg.Pool, req: PopRequest, cache: SegmentCache, inlineMax: number): Promise<PopOutcome> {
  let rows: Record<string, unknown>[];
  try {
    const r = await pool.query({
      name: 'queen_log_pop_v3',
      text: POP_SQL,
      values: [
        req.queue,
        req.partition ?? null,
        req.consumerGroup,
        req.batch,
        req.leaseSeconds ?? null,
        req.subscriptionMode,
        req.subscriptionFrom ?? null,
        req.workerId ?? null,
        req.autoAck,
        inlineMax,
      ],
    });
    rows = r.rows;
  } catch (err) {
    throw toDatabaseError(err, 'popping');
  }
  if (rows.length === 0) return EMPTY_POP;
  const head = rows[0]!;
  if (head.partition_id === null) return { ...EMPTY_POP, nextExpiry: head.lease_expires_at as Date };
  const pid = head.partition_id as number;
  const partition = head.partition_name as string;
  const out: PopOutcome = {
    leaseId: (head.lease_id as string | null) ?? null,
    leaseExpiresAt: (head.lease_expires_at as Date | null) ?? null,
    partition,
    partitionId: pid,
    messages: [],
    skipped: head.skipped as number,
    redelivered: head.redelivered === true,
  };
  if (head.seg_base === null) return out;
  const from = head.span_from as number;
  const to = head.span_to as number;
  const settled = new Set(head.settled as number[]);

  const missing = rows.filter((r) => r.seg_blob64 === null && !cache.get(pid, r.seg_base as number)).map((r) => r.seg_base as number);
  const fetched = new Map<number, Buffer>();
  if (missing.length > 0) {
    try {
      const r = await pool.query({ name: 'queen_log_segments_by_base', text: SEGMENT_SQL, values: [pid, missing] });
      for (const row of r.rows) fetched.set(row.base_offset as number, fromBase64(row.blob64)!);
    } catch (err) {
      throw toDatabaseError(err, 'reading segments');
    }
  }
  const spanOffsets = out.leaseId !== null ? new Map<string, number | number[]>() : undefined;
  let complete = true;
  let covered = 0;
  for (const r of rows) {
    const base = r.seg_base as number;
    let frames: DecodedFrame[] | undefined;
    const inline = fromBase64(r.seg_blob64);
    if (inline) frames = unpackSegment(inline);
    else {
      frames = cache.get(pid, base);
      if (!frames) {
        const blob = fetched.get(base);
        // Removed by age-based retention after the pop committed (a lease does
        // not hold retention back). Not delivered; not lost silently either:
        // these offsets cannot be acked, so the cursor stays below them, and
        // the next pop of the partition after this lease ends skips them to
        // log_start and reports them (log_pop_v3, claim 2). Counting them here
        // as well would report them twice.
        if (!blob) {
          complete = false;
          continue;
        }
        frames = unpackSegment(blob);
        cache.put(pid, base, frames, blob.length);
      }
    }
    const createdAt = r.seg_created as Date;
    const lo = Math.max(from, base);
    const hi = Math.min(to, r.seg_end as number);
    covered += Math.max(0, hi - lo + 1);
    for (let off = lo; off <= hi; off++) {
      const f = frames[off - base]!;
      if (spanOffsets) {
        // One number per transactionId; an array only when it recurs in the span.
        const held = spanOffsets.get(f.transactionId);
        if (held === undefined) spanOffsets.set(f.transactionId, off);
        else if (typeof held === 'number') spanOffsets.set(f.transactionId, [held, off]);
        else held.push(off);
      }
      if (settled.has(off)) continue;
      out.messages.push({
        id: uuidToString(f.id),
        transactionId: f.transactionId,
        partition,
        partitionId: pid,
        offset: off,
        createdAt,
        payload: f.payload,
        traceContext: f.traceContext,
        kafka: f.origin && decodeOrigin(f.origin),
      });
    }
  }
  if (spanOffsets && complete && covered === to - from + 1) {
    out.leaseSpan = {
      pid,
      group: req.consumerGroup,
      from,
      to,
      offsets: spanOffsets,
      // What log_pop_v3 just wrote to the cursor, as far as its answer tells:
      // the lease over (from - 1, to], the settled offsets inside the span
      // (any beyond it are not returned) and no released ones. Retries are
      // not returned either: guessed none. A wrong guess only costs the ack
      // its read (acks.ts, ackOptimistic).
      cursor: {
        partition_id: pid,
        consumer_group: req.consumerGroup,
        committed_offset: from - 1,
        settled: head.settled as number[],
        lease_end: to,
        lease_id: out.leaseId,
        released: [],
        retry_offsets: [],
        retry_counts: [],
        retry_limit: null,
      },
    };
  }
  return out;
}
