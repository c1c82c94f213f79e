import anyTest, { type TestFn } from 'ava';
import fc from 'fast-check';
import pg from 'pg';
import { CompactTier } from '../../src/dedup/compactTier.js';
import { DedupCache } from '../../src/dedup/index.js';
import { HASH_BYTES } from '../../src/dedup/constants.js';
import { LogEngine, type SegmentOutcome } from '../../src/engine/logEngine.js';
import {
  LogWriter,
  NO_VOUCH,
  type Hint,
  type PendingSegment,
  type PushItem,
  type PushResult,
  type Vouch,
  type WatermarkSource,
} from '../../src/engine/writer.js';
import { CacheWatermarks } from '../../src/fusion/cacheWatermarks.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { NIL_UUID } from '../../src/util/uuidv7.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * The compact tier's candidate names through the push's hint interface (log_push_v12 keeps v11's)
 * as it is (exact offsets per item), against real PostgreSQL.
 *
 * First test: the tier alone, with fingerprints narrowed (the cache gives
 * no hook for that). This test's watermark source plays the cache's part
 * for partitions only it writes: it knows every hash from
 * offset 0 (H = -1) up to the last offset it saw appended (V), and names,
 * for every item, every candidate offset the tier gives. False candidates
 * are forced (fingerprints narrowed to a few values): each makes SQL refute
 * the name, the writer re-submits, and the item is then stored as new. The
 * property: verdicts equal those of a broker that always sends -1.
 *
 * Second test: the cache itself (CacheWatermarks) with the compact tier on,
 * at a cap where only compact entries hold the partitions; same property.
 */

interface Ctx {
  db: TestDatabase;
  sql: pg.Pool;
  engines: LogEngine[];
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const db = await createTestDatabase('compacthints');
  t.context = { db, sql: new pg.Pool({ connectionString: db.url, max: 2 }), engines: [] };
});
teardownAndCheckLeaks(test, async (t) => {
  await Promise.all(t.context.engines.map((e) => e.stop()));
  await t.context.sql?.end();
  await t.context.db?.drop();
});

/** Per partition: the tier, and V (-1 until the first append seen; undefined once it cannot vouch). */
class CompactSource implements WatermarkSource {
  readonly parts = new Map<number, { tier: CompactTier; verified: number | undefined }>();
  names = 0;
  vouched = 0;

  constructor(private readonly fingerprintValues: number) {}

  private part(pid: number): { tier: CompactTier; verified: number | undefined } {
    let p = this.parts.get(pid);
    if (p === undefined) {
      // A partition first seen here is new and empty: only this broker writes it.
      p = { tier: new CompactTier({ fingerprintValues: this.fingerprintValues, maxGenEntries: 300 }), verified: -1 };
      this.parts.set(pid, p);
    }
    return p;
  }

  beforePush(segments: readonly PendingSegment[]): Promise<Vouch[]> {
    return Promise.resolve(
      segments.map((s) => {
        const p = this.part(s.partitionId);
        if (p.verified === undefined || p.verified < 0 || !(s.windowSeconds > 0)) return NO_VOUCH;
        const hits: Hint[] = [];
        for (let i = 0; i < s.count; i++) {
          const at = i * HASH_BYTES;
          const out: number[] = [];
          p.tier.collect(
            s.hashes.readUInt32BE(at),
            s.hashes.readUInt32BE(at + 4),
            s.hashes.readUInt32BE(at + 8),
            s.hashes.readUInt32BE(at + 12),
            out,
          );
          if (out.length === 0) continue;
          const offsets = [...new Set(out)].sort((a, b) => a - b);
          this.names += offsets.length;
          hits.push({ index: i, offsets });
        }
        this.vouched++;
        return { verified: p.verified, windowSeconds: s.windowSeconds, hits };
      }),
    );
  }

  afterPush(appended: readonly PendingSegment[], outcomes: readonly SegmentOutcome[]): void {
    appended.forEach((s, i) => {
      const base = outcomes[i]!.assignedBase;
      if (base === null) return;
      const p = this.part(s.partitionId);
      if (p.verified === undefined) return;
      if (base !== p.verified + 1) {
        p.verified = undefined; // someone else wrote: never vouch again
        return;
      }
      for (let k = 0; k < s.count; k++) {
        const at = k * HASH_BYTES;
        p.tier.append(
          s.hashes.readUInt32BE(at),
          s.hashes.readUInt32BE(at + 4),
          s.hashes.readUInt32BE(at + 8),
          s.hashes.readUInt32BE(at + 12),
          base + k,
        );
      }
      p.verified = base + s.count - 1;
    });
  }

  pushFailed(segments: readonly PendingSegment[]): void {
    for (const s of segments) this.part(s.partitionId).verified = undefined;
  }
}

async function writerWith(
  t: { context: Ctx },
  source: WatermarkSource | undefined,
): Promise<{ writer: LogWriter; metrics: MetricsRegistry }> {
  const metrics = new MetricsRegistry();
  const engine = new LogEngine({ connectionString: t.context.db.url, poolSize: 2, metrics });
  await engine.start();
  t.context.engines.push(engine);
  return { writer: new LogWriter(engine, { maxPayloadBytes: 1024, metadataTtlMs: 0, watermarks: source }), metrics };
}

const item = (queue: string, partition: string, txn: string): PushItem => ({
  queue,
  partition,
  transactionId: txn,
  payload: Buffer.from('{}'),
});
const verdicts = (rs: PushResult[]): string[] => rs.map((r) => `${r.status}@${r.offset}${r.id === NIL_UUID ? '/gone' : ''}`);

test.serial(
  'compact tier names through the hint interface of log_push_v12 (as v11 had it): verdicts equal -1 verdicts on random histories, with false candidates forced',
  async (t) => {
    const source = new CompactSource(3);
    const compact = await writerWith(t, source);
    const plain = await writerWith(t, undefined);
    let round = 0;
    let pushes = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.record({
              kind: fc.constant('push' as const),
              txns: fc.array(fc.integer({ min: 0, max: 60 }), { minLength: 1, maxLength: 12 }),
              part: fc.integer({ min: 0, max: 1 }),
            }),
            // dedup off for a while: one hash gets stored at several offsets
            fc.record({ kind: fc.constant('window' as const), seconds: fc.constantFrom(0, 3600) }),
            // time passes in SQL: every stored row 2 hours older (out of the window; the tier still names them)
            fc.record({ kind: fc.constant('age' as const) }),
          ),
          { minLength: 4, maxLength: 30 },
        ),
        async (ops) => {
          round++;
          const qa = `cta${round}`;
          const qb = `ctb${round}`;
          for (const op of ops) {
            if (op.kind === 'push') {
              const a = await compact.writer.push(op.txns.map((x) => item(qa, `p${op.part}`, `t${x}`)));
              const b = await plain.writer.push(op.txns.map((x) => item(qb, `p${op.part}`, `t${x}`)));
              pushes++;
              if (JSON.stringify(verdicts(a)) !== JSON.stringify(verdicts(b))) {
                throw new Error(`verdicts differ at ${JSON.stringify(op)}: ${verdicts(a).join(',')} vs ${verdicts(b).join(',')}`);
              }
            } else if (op.kind === 'window') {
              await t.context.sql.query('UPDATE queen.queues SET dedup_window_seconds = $2 WHERE name = ANY ($1)', [[qa, qb], op.seconds]);
            } else {
              await t.context.sql.query(
                `UPDATE queen.log_txns SET created_at = created_at - interval '2 hours'
               WHERE partition_id IN (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = ANY ($1))`,
                [[qa, qb]],
              );
            }
          }
        },
      ),
      { numRuns: 60 },
    );
    const refuted = compact.metrics.counter('queen_segments_total', '').get('refuted');
    t.log(
      `${pushes} pushes; the tier vouched ${source.vouched} segments naming ${source.names} offsets; ${refuted} segments refuted (false candidates or aged originals) and re-submitted`,
    );
    t.true(source.vouched > 0, 'the tier vouched');
    t.true(refuted > 0, 'false candidates reached SQL and were refuted');
  },
);

test.serial(
  'the cache with the compact tier on, at a cap the exact tier cannot hold the partitions in: verdicts equal -1 verdicts',
  async (t) => {
    const cache = new DedupCache({ capBytes: 48 * 1024, compactTier: true });
    const metrics = new MetricsRegistry();
    const engine = new LogEngine({ connectionString: t.context.db.url, poolSize: 2, metrics });
    await engine.start();
    t.context.engines.push(engine);
    const cached = new LogWriter(engine, {
      maxPayloadBytes: 1024,
      metadataTtlMs: 0,
      watermarks: new CacheWatermarks(cache, engine.pool, metrics),
    });
    const plain = await writerWith(t, undefined);
    let round = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            {
              weight: 6,
              arbitrary: fc.record({
                kind: fc.constant('push' as const),
                fresh: fc.integer({ min: 0, max: 1200 }),
                dups: fc.array(fc.nat(), { maxLength: 6 }),
                part: fc.integer({ min: 0, max: 1 }),
              }),
            },
            { weight: 2, arbitrary: fc.record({ kind: fc.constant('window' as const), seconds: fc.constantFrom(0, 60, 600, 3600) }) },
            { weight: 1, arbitrary: fc.record({ kind: fc.constant('age' as const) }) },
          ),
          { minLength: 4, maxLength: 16 },
        ),
        async (ops) => {
          round++;
          const qa = `ccta${round}`;
          const qb = `cctb${round}`;
          const sent: string[] = [];
          // Each round starts with partitions too big for the exact tier at
          // this cap, and a window change that makes the cache rebuild them:
          // the rebuilds are admitted as compact entries.
          const prefix: typeof ops = [
            { kind: 'push', fresh: 2500, dups: [], part: 0 },
            { kind: 'push', fresh: 2500, dups: [], part: 1 },
            { kind: 'window', seconds: 600 },
          ];
          for (const op of [...prefix, ...ops]) {
            if (op.kind === 'push') {
              const txns: string[] = [];
              for (let i = 0; i < op.fresh; i++) txns.push(`f${sent.length + i}`);
              for (const d of op.dups) if (sent.length > 0) txns.push(sent[d % sent.length]!);
              sent.push(...txns.slice(0, op.fresh));
              if (txns.length === 0) continue;
              const a = await cached.push(txns.map((x) => item(qa, `p${op.part}`, x)));
              const b = await plain.writer.push(txns.map((x) => item(qb, `p${op.part}`, x)));
              if (JSON.stringify(verdicts(a)) !== JSON.stringify(verdicts(b))) {
                throw new Error(`verdicts differ at ${JSON.stringify(op)}: ${verdicts(a).join(',')} vs ${verdicts(b).join(',')}`);
              }
            } else if (op.kind === 'window') {
              await t.context.sql.query('UPDATE queen.queues SET dedup_window_seconds = $2 WHERE name = ANY ($1)', [[qa, qb], op.seconds]);
            } else {
              await t.context.sql.query(
                `UPDATE queen.log_txns SET created_at = created_at - interval '2 hours'
               WHERE partition_id IN (SELECT lp.id FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = ANY ($1))`,
                [[qa, qb]],
              );
            }
          }
        },
      ),
      { numRuns: 30 },
    );
    t.log(JSON.stringify(cache.stats));
    t.true(cache.stats.compactInstalls > 0, 'compact entries were installed');
    t.true(cache.stats.hinted > 0 && cache.stats.vouched > 0, 'they vouched and named hits');
  },
);
