import pg from 'pg';
import { HASH_BYTES } from '../util/txnHash.js';
import { Component } from '../util/lifecycle.js';
import { MetricsRegistry, type Counter } from '../telemetry/metrics.js';
import { toDatabaseError } from './sqlstate.js';

/** int8 as JS number: offsets and ids stay far below 2^53. */
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
/** int8[]: the same, element-wise. */
pg.types.setTypeParser(1016 as number, (v: string) => (v === '{}' ? [] : v.slice(1, -1).split(',').map(Number)));

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
  count: number;
  /** count x 16 bytes, frame order. */
  hashes: Buffer;
  /** The packed frame blob (engine/frames.ts). */
  blob: Buffer;
}

export interface DuplicateHit {
  /** Frame index within the segment. */
  index: number;
  /** The original (minimum) offset that holds the same hash. */
  offset: number;
  /** The original message id; NIL_UUID when retention removed its segment. */
  id: string;
}

export interface SegmentOutcome {
  /** First offset of the appended segment, or null when it had duplicates (nothing written). */
  assignedBase: number | null;
  windowSeconds: number;
  /** Whether SQL ran the duplicate probe for this segment. */
  probed: boolean;
  duplicates: DuplicateHit[];
}

export interface LogEngineOptions {
  connectionString?: string;
  pool?: pg.Pool;
  poolSize?: number;
  metrics?: MetricsRegistry;
  /** Per-statement timeout in ms (0 = none). */
  statementTimeoutMs?: number;
}

const PUSH_SQL = 'SELECT seg_index, assigned_base, window_seconds, probed, dup_idx, dup_offsets, dup_ids FROM queen.log_push_v1($1::bigint[], $2::bigint[], $3::integer[], $4::integer[], $5::bytea, $6::integer[], $7::bytea)';
/** The push call's span name: its db.query.summary (OpenTelemetry database conventions). */
export const PUSH_SPAN = 'SELECT queen.log_push_v1';

const PROVISION_SQL = 'SELECT queue_name, partition_name, partition_id, dedup_window_seconds FROM queen.log_provision_v1($1::text[], $2::text[])';

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
      });
      this.ownsPool = true;
    }
    // An idle client that loses its connection (database restart) is dropped
    // by the pool; without a listener the 'error' event would crash the process.
    this.pool.on('error', () => undefined);
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
      'db.stored_procedure.name': 'queen.log_push_v1',
      'db.query.summary': PUSH_SPAN,
      'db.namespace': (url ? decodeURIComponent(url.pathname.slice(1)) : o.database) || 'postgres',
      'server.address': url?.hostname || o.host || 'localhost',
      'server.port': Number(url?.port) || o.port || 5432,
    };
    const metrics = opts.metrics ?? new MetricsRegistry();
    this.pushes = metrics.counter('queen_segments_total', 'Segments pushed to SQL by outcome', 'outcome');
    this.probesRun = metrics.counter('queen_probe_run_total', 'Segments for which SQL ran the duplicate probe');
    this.probesSkipped = metrics.counter('queen_probe_skipped_total', 'Segments for which a vouched watermark or window 0 skipped the probe');
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
  async pushSegments(segments: readonly SegmentInput[]): Promise<SegmentOutcome[]> {
    this.assertRunning();
    if (segments.length === 0) return [];
    const hashes = Buffer.concat(segments.map((s) => s.hashes));
    const blobs = Buffer.concat(segments.map((s) => s.blob));
    for (const s of segments) {
      if (s.hashes.length !== s.count * HASH_BYTES) throw new Error('segment hashes do not match its frame count');
    }
    let res: pg.QueryResult;
    try {
      res = await this.pool.query({
        name: 'queen_log_push_v1',
        text: PUSH_SQL,
        values: [
          segments.map((s) => s.partitionId),
          segments.map((s) => s.verified),
          segments.map((s) => s.verifiedWindowSeconds),
          segments.map((s) => s.count),
          hashes,
          segments.map((s) => s.blob.length),
          blobs,
        ],
      });
    } catch (err) {
      throw toDatabaseError(err, 'pushing a bundle');
    }
    const out: SegmentOutcome[] = new Array(segments.length);
    for (const r of res.rows) {
      const duplicates: DuplicateHit[] = [];
      if (r.dup_idx) {
        const idx = r.dup_idx as number[];
        const offs = r.dup_offsets as number[];
        const ids = r.dup_ids as string[];
        for (let i = 0; i < idx.length; i++) duplicates.push({ index: idx[i]!, offset: offs[i]!, id: ids[i]! });
      }
      out[r.seg_index as number] = {
        assignedBase: r.assigned_base as number | null,
        windowSeconds: r.window_seconds as number,
        probed: r.probed as boolean,
        duplicates,
      };
      (r.probed ? this.probesRun : this.probesSkipped).inc();
      this.pushes.inc(1, r.assigned_base === null ? 'duplicate' : 'appended');
    }
    return out;
  }
}
