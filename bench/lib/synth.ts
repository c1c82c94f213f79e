import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { packSegment, type Frame } from '../../src/engine/frames.js';
import { TXNS_ROW_FRAMES } from '../../src/engine/logEngine.js';
import type { PushItem } from '../../src/engine/writer.js';
import { HASH_BYTES, hashTransactionId } from '../../src/util/txnHash.js';
import { BinaryCopyWriter } from './copy.js';

/**
 * Deterministic benchmark messages and the bulk loaders that grow a store to
 * a given size without going through the push path.
 *
 * Message (partition p, sequence s) of a factory tagged T has transactionId
 * "T-p-s" and a JSON payload of exactly `payloadBytes` bytes. The engine and
 * the baselines are always given the same messages.
 */

const FILLER = randomBytes(1 << 16)
  .toString('base64')
  .replace(/[+/=]/g, 'x');

export class MessageFactory {
  constructor(
    readonly tag: string,
    readonly payloadBytes: number,
  ) {}

  txnId(pid: number, seq: number): string {
    return `${this.tag}-${pid}-${seq}`;
  }

  payload(pid: number, seq: number): Buffer {
    const head = `{"seq":${seq},"p":${pid},"amount":${(seq % 100_000) / 100},"note":"`;
    const tail = '"}';
    const n = this.payloadBytes - head.length - tail.length;
    if (n < 0) {
      const at = (Math.imul(pid, 2654435761) + Math.imul(seq, 40503)) >>> 0;
      return Buffer.from(
        FILLER.slice(at % (FILLER.length - this.payloadBytes), (at % (FILLER.length - this.payloadBytes)) + this.payloadBytes),
        'latin1',
      );
    }
    const at = ((Math.imul(pid, 2654435761) + Math.imul(seq, 40503)) >>> 0) % (FILLER.length - n);
    return Buffer.from(head + FILLER.slice(at, at + n) + tail, 'latin1');
  }
}

/** A partition as the benchmark tracks it: its id, its name, the next sequence number for new messages. */
export interface PartitionCursor {
  id: number;
  name: string;
  seq: number;
}

/** `count` new messages for each cursor's partition as push items (cursors advance). */
export function makeItems(queue: string, cursors: readonly PartitionCursor[], perPartition: number, f: MessageFactory): PushItem[] {
  const items: PushItem[] = [];
  for (const c of cursors) {
    for (let i = 0; i < perPartition; i++) {
      const s = c.seq++;
      items.push({ queue, partition: c.name, transactionId: f.txnId(c.id, s), payload: f.payload(c.id, s) });
    }
  }
  return items;
}

/**
 * One push of `size` items round-robin over `mine`: each re-sends, with
 * probability `resentShare`, an id of its partition sent before this push
 * (so it must come back duplicate), else a new one (cursors advance).
 * `resent[k]` says which item k is.
 */
export function resentBundle(
  queue: string,
  mine: readonly PartitionCursor[],
  f: MessageFactory,
  random: () => number,
  size: number,
  resentShare: number,
  /** Where in `mine` the round-robin starts (a caller rotating over more partitions than a push holds). */
  start = 0,
): { items: PushItem[]; resent: boolean[] } {
  const items: PushItem[] = [];
  const resent: boolean[] = [];
  const before = mine.map((c) => c.seq);
  for (let k = 0; k < size; k++) {
    const at = (start + k) % mine.length;
    const c = mine[at]!;
    const sent = before[at]!;
    const again = sent > 0 && random() < resentShare;
    const s = again ? Math.floor(random() * sent) : c.seq++;
    items.push({ queue, partition: c.name, transactionId: f.txnId(c.id, s), payload: f.payload(c.id, s) });
    resent.push(again);
  }
  return { items, resent };
}

let idCounter = 0;
const idRandom = randomBytes(6);

/** A UUIDv7-shaped id for synthetic rows (the time part is createdMs). */
function synthId(ms: number, out: Buffer, at: number): void {
  const c = idCounter++ >>> 0;
  out.writeUIntBE(Math.floor(ms), at, 6);
  out[at + 6] = 0x70 | ((c >>> 28) & 0x0f);
  out[at + 7] = (c >>> 20) & 0xff;
  out[at + 8] = 0x80 | ((c >>> 14) & 0x3f);
  out[at + 9] = (c >>> 6) & 0xff;
  out[at + 10] = (c & 0x3f) << 2;
  idRandom.copy(out, at + 11, 0, 5);
}

export interface LoadPlan {
  /** Partitions to grow, with the offset their next message gets in the engine store. */
  partitions: { cursor: PartitionCursor; nextOffset: number }[];
  /** Messages to add to each partition (same order as partitions). */
  counts: number[];
  factory: MessageFactory;
  /** Frames per synthetic segment (the engine store). */
  segFrames: number;
  /** created_at of every loaded row: inside the window, so an unvouched probe must cover them. */
  createdMs: number;
  /** Load the engine store (queen.log_segments + queen.log_txns, allocator advanced). */
  engine: boolean;
  /** Load the unique-index baseline table with the same messages (COPY target given here). */
  baselineCopySql?: string;
  onProgress?: (done: number, total: number) => void;
}

/** Splits n over k partitions as evenly as possible. */
export function spread(n: number, k: number): number[] {
  return Array.from({ length: k }, (_, i) => Math.floor(n / k) + (i < n % k ? 1 : 0));
}

/**
 * Bulk-loads messages with COPY (FORMAT binary), in parallel streams on
 * separate connections: log_segments (blobs packed by engine/frames.ts),
 * log_txns (hashes by util/txnHash.ts, and the ids as v3 pushes write them),
 * and optionally the baseline table.
 * Segments are written round-robin across partitions, as live traffic would
 * interleave them. Then each engine partition's allocator (last_offset) is set
 * to its new last offset, so the store is exactly what pushes would have left
 * (apart from created_at, which is createdMs for every loaded row).
 */
/** Loads `counts[i]` messages created now into partition i of freshly provisioned `cursors` (offsets from 0), as the engine writes them. */
export async function loadInWindow(
  pool: pg.Pool,
  cursors: PartitionCursor[],
  counts: readonly number[],
  factory: MessageFactory,
): Promise<number> {
  return bulkLoad(pool, {
    partitions: cursors.map((cursor) => ({ cursor, nextOffset: 0 })),
    counts: [...counts],
    factory,
    segFrames: 250,
    createdMs: Date.now(),
    engine: true,
  });
}

export async function bulkLoad(pool: pg.Pool, plan: LoadPlan): Promise<number> {
  const total = plan.counts.reduce((a, b) => a + b, 0);
  if (total === 0) return 0;
  const clients: pg.PoolClient[] = [];
  const writers: BinaryCopyWriter[] = [];
  try {
    let seg: BinaryCopyWriter | undefined;
    let txn: BinaryCopyWriter | undefined;
    let base: BinaryCopyWriter | undefined;
    if (plan.engine) {
      const c1 = await pool.connect();
      clients.push(c1);
      seg = new BinaryCopyWriter(
        c1,
        'COPY queen.log_segments (partition_id, base_offset, end_offset, created_at, blob) FROM STDIN (FORMAT binary)',
      );
      const c2 = await pool.connect();
      clients.push(c2);
      txn = new BinaryCopyWriter(
        c2,
        'COPY queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes, ids) FROM STDIN (FORMAT binary)',
      );
      writers.push(seg, txn);
    }
    if (plan.baselineCopySql) {
      const c3 = await pool.connect();
      clients.push(c3);
      base = new BinaryCopyWriter(c3, plan.baselineCopySql);
      writers.push(base);
    }
    const left = [...plan.counts];
    const offsets = plan.partitions.map((p) => p.nextOffset);
    let done = 0;
    let lastReport = 0;
    while (done < total) {
      for (let i = 0; i < plan.partitions.length; i++) {
        const n = Math.min(plan.segFrames, left[i]!);
        if (n === 0) continue;
        const { cursor } = plan.partitions[i]!;
        const frames: Frame[] = new Array(n);
        const hashes = Buffer.allocUnsafe(n * HASH_BYTES);
        const ids = Buffer.allocUnsafe(n * 16);
        for (let j = 0; j < n; j++) {
          const s = cursor.seq++;
          const txnId = plan.factory.txnId(cursor.id, s);
          const payload = plan.factory.payload(cursor.id, s);
          synthId(plan.createdMs, ids, j * 16);
          const id = ids.subarray(j * 16, j * 16 + 16);
          hashTransactionId(txnId, hashes, j * HASH_BYTES);
          frames[j] = {
            ids,
            idAt: j * 16,
            transactionId: txnId,
            transactionIdBytes: Buffer.byteLength(txnId, 'utf8'),
            traceContext: undefined,
            payload,
          };
          if (base) {
            base.row(5);
            base.int8(cursor.id);
            base.bytes(hashes, j * HASH_BYTES, (j + 1) * HASH_BYTES);
            base.bytes(id);
            base.bytes(payload);
            base.timestamptz(plan.createdMs);
          }
        }
        if (seg && txn) {
          const b = offsets[i]!;
          seg.row(5);
          seg.int8(cursor.id);
          seg.int8(b);
          seg.int8(b + n - 1);
          seg.timestamptz(plan.createdMs);
          seg.bytes(packSegment(frames));
          // log_txns rows of at most TXNS_ROW_FRAMES frames, as log_push_v8 and v9 write them.
          for (let k = 0; k < n; k += TXNS_ROW_FRAMES) {
            const m = Math.min(TXNS_ROW_FRAMES, n - k);
            txn.row(6);
            txn.int8(cursor.id);
            txn.int8(b + k);
            txn.int8(b + k + m - 1);
            txn.timestamptz(plan.createdMs);
            txn.bytes(hashes, k * HASH_BYTES, (k + m) * HASH_BYTES);
            txn.bytes(ids, k * 16, (k + m) * 16);
          }
        }
        offsets[i]! += n;
        left[i]! -= n;
        done += n;
      }
      await Promise.all(writers.map((w) => w.ship()));
      if (plan.onProgress && done - lastReport >= Math.max(1, total / 10)) {
        lastReport = done;
        plan.onProgress(done, total);
      }
    }
    await Promise.all(writers.map((w) => w.end()));
    if (plan.engine) {
      await clients[0]!.query(
        // last_write_at as a push sets it (the service warms its cache with
        // the partitions written most recently: src/fusion/cachePrewarm.ts).
        'UPDATE queen.log_partitions lp SET last_offset = x.lo, last_write_at = to_timestamp($3::float8 / 1000) FROM unnest($1::bigint[], $2::bigint[]) AS x (id, lo) WHERE lp.id = x.id',
        [plan.partitions.map((p) => p.cursor.id), offsets.map((o) => o - 1), plan.createdMs],
      );
    }
    plan.partitions.forEach((p, i) => (p.nextOffset = offsets[i]!));
    return total;
  } finally {
    for (const c of clients) c.release();
  }
}

/** Next offset (last_offset + 1) of each partition id. */
export async function nextOffsets(pool: pg.Pool, ids: readonly number[]): Promise<Map<number, number>> {
  const r = await pool.query('SELECT id, last_offset FROM queen.log_partitions WHERE id = ANY($1::bigint[])', [ids]);
  return new Map(r.rows.map((row) => [Number(row.id), Number(row.last_offset) + 1]));
}

/** Total on-disk bytes (heap + TOAST + indexes) of the given relations. */
export async function relationBytes(pool: pg.Pool, relations: readonly string[]): Promise<number> {
  const r = await pool.query('SELECT coalesce(sum(pg_total_relation_size(x::regclass)), 0)::bigint AS b FROM unnest($1::text[]) AS x', [
    relations,
  ]);
  return Number(r.rows[0].b);
}
