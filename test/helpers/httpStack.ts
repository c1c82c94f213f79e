import pg from 'pg';
import { Queen } from '../../src/client/index.js';
import { LogEngine } from '../../src/engine/logEngine.js';
import { LogWriter } from '../../src/engine/writer.js';
import { Fusion } from '../../src/fusion/fusion.js';
import { HttpApi, type HttpApiOptions } from '../../src/http/server.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { ReadPath } from '../../src/read/readPath.js';
import { createTestDatabase, type TestDatabase } from './db.js';

/**
 * The in-process HTTP service the HTTP and CLI tests run against: a test
 * database, a pg.Pool straight to it for checking with SQL, then
 * MetricsRegistry -> LogEngine -> LogWriter -> Fusion -> HttpApi, and a Queen
 * client for that API.
 */
export interface HttpStack {
  db: TestDatabase;
  /** Straight to the test database (never through engineUrl), for SQL checks. */
  sql: pg.Pool;
  metrics: MetricsRegistry;
  engine: LogEngine;
  writer: LogWriter;
  fusion: Fusion;
  api: HttpApi;
  /** The read side (pop, ack, transaction) behind `api`. */
  read: ReadPath;
  /** A client for `api`, with its token (if any) and `clientRetries`. */
  client: Queen;
  /** Starts one more HttpApi over the same push path, with these options changed; stop() stops it too. */
  addApi(overrides: Partial<Pick<HttpApiOptions, 'authToken' | 'maxBodyBytes' | 'maxItemsPerPush' | 'requestTimeoutMs'>>): Promise<HttpApi>;
  /**
   * Reverse dependency order: stop taking requests (every API, oldest first),
   * drain, close the engine's pool; then, unless they were borrowed through
   * `database`, end the SQL pool and drop the database.
   */
  stop(): Promise<void>;
}

export interface HttpStackOptions {
  /**
   * Run on this database and SQL pool (e.g. another stack's) instead of making
   * them; this stack's stop() then leaves both to their owner.
   */
  database?: { db: TestDatabase; sql: pg.Pool };
  /** Where the engine connects (e.g. a proxy in front of the database). Default: the test database. */
  engineUrl?: string;
  /** The engine's pool size. Default: LogEngine's own. */
  poolSize?: number;
  /** LogWriter's per-item payload limit. Default 1 MiB. */
  maxPayloadBytes?: number;
  /** Fusion's pending + in-flight byte budget. Default 64 MiB. */
  maxInflightBytes?: number;
  /** HttpApi's body limit. Default 1 MiB. */
  maxBodyBytes?: number;
  /** HttpApi's items per push. Default: HttpApi's own. */
  maxItemsPerPush?: number;
  /** A bearer token the API requires and `client` sends. Default: none. */
  authToken?: string;
  /** Retries of `client`. Default: Queen's own. */
  clientRetries?: number;
  /** Fusion's hold before a bundle that is not full flushes. Default 1 ms. */
  holdMs?: number;
  /** ReadPath's long-poll safety re-check. Default: ReadPath's own. */
  readRecheckMs?: number;
}

/** How many messages (frames) the log holds for a queue, over all its partitions, counted with SQL. */
export async function storedFrames(sql: pg.Pool, queue: string): Promise<number> {
  const r = await sql.query(
    `SELECT coalesce(sum(x.end_offset - x.base_offset + 1), 0)::int AS n FROM queen.log_txns x
     JOIN queen.log_partitions lp ON lp.id = x.partition_id JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1`,
    [queue],
  );
  return r.rows[0].n;
}

/** Starts the stack; `label` names the database it makes (unused with `database`). */
export async function startHttpStack(label: string, opts: HttpStackOptions = {}): Promise<HttpStack> {
  const db = opts.database?.db ?? (await createTestDatabase(label));
  const sql = opts.database?.sql ?? new pg.Pool({ connectionString: db.url, max: 2 });
  const metrics = new MetricsRegistry();
  const engine = new LogEngine({ connectionString: opts.engineUrl ?? db.url, metrics, poolSize: opts.poolSize });
  const writer = new LogWriter(engine, { maxPayloadBytes: opts.maxPayloadBytes ?? 1024 * 1024, metadataTtlMs: 0 });
  const fusion = new Fusion(writer, {
    maxItems: 1000,
    maxBytes: 8 << 20,
    holdMs: opts.holdMs ?? 1,
    maxInflightBytes: opts.maxInflightBytes ?? 64 << 20,
    maxConcurrentFlushes: 4,
    metrics,
  });
  const read = new ReadPath(engine, writer, { connectionString: opts.engineUrl ?? db.url, metrics, recheckMs: opts.readRecheckMs });
  const apiOptions: HttpApiOptions = {
    read,
    fusion,
    pool: engine.pool,
    metrics,
    authToken: opts.authToken,
    maxBodyBytes: opts.maxBodyBytes ?? 1 << 20,
    host: '127.0.0.1',
    port: 0,
    maxItemsPerPush: opts.maxItemsPerPush,
  };
  const apis = [new HttpApi(apiOptions)];

  // A component's stop() is safe before start() and on a failed start, so one
  // function serves both teardown and a start that fails half-way. Once only:
  // a pg.Pool cannot be ended twice.
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      for (const api of apis) await api.stop();
      await read.stop();
      await fusion.stop();
      await engine.stop();
      if (!opts.database) {
        await sql.end();
        await db.drop();
      }
    })());
  const addApi = async (overrides: Partial<HttpApiOptions>): Promise<HttpApi> => {
    const api = new HttpApi({ ...apiOptions, ...overrides });
    apis.push(api);
    await api.start();
    return api;
  };

  try {
    await engine.start();
    await fusion.start();
    await read.start();
    await apis[0]!.start();
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
  const api = apis[0]!;
  const client = new Queen({ url: api.url, token: opts.authToken, retries: opts.clientRetries });
  return { db, sql, metrics, engine, writer, fusion, api, read, client, addApi, stop };
}
