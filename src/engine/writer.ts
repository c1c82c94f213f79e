// One file (~550 lines), on purpose: it is the push path's one argument.
// pushBundle's steps (validate, lead/follow, resolve windows, rounds of
// plan -> push -> re-submit, followers copy leaders) share the bundle's state
// and the invariants argued on LogWriter below (a segment with a duplicate
// writes nothing; each round removes a frame; a follower gets its leader's
// final verdict). The functions after the class (plan, the hash gathers,
// BundleHashes) serve only that loop. The types it shares with callers are
// at the top; the partition directory, leader table and frames are already
// files of their own.

import type pg from 'pg';
import { BundleNotWrittenError, isRetriable, PayloadTooLargeError, ValidationError } from '../errors.js';
import { HASH_BYTES, hashString, writeHashAt } from '../util/txnHash.js';
import { LeaderTable } from './leaderTable.js';
import { uuidToString, uuidv7Bytes } from '../util/uuidv7.js';
import { originSize, packSegment, type FrameOrigin } from './frames.js';
import { checkPartitionName, checkQueueName, checkTraceContext, checkTransactionId, LIMITS } from './limits.js';
import type { HintRun, ItemsToLookUp, LogEngine, SegmentInput, SegmentOutcome } from './logEngine.js';
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
  /**
   * The Kafka record it came from (topic, partition, offset, timestamp,
   * headers), kept in the frame and returned by pop and browse. Never part of
   * the deduplication key: a re-send with other headers is a duplicate.
   */
  origin?: FrameOrigin | undefined;
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
  /**
   * With a vouch (verified >= 0): each segment item the source holds at or
   * below `verified`, with EVERY offset it holds it at in its vouched range.
   * SQL checks each offset positionally; an item left out is one the source
   * vouches absent at or below `verified`.
   */
  hits?: readonly Hint[];
  /**
   * Items SQL looks up in the push's own call before it probes (the
   * segment's maybe items, hashes picked in item order): `verified` and
   * `windowSeconds` are then the entry's (NO_BOUND where none vouches), and
   * SQL narrows them with the lookup (SegmentInput.lookup).
   */
  lookup?: ItemsToLookUp;
}

/** Item `index` of a pending segment has its hash at each of `offsets`. */
export interface Hint {
  index: number;
  offsets: readonly number[];
}

export interface WatermarkSource {
  /** One vouch per segment, same order. */
  beforePush(segments: readonly PendingSegment[]): Promise<Vouch[]>;
  /**
   * SQL answered. `appended[i]` is the part of segments[i] that was appended
   * (its frames; hinted items never are) when outcomes[i].assignedBase is set.
   */
  afterPush(appended: readonly PendingSegment[], outcomes: readonly SegmentOutcome[]): void;
  /** The push failed; whether it committed is unknown. */
  pushFailed(segments: readonly PendingSegment[]): void;
}

export interface LogWriterOptions {
  maxPayloadBytes: number;
  metadataTtlMs?: number;
  watermarks?: WatermarkSource | undefined;
}

/**
 * A validated item. A leader is also the Frame packSegment writes (frames.ts),
 * so a message is one object from validation to the segment.
 */
interface Accepted {
  index: number;
  queue: string;
  partition: string;
  transactionId: string;
  /** Its UTF-8 length: the frame's transactionId field. */
  transactionIdBytes: number;
  /** Where its hash (xxh3_128 of the UTF-8 transactionId) sits in the bundle's hash words (set when the item is grouped). */
  slot: number;
  payload: Buffer;
  traceContext: Buffer | undefined;
  /** The Kafka origin, checked, and its frame section's size (frames.ts), when the item has one. */
  origin: FrameOrigin | undefined;
  originSize: number;
  /**
   * The message id, minted once the item is known to lead: 16 bytes at idAt
   * of the bundle's one id buffer (undefined for a follower).
   */
  ids: Buffer | undefined;
  idAt: number;
}

interface Leader extends Accepted {
  ids: Buffer;
}

interface Group {
  partitionId: number;
  windowSeconds: number;
  leaders: Leader[];
  /** Layers 1 and 2 apply (window > 0). */
  dedup: boolean;
  /** Offsets SQL refuted for a leader in an earlier round (stale hints): never named again for it. */
  refuted: Map<Leader, Set<number>>;
}

/** One group's segment as sent: frames (appended if clean), then hinted items. */
interface Planned {
  frames: Leader[];
  hinted: Leader[];
  /** For each hinted leader (same order), the offsets named for it. */
  named: (readonly number[])[];
  input: SegmentInput;
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
 * be a duplicate of something already stored. Layer 1 matches the key,
 * layer 2 the 16-byte hash, so a local hash collision behaves exactly like a
 * SQL one. Equal keys have equal hashes, so one lookup by hash (LeaderTable)
 * answers both layers. Both apply only where the window is > 0.
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
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- items come from JSON bodies and JS callers: null or a non-object arrives whatever the type says
    if (item === null || typeof item !== 'object') throw new ValidationError('item must be an object');
    const queue = checkQueueName(item.queue);
    const partition = checkPartitionName(item.partition);
    const given = checkTransactionId(item.transactionId);
    if (!Buffer.isBuffer(item.payload)) throw new ValidationError('payload must be bytes', 'payload');
    if (item.payload.length > this.opts.maxPayloadBytes) {
      throw new PayloadTooLargeError(`payload is ${item.payload.length} bytes, over the limit of ${this.opts.maxPayloadBytes}`, 'payload');
    }
    const trace = checkTraceContext(item.traceContext);
    const origin = item.origin;
    const originBytes = origin === undefined ? 0 : originSize(origin);
    if (originBytes > this.opts.maxPayloadBytes) {
      throw new PayloadTooLargeError(
        `origin (topic and headers) is ${originBytes} bytes, over the limit of ${this.opts.maxPayloadBytes}`,
        'origin',
      );
    }
    const transactionId = given ?? encodeTxnId(uuidv7Bytes());
    return {
      index,
      queue,
      partition,
      transactionId,
      transactionIdBytes: Buffer.byteLength(transactionId, 'utf8'),
      slot: -1,
      payload: item.payload,
      traceContext: trace,
      origin,
      originSize: originBytes,
      ids: undefined,
      idAt: 0,
    };
  }

  /**
   * Pushes the items as one bundle. Per-item problems, expected or not, fail
   * only their item. A non-retriable failure of the bundle before anything
   * committed is thrown as BundleNotWrittenError (the caller may then push
   * the items apart); anything else is thrown as it is.
   *
   * `via`: push on this client, inside a transaction the caller opened and
   * will commit (/transaction). Such a push asks the watermark source nothing
   * and reports nothing to it: its segments probe with -1 (always exact), and
   * the cache later sees their offsets as another writer's gap, which it
   * handles by falling back. Reporting an append that may still roll back
   * would let the cache vouch for offsets it does not know.
   */
  async push(items: readonly PushItem[], via?: pg.ClientBase): Promise<PushResult[]> {
    const state = { committed: false };
    try {
      return await this.pushBundle(items, state, via);
    } catch (err) {
      if (!state.committed && !isRetriable(err) && !(err instanceof BundleNotWrittenError)) throw new BundleNotWrittenError(err);
      throw err;
    }
  }

  private async pushBundle(items: readonly PushItem[], state: { committed: boolean }, via?: pg.ClientBase): Promise<PushResult[]> {
    const results: PushResult[] = new Array(items.length);
    const accepted: Accepted[] = [];
    items.forEach((item, index) => {
      try {
        accepted.push(this.accept(item, index));
      } catch (err) {
        // Defence in depth: even an unexpected failure (a defect) fails this item, not the bundle.
        results[index] = failed(item, err instanceof ValidationError ? err.message : 'internal error: this item could not be validated');
      }
    });
    if (accepted.length === 0) return results;

    const infos = await this.directory.resolveEach(accepted);

    // Layers 1 and 2: leaders per partition, followers pointing at leaders.
    // Every hash goes once into the bundle's hash words (the stored
    // big-endian bytes); segments copy theirs from there.
    const hashes = new BundleHashes(accepted.length);
    // The leaders' message ids, 16 bytes at each leader's slot: one Buffer per bundle, not one per message.
    const ids = Buffer.allocUnsafe(accepted.length * 16);
    // Only where some partition deduplicates (window 0 needs no table).
    let table: LeaderTable | undefined;
    const leaderAt: Leader[] = [];
    const groups = new Map<number, Group>();
    const followers: [Accepted, Leader][] = [];
    for (let i = 0; i < accepted.length; i++) {
      const a = accepted[i]!;
      const info = infos[i];
      if (!info) {
        // Cannot happen for a validated item (the key is what provisioning
        // returned); if it ever does, this item fails alone.
        results[a.index] = failed(items[a.index]!, 'internal error: the partition could not be resolved');
        continue;
      }
      let g = groups.get(info.partitionId);
      if (!g) {
        g = {
          partitionId: info.partitionId,
          windowSeconds: info.windowSeconds,
          leaders: [],
          dedup: info.windowSeconds > 0,
          refuted: new Map(),
        };
        groups.set(info.partitionId, g);
      }
      a.slot = hashes.add(a.transactionId);
      // An earlier item of this partition with the same hash: the same key
      // (layer 1) or a broker-local collision (layer 2, exactly as SQL would
      // see it). Either way this item follows that leader.
      const held = g.dedup ? (table ??= new LeaderTable(hashes.words, accepted.length)).findOrAdd(a.slot, g.partitionId) : -1;
      if (held >= 0) {
        followers.push([a, leaderAt[held]!]);
        continue;
      }
      // Accepted already has the id fields: setting them keeps the object's shape.
      const leader = a as Leader;
      leader.ids = ids;
      leader.idAt = a.slot * 16;
      uuidv7Bytes(ids, leader.idAt);
      leaderAt[a.slot] = leader;
      g.leaders.push(leader);
    }

    let pending = [...groups.values()];
    while (pending.length > 0) {
      pending = await this.pushRound(pending, hashes, results, state, via);
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
  private async pushRound(
    groups: Group[],
    bundleHashes: BundleHashes,
    results: PushResult[],
    state: { committed: boolean },
    via?: pg.ClientBase,
  ): Promise<Group[]> {
    const watermarks = via ? undefined : this.watermarks;
    const pendingSegs: PendingSegment[] = groups.map((g) => ({
      partitionId: g.partitionId,
      windowSeconds: g.windowSeconds,
      count: g.leaders.length,
      hashes: bundleHashes.gather(g.leaders),
    }));
    const vouches = watermarks ? await watermarks.beforePush(pendingSegs) : pendingSegs.map(() => NO_VOUCH);
    const plans = groups.map((g, i) => plan(g, pendingSegs[i]!, vouches[i]!));
    const segments = plans.map((p) => p.input);
    let outcomes: SegmentOutcome[];
    try {
      outcomes = await inSpan(
        PUSH_SPAN,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            ...this.engine.spanAttributes,
            'queen.segments': segments.length,
            'queen.frames': segments.reduce((n, s) => n + s.count, 0),
            'queen.hinted_items': segments.reduce((n, s) => n + s.expected, 0),
            'queen.vouched': vouches.filter((v) => v.verified >= 0).length,
            'queen.looked_up_in_push': segments.filter((s) => s.lookup !== undefined).length,
          },
        },
        async (span) => {
          const out = await this.engine.pushSegments(segments, via);
          // From here on part of the bundle may be stored: never report it as not written.
          state.committed = true;
          const probed = out.filter((o) => o.probed).length;
          span.setAttributes({
            'queen.probes.run': probed,
            'queen.probes.skipped': out.length - probed,
            'queen.probes.hinted': out.filter((o) => o.hintOffsets > 0).length,
            'queen.duplicate_segments': out.filter((o) => o.assignedBase === null).length,
          });
          return out;
        },
      );
    } catch (err) {
      watermarks?.pushFailed(pendingSegs);
      throw err;
    }
    watermarks?.afterPush(
      plans.map((p, i) => ({ ...pendingSegs[i]!, count: p.input.count, hashes: p.input.hashes.subarray(0, p.input.count * HASH_BYTES) })),
      outcomes,
    );

    const again: Group[] = [];
    groups.forEach((g, i) => {
      const o = outcomes[i]!;
      const p = plans[i]!;
      this.directory.noteWindow(g.partitionId, o.windowSeconds);
      const itemAt = (k: number): Leader => (k < p.frames.length ? p.frames[k]! : p.hinted[k - p.frames.length]!);
      for (const d of o.duplicates) {
        const l = itemAt(d.index);
        results[l.index] = {
          status: 'duplicate',
          id: d.id,
          transactionId: l.transactionId,
          queue: l.queue,
          partition: l.partition,
          offset: d.offset,
        };
      }
      if (o.assignedBase !== null) {
        p.frames.forEach((l, j) => {
          results[l.index] = {
            status: 'queued',
            id: uuidToString(l.ids, l.idAt),
            transactionId: l.transactionId,
            queue: l.queue,
            partition: l.partition,
            offset: o.assignedBase! + j,
          };
        });
        return;
      }
      // Nothing was written. A refuted hint is a fact about those offsets
      // (not this hash in the window there) that only ages further, so they
      // are never named again; anything else the cache names next round is.
      for (const k of o.refuted) {
        const l = itemAt(k);
        let set = g.refuted.get(l);
        if (set === undefined) g.refuted.set(l, (set = new Set()));
        for (const off of p.named[k - p.frames.length] ?? []) set.add(off);
      }
      const settled = new Set<Leader>(o.duplicates.map((d) => itemAt(d.index)));
      const remaining = g.leaders.filter((l) => !settled.has(l));
      if (remaining.length > 0) again.push({ ...g, windowSeconds: o.windowSeconds, leaders: remaining });
    });
    return again;
  }
}

/**
 * Splits a group's leaders by the vouch's hints: leaders with named offsets
 * (minus those SQL already refuted for them) become hinted items, the rest
 * frames, each list in leader order. A frame's hash is vouched absent at or
 * below `verified`; a hinted item is expected to be a duplicate and carries
 * its offsets as runs (consecutive items at consecutive offsets, as a replay
 * of a stored segment produces, compress into one run).
 */
function plan(g: Group, seg: PendingSegment, vouch: Vouch): Planned {
  const hits = vouch.verified >= 0 ? vouch.hits : undefined;
  const leaders = g.leaders;
  // Leader index -> its named offsets. The cache hands each hit a fresh
  // array that nothing else keeps, so it is used as it is (a refuted offset
  // filters into a new one).
  let named: (readonly number[] | undefined)[] | undefined;
  if (hits !== undefined && hits.length > 0) {
    const refutedAny = g.refuted.size > 0;
    for (const h of hits) {
      const refuted = refutedAny ? g.refuted.get(leaders[h.index]!) : undefined;
      const offs = refuted === undefined ? h.offsets : h.offsets.filter((o) => !refuted.has(o));
      if (offs.length > 0) (named ??= new Array<readonly number[] | undefined>(leaders.length))[h.index] = offs;
    }
  }
  const base: Omit<SegmentInput, 'count' | 'expected' | 'hashes' | 'blob' | 'runs'> = {
    partitionId: g.partitionId,
    verified: vouch.verified,
    verifiedWindowSeconds: vouch.windowSeconds,
    ...(vouch.lookup === undefined ? {} : { lookup: vouch.lookup }),
  };
  if (named === undefined) {
    return {
      frames: leaders,
      hinted: [],
      named: [],
      input: { ...base, count: leaders.length, expected: 0, hashes: seg.hashes, blob: packSegment(leaders), runs: [] },
    };
  }
  const frames: Leader[] = [];
  const hinted: Leader[] = [];
  const offsetsOf: (readonly number[])[] = [];
  const order = new Int32Array(leaders.length);
  for (let i = 0; i < leaders.length; i++) {
    const offs = named[i];
    if (offs === undefined) frames.push(leaders[i]!);
    else {
      order[i] = -1 - hinted.length;
      hinted.push(leaders[i]!);
      offsetsOf.push(offs);
    }
  }
  // The same hashes, reordered: frames first, then hinted items.
  const hashes = reorderHashes(seg.hashes, order, frames.length);
  const runs: HintRun[] = [];
  offsetsOf.forEach((offs, j) => {
    const item = frames.length + j;
    for (const off of offs) {
      const last = runs[runs.length - 1];
      if (last !== undefined && last.item + last.len === item && last.offset + last.len === off) last.len++;
      else runs.push({ item, offset: off, len: 1 });
    }
  });
  return {
    frames,
    hinted,
    named: offsetsOf,
    input: {
      ...base,
      count: frames.length,
      expected: hinted.length,
      hashes,
      blob: frames.length > 0 ? packSegment(frames) : EMPTY_BLOB,
      runs,
    },
  };
}

/**
 * src's 16-byte records, frames first (in order), then the hinted ones
 * (order[i] = -1 - j puts record i at hinted position j; 0 = a frame).
 */
function reorderHashes(src: Buffer, order: Int32Array, frames: number): Buffer {
  const from = new Int32Array(order.length);
  let f = 0;
  for (let i = 0; i < order.length; i++) {
    const o = order[i]!;
    from[o < 0 ? frames - 1 - o : f++] = i;
  }
  return pickHashes(src, from);
}

/**
 * A new buffer whose record k is src's record from[k] (16 bytes each).
 * Copied as 32-bit words when both are 4-byte aligned (Node's pool hands out
 * 8-byte aligned slices), byte by byte otherwise: a Buffer#copy call per 16
 * bytes cost more than the bytes (one call into C++ per record).
 */
function pickHashes(src: Uint8Array, from: ArrayLike<number>): Buffer {
  const n = from.length;
  const out = Buffer.allocUnsafe(n * HASH_BYTES);
  if (src.byteOffset % 4 === 0 && out.byteOffset % 4 === 0) {
    const sw = new Uint32Array(src.buffer, src.byteOffset, src.byteLength >>> 2);
    const ow = new Uint32Array(out.buffer, out.byteOffset, n * WORDS_PER_HASH);
    for (let k = 0; k < n; k++) {
      const a = from[k]! * WORDS_PER_HASH;
      const b = k * WORDS_PER_HASH;
      ow[b] = sw[a]!;
      ow[b + 1] = sw[a + 1]!;
      ow[b + 2] = sw[a + 2]!;
      ow[b + 3] = sw[a + 3]!;
    }
  } else {
    for (let k = 0; k < n; k++) {
      const a = from[k]! * HASH_BYTES;
      for (let b = 0; b < HASH_BYTES; b++) out[k * HASH_BYTES + b] = src[a + b]!;
    }
  }
  return out;
}

const EMPTY_BLOB = Buffer.alloc(0);

const WORDS_PER_HASH = HASH_BYTES / 4;

/**
 * A bundle's hashes, one 16-byte slot per grouped item in grouping order:
 * hashed once, compared by LeaderTable through `words`, gathered per segment.
 * Its own ArrayBuffer (offset 0), so the word view is always aligned.
 */
class BundleHashes {
  readonly words: Uint32Array;
  private readonly bytes: Uint8Array;
  private readonly view: DataView;
  private n = 0;

  constructor(capacity: number) {
    const buf = new ArrayBuffer(Math.max(1, capacity) * HASH_BYTES);
    this.words = new Uint32Array(buf);
    this.bytes = new Uint8Array(buf);
    this.view = new DataView(buf);
  }

  /** Hashes the transactionId (xxh3_128 of its UTF-8 bytes) into the next slot; returns the slot. */
  add(transactionId: string): number {
    const k = this.n++;
    writeHashAt(this.view, k * HASH_BYTES, hashString(transactionId));
    return k;
  }

  /** The leaders' hashes, in their order, as one segment's hash bytes. */
  gather(leaders: readonly Leader[]): Buffer {
    const from = new Int32Array(leaders.length);
    for (let i = 0; i < leaders.length; i++) from[i] = leaders[i]!.slot;
    return pickHashes(this.bytes, from);
  }
}

function failed(item: PushItem, error: string): PushResult {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- called for items that failed validation, which may be null
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
