import pg from 'pg';
import { HASH_BYTES } from '../util/txnHash.js';
import { Component } from '../util/lifecycle.js';
import { MetricsRegistry, type Counter, type Histogram } from '../telemetry/metrics.js';
import { toDatabaseError } from './sqlstate.js';
import { onPoolConnect } from './session.js';
import { Log2Histogram } from '../util/log2Histogram.js';
import { uuidToString } from '../util/uuidv7.js';

/** int8 as JS number: offsets and ids stay far below 2^53. */
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
/** int8[]: the same, element-wise. */
// eslint-disable-next-line @typescript-eslint/no-unsafe-enum-assignment -- OID 1016 (int8[]) is not in pg-types' builtins enum, which lists scalar types only
pg.types.setTypeParser(1016 as number, (v: string) => (v === '{}' ? [] : v.slice(1, -1).split(',').map(Number)));

/**
 * An integer array parameter as its text literal. node-pg serialises a JS
 * array element by element (prepareValue, escapeElement); Array#join does
 * the same in one native call (~0.75 us per named duplicate measured in the
 * run arrays of a 10 %-duplicate push). Integers only: no NULLs, no quoting.
 */
function intArrayLiteral(xs: readonly number[]): string {
  return `{${xs.join(',')}}`;
}

/** An int8/int4 array literal in which NO_BOUND travels as NULL (a looked-up segment's unbounded side). */
function boundedArrayLiteral(xs: readonly number[]): string {
  return `{${xs.map((x) => (x === NO_BOUND ? 'NULL' : String(x))).join(',')}}`;
}

/**
 * One side of the lookup's item spans, over every input's items in order,
 * as an int8[] literal: NULL (the parameter) when no input narrows, and a
 * NULL element for an unbounded side (0 below, Infinity above) or an input
 * without spans.
 */
function itemSpanLiteral(inputs: readonly ItemsToLookUp[], side: 'from' | 'to'): string | null {
  if (!inputs.some((s) => s[side] !== undefined)) return null;
  const parts: string[] = [];
  for (const s of inputs) {
    const xs = s[side];
    if (xs !== undefined && xs.length !== s.count) throw new Error(`lookup input: ${side} has ${xs.length} spans for ${s.count} items`);
    for (let i = 0; i < s.count; i++) {
      const x = xs?.[i];
      parts.push(x === undefined || (side === 'from' ? x <= 0 : x === Infinity) ? 'NULL' : String(x));
    }
  }
  return `{${parts.join(',')}}`;
}

/**
 * int4[] results of the push (dup_idx, refuted_idx), parsed like int8[]
 * above instead of by pg-types' general array parser (character by
 * character): they never hold NULLs. Only for this query, so other queries'
 * int4[] keep the general parser.
 */
const INT4_ARRAY_OID = 1007;
const PUSH_TYPES = {
  getTypeParser(oid: number, format?: 'text' | 'binary'): (v: string) => unknown {
    if (oid === INT4_ARRAY_OID && format !== 'binary') return parseIntArray;
    // eslint-disable-next-line @typescript-eslint/no-unsafe-enum-assignment -- any result OID arrives here; pg-types answers its identity parser for ones its enum does not list
    return pg.types.getTypeParser(oid, format ?? 'text') as (v: string) => unknown;
  },
};
function parseIntArray(v: string): number[] {
  return v === '{}' ? [] : v.slice(1, -1).split(',').map(Number);
}

export interface PartitionInfo {
  queue: string;
  partition: string;
  partitionId: number;
  windowSeconds: number;
}

/** One segment of a bundle: frames for one partition, already packed. */
export interface SegmentInput {
  partitionId: number;
  /** The broker's vouched watermark; -1 = cannot vouch (always sound). */
  verified: number;
  /** The window (seconds) under which `verified` was vouched; a larger current window voids it in SQL. */
  verifiedWindowSeconds: number;
  /** Frames in the blob (appended if the segment is clean); may be 0 when every item is hinted. */
  count: number;
  /** Hinted items after the frames: hashes only, expected to be duplicates at the offsets `runs` name. */
  expected: number;
  /** (count + expected) x 16 bytes: the frames' hashes in frame order, then the hinted items'. */
  hashes: Buffer;
  /** The packed frame blob of the `count` frames (engine/frames.ts). */
  blob: Buffer;
  /** Named occurrences of the hinted items: item..item+len-1 at offset..offset+len-1 (items >= count). */
  runs: readonly HintRun[];
  /**
   * Items to look up in the push's own call first (queen.log_push_looked_v1):
   * `verified` and `verifiedWindowSeconds` are then the entry's vouch, or
   * NO_BOUND where no entry vouches, and SQL sends the segment with
   * min(vouch, the lookup's lastOffset) when the lookup finds nothing, or
   * with -1 (the full probe) when it finds something.
   */
  lookup?: ItemsToLookUp;
}

/** Items to look up: `count` hashes, 16 bytes each, with their spans (see LookupInput). */
export type ItemsToLookUp = Omit<LookupInput, 'partitionId'>;

/** A looked-up segment's vouch or window that no entry bounds: the lookup's alone (NULL in SQL). */
export const NO_BOUND = Number.MAX_SAFE_INTEGER;

export interface HintRun {
  item: number;
  offset: number;
  len: number;
}

export interface DuplicateHit {
  /** Item index within the segment (frames first, then hinted items). */
  index: number;
  /** The original (minimum) offset that holds the same hash. */
  offset: number;
  /** The original message id; NIL_UUID when retention removed its segment. */
  id: string;
}

export interface SegmentOutcome {
  /** First offset of the appended frames, or null when nothing was written. */
  assignedBase: number | null;
  windowSeconds: number;
  /** Whether SQL ran the (tail or full-window) duplicate probe for this segment. */
  probed: boolean;
  /** Stored hashes that probe read (0 when it did not run). */
  probeHashes: number;
  /** Named offsets SQL checked positionally. */
  hintOffsets: number;
  duplicates: DuplicateHit[];
  /** Hinted items that are not duplicates (a stale hint); non-empty only when nothing was written. */
  refuted: number[];
  /** For a segment looked up in the push's call (SegmentInput.lookup): how many occurrences the lookup found. */
  lookupFound?: number;
}

/** Items of one partition to look up (sql/functions/lookup.sql): `count` hashes, 16 bytes each. */
export interface LookupInput {
  partitionId: number;
  count: number;
  hashes: Buffer;
  /**
   * Each item's span of offsets to search, [from[i], to[i]] (absent: the
   * whole window). Only for an item none of whose in-window occurrences at
   * or below the watermark the caller will vouch lies outside it (the
   * lookup's claim, sql/functions/lookup.sql). 0 and Infinity leave a side
   * unbounded.
   */
  from?: readonly number[];
  to?: readonly number[];
}

/** What the lookup found for one partition's items. */
export interface LookupOutcome {
  /**
   * The allocator when the lookup read the partition: every in-window
   * occurrence of an item at or below it is in `found` (the lookup's claim).
   */
  lastOffset: number;
  /** The window the lookup searched (seconds; 0: dedup off, nothing searched). */
  windowSeconds: number;
  /** Offsets of the tail above compacted_upto (searched for the items the runs did not answer): the compactor's trigger, as a probe's hashes are. */
  tailOffsets: number;
  /** The (item index, offset) pairs found, by item then offset: each item's lowest in the runs, or else in the tail. */
  found: { index: number; offset: number }[];
}

export interface LogEngineOptions {
  connectionString?: string;
  pool?: pg.Pool;
  poolSize?: number;
  metrics?: MetricsRegistry;
  /** Per-statement timeout in ms (0 = none). */
  statementTimeoutMs?: number;
}

/** Sizes of probes and hint checks: powers of 4 from 1 to 4 Mi. */
const SIZE_BUCKETS = Array.from({ length: 12 }, (_, i) => 4 ** i);

/** The versioned SQL function every push calls (sql/functions/push.sql): the span attributes name it through this; PUSH_SQL spells it out (no names interpolated into SQL). */
export const PUSH_FUNCTION = 'queen.log_push_v12';
const PUSH_SQL =
  'SELECT seg_index, assigned_base, window_seconds, probed, probe_hashes, hint_offsets, dup_idx, dup_offsets, dup_ids, refuted_idx ' +
  'FROM queen.log_push_v12($1::bigint[], $2::bigint[], $3::integer[], $4::integer[], $5::integer[], $6::bytea, $7::integer[], $8::bytea, $9::integer[], $10::integer[], $11::bigint[], $12::integer[])';
/** The push that first looks up its segments' maybe items, in the same call (sql/functions/push.sql). */
const PUSH_LOOKED_SQL =
  'SELECT seg_index, assigned_base, window_seconds, probed, probe_hashes, hint_offsets, dup_idx, dup_offsets, dup_ids, refuted_idx, ' +
  'lookup_found, lookup_tail, lookup_window ' +
  'FROM queen.log_push_looked_v1($1::bigint[], $2::bigint[], $3::integer[], $4::integer[], $5::integer[], $6::bytea, $7::integer[], $8::bytea, ' +
  '$9::integer[], $10::integer[], $11::bigint[], $12::integer[], $13::integer[], $14::integer[], $15::bytea, $16::bigint[], $17::bigint[])';
/** The push call's span name: its db.query.summary (OpenTelemetry database conventions). */
export const PUSH_SPAN = `SELECT ${PUSH_FUNCTION}`;
/**
 * Most frames in one log_txns row: log_push_v8 (sql/000039) to v11 write a
 * segment's hashes and id copy as rows of at most this many, so every row
 * stays in the heap (000033); the bench's bulk loader writes the same layout.
 * log_push_v12's near lookup for a hinted offset relies on it for speed only:
 * a longer row (older, or loaded otherwise) is found by its far lookup.
 */
export const TXNS_ROW_FRAMES = 250;

/** The lookup the broker runs before a push for the items its dedup filter cannot clear. */
export const LOOKUP_FUNCTION = 'queen.log_lookup_v2';
const LOOKUP_SQL =
  'SELECT seg_index, last_offset, window_seconds, tail_offsets, found_idx, found_offsets ' +
  'FROM queen.log_lookup_v2($1::bigint[], $2::integer[], $3::bytea, $4::bigint[], $5::bigint[])';

const PROVISION_SQL =
  'SELECT queue_name, partition_name, partition_id, dedup_window_seconds FROM queen.log_provision_v1($1::text[], $2::text[])';

/**
 * The SQL side of the log: a pg pool and the prepared statements that call
 * the versioned SQL functions. No Kafka, no HTTP, no caching policy.
 *
 * States: see util/lifecycle.ts. start() connects once to prove the database
 * answers; stop() ends the pool (only if the engine created it).
 */
export class LogEngine extends Component {
  readonly pool: pg.Pool;
  private readonly ownsPool: boolean;
  private readonly pushes: Counter;
  private readonly probesRun: Counter;
  private readonly probesSkipped: Counter;
  private readonly probesHinted: Counter;
  private readonly probeHashes: Histogram;
  private readonly hintOffsets: Histogram;
  private readonly lookups: Counter;
  private readonly lookupItems: Counter;
  private readonly lookupFound: Counter;
  /** Sizes of the checks SQL ran: stored hashes read per probe, offsets checked per hinted segment. */
  readonly probeSizes = { probe: new Log2Histogram(), hinted: new Log2Histogram() };
  private readonly appendListeners = new Set<(partitionIds: readonly number[]) => void>();
  private readonly probeListeners = new Set<(partitionId: number, probeHashes: number) => void>();
  private readonly runReadListeners = new Set<(partitionId: number, items: number) => void>();
  /** Database semantic-convention attributes for spans of calls to this engine (no credentials). */
  readonly spanAttributes: Readonly<Record<string, string | number>>;

  constructor(opts: LogEngineOptions) {
    super('LogEngine');
    if (opts.pool) {
      this.pool = opts.pool;
      this.ownsPool = false;
    } else {
      this.pool = new pg.Pool({
        connectionString: opts.connectionString,
        max: opts.poolSize ?? 10,
        statement_timeout: opts.statementTimeoutMs || undefined,
        application_name: 'queen-ingress',
        onConnect: onPoolConnect,
      });
      this.ownsPool = true;
    }
    // An idle client that loses its connection (database restart) is dropped
    // by the pool; without a listener the 'error' event would crash the process.
    this.pool.on('error', () => undefined);
    // The pool listens only to idle clients. A checked-out client whose
    // connection drops between two queries (a database restart mid-push) emits
    // 'error' with nobody listening, which ended the whole process (found by
    // `make chaos`). Its holder still learns of it: the next query fails and
    // that failure is handled, retried and logged where it is caught.
    this.pool.on('connect', (client) => client.on('error', ignoreCheckedOutClientError));
    const o = this.pool.options as { connectionString?: string; host?: string; port?: number; database?: string };
    let url: URL | undefined;
    try {
      url = o.connectionString ? new URL(o.connectionString) : undefined;
    } catch {
      url = undefined;
    }
    this.spanAttributes = {
      'db.system.name': 'postgresql',
      'db.operation.name': 'SELECT',
      'db.stored_procedure.name': PUSH_FUNCTION,
      'db.query.summary': PUSH_SPAN,
      'db.namespace': (url ? decodeURIComponent(url.pathname.slice(1)) : o.database) || 'postgres',
      'server.address': url?.hostname || o.host || 'localhost',
      'server.port': Number(url?.port) || o.port || 5432,
    };
    const metrics = opts.metrics ?? new MetricsRegistry();
    this.pushes = metrics.counter('queen_segments_total', 'Segments pushed to SQL by outcome', 'outcome');
    this.probesRun = metrics.counter('queen_probe_run_total', 'Segments for which SQL ran the duplicate probe');
    this.probesSkipped = metrics.counter(
      'queen_probe_skipped_total',
      'Segments for which a vouched watermark or window 0 skipped the probe',
    );
    this.probesHinted = metrics.counter('queen_probe_hinted_total', 'Segments whose cache hits SQL checked positionally (hints)');
    this.probeHashes = metrics.histogram('queen_probe_hashes', 'Stored hashes one duplicate probe read (per probed segment)', {
      buckets: SIZE_BUCKETS,
    });
    this.lookups = metrics.counter(
      'queen_lookup_total',
      "Lock-free lookups of items a dedup filter could not clear (one per bundle, apart or in the push's call)",
    );
    this.lookupItems = metrics.counter('queen_lookup_items_total', 'Items looked up for a push (a dedup filter answered "maybe")');
    this.lookupFound = metrics.counter('queen_lookup_found_total', 'Occurrences the lookups found');
    this.hintOffsets = metrics.histogram('queen_probe_hint_offsets', 'Named offsets SQL checked positionally (per hinted segment)', {
      buckets: SIZE_BUCKETS,
    });
  }

  protected async onStart(): Promise<void> {
    try {
      await this.pool.query('SELECT 1');
    } catch (err) {
      throw toDatabaseError(err, 'connecting to PostgreSQL');
    }
  }

  protected async onStop(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }

  /** Provisions unknown queues/partitions (own short transaction) and returns ids and windows. */
  async provision(pairs: readonly { queue: string; partition: string }[]): Promise<PartitionInfo[]> {
    this.assertRunning();
    if (pairs.length === 0) return [];
    try {
      const res = await this.pool.query({
        name: 'queen_log_provision_v1',
        text: PROVISION_SQL,
        values: [pairs.map((p) => p.queue), pairs.map((p) => p.partition)],
      });
      return res.rows.map((r) => ({
        queue: r.queue_name,
        partition: r.partition_name,
        partitionId: r.partition_id,
        windowSeconds: r.dedup_window_seconds,
      }));
    } catch (err) {
      throw toDatabaseError(err, 'provisioning partitions');
    }
  }

  /**
   * Pushes one bundle in one round trip (one transaction). Outcomes are in
   * input order. Segments must name distinct partitions.
   */
  async pushSegments(segments: readonly SegmentInput[], via?: pg.ClientBase): Promise<SegmentOutcome[]> {
    this.assertRunning();
    if (segments.length === 0) return [];
    const hashes = Buffer.concat(segments.map((s) => s.hashes));
    const blobs = Buffer.concat(segments.map((s) => s.blob));
    // Segments whose maybe items are looked up in this call, by index.
    const looked: number[] = [];
    segments.forEach((s, i) => {
      if (s.lookup !== undefined) looked.push(i);
      else if (s.verified === NO_BOUND || s.verifiedWindowSeconds === NO_BOUND) throw new Error('an unbounded vouch needs a lookup');
    });
    const runCounts: number[] = [];
    const runItems: number[] = [];
    const runOffsets: number[] = [];
    const runLens: number[] = [];
    for (const s of segments) {
      if (s.hashes.length !== (s.count + s.expected) * HASH_BYTES) throw new Error('segment hashes do not match its item count');
      runCounts.push(s.runs.length);
      for (const r of s.runs) {
        runItems.push(r.item);
        runOffsets.push(r.offset);
        runLens.push(r.len);
      }
    }
    let res: pg.QueryResult;
    try {
      // `via`: a client inside a transaction the caller opened (/transaction);
      // the caller commits, and announces the append once it has.
      const pushValues = [
        intArrayLiteral(segments.map((s) => s.partitionId)),
        looked.length === 0 ? intArrayLiteral(segments.map((s) => s.verified)) : boundedArrayLiteral(segments.map((s) => s.verified)),
        looked.length === 0
          ? intArrayLiteral(segments.map((s) => s.verifiedWindowSeconds))
          : boundedArrayLiteral(segments.map((s) => s.verifiedWindowSeconds)),
        intArrayLiteral(segments.map((s) => s.count)),
        intArrayLiteral(segments.map((s) => s.expected)),
        hashes,
        intArrayLiteral(segments.map((s) => s.blob.length)),
        blobs,
        intArrayLiteral(runCounts),
        intArrayLiteral(runItems),
        intArrayLiteral(runOffsets),
        intArrayLiteral(runLens),
      ];
      if (looked.length === 0) {
        res = await (via ?? this.pool).query({ name: 'queen_log_push_v12', text: PUSH_SQL, values: pushValues, types: PUSH_TYPES });
      } else {
        const lookups = looked.map((i) => segments[i]!.lookup!);
        res = await (via ?? this.pool).query({
          name: 'queen_log_push_looked_v1',
          text: PUSH_LOOKED_SQL,
          values: [
            ...pushValues,
            intArrayLiteral(looked.map((i) => i + 1)),
            intArrayLiteral(lookups.map((l) => l.count)),
            Buffer.concat(lookups.map((l) => l.hashes)),
            itemSpanLiteral(lookups, 'from'),
            itemSpanLiteral(lookups, 'to'),
          ],
          types: PUSH_TYPES,
        });
      }
    } catch (err) {
      throw toDatabaseError(err, 'pushing a bundle');
    }
    const out: SegmentOutcome[] = new Array(segments.length);
    let lookedItems = 0;
    let lookedFound = 0;
    for (const r of res.rows) {
      const duplicates: DuplicateHit[] = [];
      if (r.dup_idx) {
        const idx = r.dup_idx as number[];
        const offs = r.dup_offsets as number[];
        const ids = r.dup_ids as Buffer;
        for (let i = 0; i < idx.length; i++) duplicates.push({ index: idx[i]!, offset: offs[i]!, id: uuidToString(ids, i * 16) });
      }
      const o: SegmentOutcome = {
        assignedBase: r.assigned_base as number | null,
        windowSeconds: r.window_seconds as number,
        probed: r.probed as boolean,
        probeHashes: r.probe_hashes as number,
        hintOffsets: r.hint_offsets as number,
        duplicates,
        refuted: (r.refuted_idx as number[] | null) ?? [],
      };
      out[r.seg_index as number] = o;
      const seg = segments[r.seg_index as number]!;
      if (seg.lookup !== undefined) {
        // What a lookup of its own reports (LogEngine.lookup), for the items looked up here.
        o.lookupFound = r.lookup_found as number;
        lookedItems += seg.lookup.count;
        lookedFound += o.lookupFound;
        const tail = r.lookup_tail as number;
        if (tail > 0) for (const l of this.probeListeners) l(seg.partitionId, tail);
        if ((r.lookup_window as number) > 0) for (const l of this.runReadListeners) l(seg.partitionId, seg.lookup.count);
      }
      (o.probed ? this.probesRun : this.probesSkipped).inc();
      if (o.probed) {
        this.probeHashes.observe(o.probeHashes);
        this.probeSizes.probe.observe(o.probeHashes);
        if (o.probeHashes > 0) for (const l of this.probeListeners) l(seg.partitionId, o.probeHashes);
        // Nothing vouched (or a looked-up segment whose lookup found something):
        // every frame was searched for in the whole window, runs included.
        const full = seg.verified < 0 || (o.lookupFound ?? 0) > 0;
        if (full && seg.count > 0) for (const l of this.runReadListeners) l(seg.partitionId, seg.count);
      }
      if (o.hintOffsets > 0) {
        this.probesHinted.inc();
        this.hintOffsets.observe(o.hintOffsets);
        this.probeSizes.hinted.observe(o.hintOffsets);
      }
      this.pushes.inc(1, o.assignedBase === null ? (o.refuted.length > 0 ? 'refuted' : 'duplicate') : 'appended');
    }
    if (looked.length > 0) {
      this.lookups.inc();
      this.lookupItems.inc(lookedItems);
      this.lookupFound.inc(lookedFound);
    }
    if (!via) this.announceAppended(segments.filter((_, i) => out[i]!.assignedBase !== null).map((s) => s.partitionId));
    return out;
  }

  /**
   * Looks up items before a push, without any lock (queen.log_lookup_v2):
   * for each partition, the lowest in-window occurrence of each item at or
   * below the returned lastOffset, when it lies in the item's span. Outcomes in input order. A partition whose
   * tail search read stored hashes is reported to the probe listeners, as a
   * probe is (the compactor's trigger).
   */
  async lookup(inputs: readonly LookupInput[]): Promise<LookupOutcome[]> {
    this.assertRunning();
    if (inputs.length === 0) return [];
    let res: pg.QueryResult;
    try {
      res = await this.pool.query({
        name: 'queen_log_lookup_v2',
        text: LOOKUP_SQL,
        values: [
          intArrayLiteral(inputs.map((s) => s.partitionId)),
          intArrayLiteral(inputs.map((s) => s.count)),
          Buffer.concat(inputs.map((s) => s.hashes)),
          itemSpanLiteral(inputs, 'from'),
          itemSpanLiteral(inputs, 'to'),
        ],
        types: PUSH_TYPES,
      });
    } catch (err) {
      throw toDatabaseError(err, 'looking up duplicates');
    }
    this.lookups.inc();
    const out: LookupOutcome[] = new Array(inputs.length);
    let items = 0;
    let found = 0;
    for (const r of res.rows) {
      const i = r.seg_index as number;
      const idx = (r.found_idx as number[] | null) ?? [];
      const offs = (r.found_offsets as number[] | null) ?? [];
      const o: LookupOutcome = {
        lastOffset: r.last_offset as number,
        windowSeconds: r.window_seconds as number,
        tailOffsets: r.tail_offsets as number,
        found: idx.map((index, k) => ({ index, offset: offs[k]! })),
      };
      out[i] = o;
      items += inputs[i]!.count;
      found += idx.length;
      if (o.tailOffsets > 0) for (const l of this.probeListeners) l(inputs[i]!.partitionId, o.tailOffsets);
      if (o.windowSeconds > 0) for (const l of this.runReadListeners) l(inputs[i]!.partitionId, inputs[i]!.count);
    }
    this.lookupItems.inc(items);
    this.lookupFound.inc(found);
    return out;
  }

  /**
   * Registers a listener told each probed segment's partition and how many
   * stored hashes its tail probe read (the compactor's trigger). Called
   * before the push's own result is returned; also for pushes inside a
   * caller's transaction, which is harmless (a compaction step is a request).
   */
  onProbed(listener: (partitionId: number, probeHashes: number) => void): () => void {
    this.probeListeners.add(listener);
    return () => this.probeListeners.delete(listener);
  }

  /**
   * Registers a listener told how many items searched a partition's window
   * whole, its hash runs included: a lookup's items, or the frames of a
   * pushed segment nothing vouched for (the compactor's merge width follows
   * them). Returns the unsubscribe.
   */
  onRunsRead(listener: (partitionId: number, items: number) => void): () => void {
    this.runReadListeners.add(listener);
    return () => this.runReadListeners.delete(listener);
  }

  /**
   * Registers a listener told the partition ids of every committed append
   * (the read path wakes its long polls with it). Returns the unsubscribe.
   */
  onAppended(listener: (partitionIds: readonly number[]) => void): () => void {
    this.appendListeners.add(listener);
    return () => this.appendListeners.delete(listener);
  }

  /** Tells the listeners that appends to these partitions committed. */
  announceAppended(partitionIds: readonly number[]): void {
    if (partitionIds.length === 0) return;
    for (const l of this.appendListeners) l(partitionIds);
  }
}

/** See the constructor: the error reaches the client's holder through its next query. */
const ignoreCheckedOutClientError = (): undefined => undefined;
