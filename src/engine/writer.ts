import { PayloadTooLargeError, ValidationError } from '../errors.js';
import { HASH_BYTES, hashBytes, writeHash } from '../util/txnHash.js';
import { uuidToString, uuidv7Bytes } from '../util/uuidv7.js';
import { packSegment, type Frame } from './frames.js';
import { checkPartitionName, checkQueueName, checkTransactionId, LIMITS } from './limits.js';
import type { LogEngine, SegmentInput, SegmentOutcome } from './logEngine.js';
import { PartitionDirectory } from './partitionDirectory.js';
import { inSpan, SpanKind } from '../telemetry/tracing.js';
import { PUSH_SPAN } from './logEngine.js';

export interface PushItem {
  queue: string;
  /** Defaults to "Default". */
  partition?: string | undefined;
  /** Minted (UUIDv7) when absent; such an item can never be a duplicate. */
  transactionId?: string | undefined;
  payload: Buffer;
  /** W3C trace context (traceparent, optionally ";" tracestate), kept in the frame. */
  traceContext?: string | undefined;
}

export type PushStatus = 'queued' | 'duplicate' | 'failed';

export interface PushResult {
  status: PushStatus;
  /** The message id: the new one when queued, the original one when duplicate. */
  id: string | null;
  transactionId: string | null;
  queue: string;
  partition: string;
  /** The message's offset (the original's when duplicate). */
  offset: number | null;
  error?: string;
}

/** A segment about to be pushed, as the watermark source sees it. */
export interface PendingSegment {
  partitionId: number;
  windowSeconds: number;
  count: number;
  hashes: Buffer;
}

/**
 * Where p_verified comes from (the broker dedup cache implements this). The
 * writer works without one: every segment then probes with -1, which is
 * always exact. A source may only make the exact answer cheaper.
 */
export interface Vouch {
  /** The vouched watermark; -1 = cannot vouch. */
  verified: number;
  /** The window the claim was made under (SQL voids it if the window has grown since). */
  windowSeconds: number;
}

export interface WatermarkSource {
  /** One vouch per segment, same order. */
  beforePush(segments: readonly PendingSegment[]): Promise<Vouch[]>;
  /** SQL answered: report each outcome with the watermark that was sent. */
  afterPush(segments: readonly PendingSegment[], outcomes: readonly SegmentOutcome[]): void;
  /** The push failed; whether it committed is unknown. */
  pushFailed(segments: readonly PendingSegment[]): void;
}

export interface LogWriterOptions {
  maxPayloadBytes: number;
  metadataTtlMs?: number;
  watermarks?: WatermarkSource | undefined;
}

interface Accepted {
  index: number;
  queue: string;
  partition: string;
  transactionId: string;
  txnBytes: Buffer;
  /** xxh3_128 of txnBytes (set when the item is grouped). */
  hash: bigint;
  payload: Buffer;
  trace: Buffer | undefined;
}

interface Leader extends Accepted {
  id: Buffer;
}

interface Group {
  partitionId: number;
  windowSeconds: number;
  leaders: Leader[];
  /** Layer 1: transactionId -> leader, within this partition. */
  byTxn: Map<string, Leader>;
  /** Layer 2: hash -> leader, within this partition (BigInt keys compare by value). */
  byHash: Map<bigint, Leader>;
}

const encodeTxnId = (b: Buffer): string => uuidToString(b);

/** "Cannot vouch": always sound. */
export const NO_VOUCH: Vouch = { verified: -1, windowSeconds: 0 };

/**
 * Turns items into per-partition segments and pushes them as one bundle.
 *
 * Within one call (the seed's layers 1 and 2): the first occurrence of a
 * (queue, partition, transactionId) is the leader; later ones are followers
 * and inherit the leader's final result, including the leader turning out to
 * be a duplicate of something already stored. Layer 1 compares the key
 * string, layer 2 the 16-byte hash, so a local hash collision behaves
 * exactly like a SQL one. Both apply only where the window is > 0.
 *
 * Re-submission rule: a segment with any duplicate writes nothing in SQL.
 * Its remaining (non-duplicate) frames are pushed again, as one new segment
 * per partition, in a follow-up call; this repeats until a call reports no
 * duplicates. Each round removes at least one frame, so it ends, and a
 * duplicate never drops a new message.
 */
export class LogWriter {
  readonly directory: PartitionDirectory;
  private readonly watermarks: WatermarkSource | undefined;

  constructor(
    private readonly engine: LogEngine,
    private readonly opts: LogWriterOptions,
  ) {
    this.directory = new PartitionDirectory(engine, opts.metadataTtlMs ?? 30_000);
    this.watermarks = opts.watermarks;
  }

  /** Validates one item; throws ValidationError naming the field. */
  accept(item: PushItem, index: number): Accepted {
    if (item === null || typeof item !== 'object') throw new ValidationError('item must be an object');
    const queue = checkQueueName(item.queue);
    const partition = checkPartitionName(item.partition);
    const given = checkTransactionId(item.transactionId);
    if (!Buffer.isBuffer(item.payload)) throw new ValidationError('payload must be bytes', 'payload');
    if (item.payload.length > this.opts.maxPayloadBytes) {
      throw new PayloadTooLargeError(`payload is ${item.payload.length} bytes, over the limit of ${this.opts.maxPayloadBytes}`, 'payload');
    }
    let trace: Buffer | undefined;
    if (item.traceContext !== undefined) {
      if (typeof item.traceContext !== 'string') throw new ValidationError('traceContext must be a string', 'traceContext');
      trace = Buffer.from(item.traceContext, 'utf8');
      if (trace.length > LIMITS.traceContextMaxBytes) throw new ValidationError(`traceContext is over ${LIMITS.traceContextMaxBytes} bytes`, 'traceContext');
    }
    const transactionId = given ?? encodeTxnId(uuidv7Bytes());
    return {
      index,
      queue,
      partition,
      transactionId,
      txnBytes: Buffer.from(transactionId, 'utf8'),
      hash: 0n,
      payload: item.payload,
      trace,
    };
  }

  async push(items: readonly PushItem[]): Promise<PushResult[]> {
    const results: PushResult[] = new Array(items.length);
    const accepted: Accepted[] = [];
    items.forEach((item, index) => {
      try {
        accepted.push(this.accept(item, index));
      } catch (err) {
        if (!(err instanceof ValidationError)) throw err;
        results[index] = failed(item, err.message);
      }
    });
    if (accepted.length === 0) return results;

    const infos = await this.directory.resolve(accepted);

    // Layers 1 and 2: leaders per partition, followers pointing at leaders.
    const groups = new Map<number, Group>();
    const followers: [Accepted, Leader][] = [];
    for (const a of accepted) {
      const info = infos.get(PartitionDirectory.key(a.queue, a.partition))!;
      let g = groups.get(info.partitionId);
      if (!g) {
        g = { partitionId: info.partitionId, windowSeconds: info.windowSeconds, leaders: [], byTxn: new Map(), byHash: new Map() };
        groups.set(info.partitionId, g);
      }
      const dedup = g.windowSeconds > 0;
      if (dedup) {
        const l1 = g.byTxn.get(a.transactionId);
        if (l1) {
          followers.push([a, l1]);
          continue;
        }
      }
      a.hash = hashBytes(a.txnBytes);
      if (dedup) {
        const l2 = g.byHash.get(a.hash);
        if (l2) {
          followers.push([a, l2]);
          continue;
        }
      }
      const leader: Leader = Object.assign(a, { id: uuidv7Bytes() });
      if (dedup) {
        g.byTxn.set(a.transactionId, leader);
        g.byHash.set(a.hash, leader);
      }
      g.leaders.push(leader);
    }

    let pending = [...groups.values()];
    while (pending.length > 0) {
      pending = await this.pushRound(pending, results);
    }

    for (const [f, leader] of followers) {
      const lr = results[leader.index]!;
      results[f.index] = {
        status: lr.status === 'failed' ? 'failed' : 'duplicate',
        id: lr.id,
        transactionId: f.transactionId,
        queue: f.queue,
        partition: f.partition,
        offset: lr.offset,
        ...(lr.error ? { error: lr.error } : {}),
      };
    }
    return results;
  }

  /** One SQL round trip; returns the groups that must be re-submitted. */
  private async pushRound(groups: Group[], results: PushResult[]): Promise<Group[]> {
    const pendingSegs: PendingSegment[] = groups.map((g) => {
      const hashes = Buffer.allocUnsafe(g.leaders.length * HASH_BYTES);
      g.leaders.forEach((l, i) => writeHash(l.hash, hashes, i * HASH_BYTES));
      return { partitionId: g.partitionId, windowSeconds: g.windowSeconds, count: g.leaders.length, hashes };
    });
    const vouches = this.watermarks ? await this.watermarks.beforePush(pendingSegs) : pendingSegs.map(() => NO_VOUCH);
    const segments: SegmentInput[] = groups.map((g, i) => ({
      partitionId: g.partitionId,
      verified: vouches[i]!.verified,
      verifiedWindowSeconds: vouches[i]!.windowSeconds,
      count: g.leaders.length,
      hashes: pendingSegs[i]!.hashes,
      blob: packSegment(g.leaders.map(toFrame)),
    }));
    let outcomes: SegmentOutcome[];
    try {
      outcomes = await inSpan(
        PUSH_SPAN,
        { kind: SpanKind.CLIENT, attributes: { ...this.engine.spanAttributes, 'queen.segments': segments.length, 'queen.frames': segments.reduce((n, s) => n + s.count, 0), 'queen.vouched': vouches.filter((v) => v.verified >= 0).length } },
        async (span) => {
          const out = await this.engine.pushSegments(segments);
          const probed = out.filter((o) => o.probed).length;
          span.setAttributes({ 'queen.probes.run': probed, 'queen.probes.skipped': out.length - probed, 'queen.duplicate_segments': out.filter((o) => o.assignedBase === null).length });
          return out;
        },
      );
    } catch (err) {
      this.watermarks?.pushFailed(pendingSegs);
      throw err;
    }
    this.watermarks?.afterPush(pendingSegs, outcomes);

    const again: Group[] = [];
    groups.forEach((g, i) => {
      const o = outcomes[i]!;
      this.directory.noteWindow(g.partitionId, o.windowSeconds);
      if (o.assignedBase !== null) {
        g.leaders.forEach((l, j) => {
          results[l.index] = {
            status: 'queued',
            id: uuidToString(l.id),
            transactionId: l.transactionId,
            queue: l.queue,
            partition: l.partition,
            offset: o.assignedBase! + j,
          };
        });
        return;
      }
      const dupAt = new Map(o.duplicates.map((d) => [d.index, d]));
      const remaining: Leader[] = [];
      g.leaders.forEach((l, j) => {
        const d = dupAt.get(j);
        if (d) {
          results[l.index] = {
            status: 'duplicate',
            id: d.id,
            transactionId: l.transactionId,
            queue: l.queue,
            partition: l.partition,
            offset: d.offset,
          };
        } else {
          remaining.push(l);
        }
      });
      if (remaining.length > 0) again.push({ ...g, windowSeconds: o.windowSeconds, leaders: remaining });
    });
    return again;
  }
}

function toFrame(l: Leader): Frame {
  return { id: l.id, transactionId: l.txnBytes, traceContext: l.trace, payload: l.payload };
}

function failed(item: PushItem, error: string): PushResult {
  const o = (item ?? {}) as Partial<PushItem>;
  return {
    status: 'failed',
    id: null,
    transactionId: typeof o.transactionId === 'string' ? o.transactionId : null,
    queue: typeof o.queue === 'string' ? o.queue : '',
    partition: typeof o.partition === 'string' ? o.partition : LIMITS.defaultPartition,
    offset: null,
    error,
  };
}
