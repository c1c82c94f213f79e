import test from 'ava';
import fc from 'fast-check';
import { DedupCache, type TxnRow } from '../../../src/dedup/index.js';
import { SKEW_SLACK_MS } from '../../../src/dedup/constants.js';
import { FakeClock, hashAt, hashRun } from './helpers.js';

/**
 * A reference model of ONE partition's log, with the seed's SQL semantics,
 * driven together with the cache exactly as the flush drives it. The
 * property: whenever the cache vouches W, the probe narrowed to
 * (max(W, txnsStart - 1), last] returns exactly what the full probe over
 * (txnsStart - 1, last] returns, and no hash of the segment sits in an
 * in-window row ending in (txnsStart - 1, W].
 */

interface Row {
  base: number;
  end: number;
  createdMs: number;
  hashes: Buffer;
  /** Physically deleted by a purge (a lazy purge leaves rows below txnsStart in place). */
  deleted: boolean;
}

class ModelLog {
  readonly rows: Row[] = [];
  last = -1;
  txnsStart = 0;
  /** hex hash -> every (row, offset) holding it. */
  private readonly index = new Map<string, { row: Row; off: number }[]>();

  constructor(public window: number) {}

  append(hashes: Buffer, count: number, createdMs: number): number {
    const base = this.last + 1;
    const row: Row = { base, end: base + count - 1, createdMs, hashes, deleted: false };
    this.rows.push(row);
    for (let i = 0; i < count; i++) {
      const k = hashes.toString('hex', i * 16, i * 16 + 16);
      let occ = this.index.get(k);
      if (occ === undefined) this.index.set(k, (occ = []));
      occ.push({ row, off: base + i });
    }
    this.last = row.end;
    return base;
  }

  private inWindow(row: Row, dbNow: number): boolean {
    return !row.deleted && row.createdMs >= dbNow - this.window * 1000;
  }

  /** log_push_v1's probe from `from`: frame index -> MIN original offset (empty when it does not run). */
  probe(hashes: Buffer, count: number, from: number, dbNow: number): Map<number, number> {
    const dups = new Map<number, number>();
    if (!(this.window > 0 && this.last > from)) return dups;
    for (let i = 0; i < count; i++) {
      for (const o of this.index.get(hashes.toString('hex', i * 16, i * 16 + 16)) ?? []) {
        if (o.row.end > from && this.inWindow(o.row, dbNow)) {
          const prev = dups.get(i);
          if (prev === undefined || o.off < prev) dups.set(i, o.off);
        }
      }
    }
    return dups;
  }

  /**
   * log_verify_runs_v1 for one named occurrence: the row holding `off` exists
   * (not deleted), ends at or above txnsStart, is in the window and holds
   * the 16 bytes of `hash` at that offset.
   */
  verifyAt(hash: Buffer, off: number, dbNow: number): boolean {
    const row = this.rows.find((r) => r.base <= off && off <= r.end);
    if (row === undefined || !(this.window > 0) || row.end < this.txnsStart || !this.inWindow(row, dbNow)) return false;
    return row.hashes.compare(hash, 0, 16, (off - row.base) * 16, (off - row.base) * 16 + 16) === 0;
  }

  /**
   * log_lookup_v2 for one item at its weakest (sql/functions/lookup.sql,
   * its claim): the lowest offset at or below upTo holding the hash in a row
   * that is not deleted, ends at or above txnsStart and is in the window at
   * dbNow, and only if it lies in the item's span [from, to] (the SQL names
   * more: every occurrence the runs it reads hold). So a span that leaves
   * out an occurrence the vouch needs costs a verdict here.
   */
  lookup(hash: Buffer, upTo: number, dbNow: number, from = 0, to = Infinity): number[] {
    if (!(this.window > 0)) return [];
    const offs = (this.index.get(hash.toString('hex')) ?? [])
      .filter((o) => o.off <= upTo && o.row.end >= this.txnsStart && this.inWindow(o.row, dbNow))
      .map((o) => o.off);
    if (offs.length === 0) return [];
    const lowest = Math.min(...offs);
    return lowest >= from && lowest <= to ? [lowest] : [];
  }

  /** Offsets in (txnsStart - 1, w] of in-window rows holding a hash of the segment. */
  vouchViolations(hashes: Buffer, count: number, w: number, dbNow: number): number[] {
    const bad: number[] = [];
    for (let i = 0; i < count; i++) {
      for (const o of this.index.get(hashes.toString('hex', i * 16, i * 16 + 16)) ?? []) {
        if (o.row.end > this.txnsStart - 1 && o.row.end <= w && this.inWindow(o.row, dbNow)) bad.push(o.off);
      }
    }
    return bad;
  }

  /** The hydration fetch: created_at >= now - window - 5 s, ascending offsets; optionally also rows below txnsStart not yet deleted. */
  fetch(dbNow: number, withPurged: boolean): TxnRow[] {
    return this.rows
      .filter((r) => !r.deleted && r.createdMs >= dbNow - this.window * 1000 - SKEW_SLACK_MS && (withPurged || r.end >= this.txnsStart))
      .map((r) => ({ baseOffset: r.base, endOffset: r.end, createdMs: r.createdMs, hashes: r.hashes }));
  }

  /** The allocator's upper bound on what a rebuild holds: every offset not purged. */
  upperBound(): number {
    return Math.max(0, this.last - this.txnsStart + 1);
  }

  /**
   * What the vouch rule says the entry must know when it vouches v: the
   * hashes of every in-window row ending in (txnsStart - 1, v] (SQL compares
   * whole rows). All alphabet hashes there, plus a sample of the rest.
   */
  mustKnow(v: number, dbNow: number, sample: number): Buffer[] {
    const out: Buffer[] = [];
    const rest: Buffer[] = [];
    for (const r of this.rows) {
      if (!(r.end > this.txnsStart - 1 && r.end <= v && this.inWindow(r, dbNow))) continue;
      for (let i = 0; i <= r.end - r.base; i++) {
        const h = r.hashes.subarray(i * 16, i * 16 + 16);
        if (ALPHABET.has(h.toString('hex'))) out.push(h);
        else rest.push(h);
      }
    }
    const step = Math.max(1, Math.floor(rest.length / sample));
    for (let i = rest.length - 1; i >= 0; i -= step) out.push(rest[i]!);
    return out;
  }

  /** A live row at a fraction of the log (purges that cut inside a row, so it straddles txnsStart). */
  rowAt(fraction: number): Row | undefined {
    const live = this.rows.filter((r) => !r.deleted && r.end >= this.txnsStart);
    return live.length === 0 ? undefined : live[Math.min(live.length - 1, Math.floor(fraction * live.length))];
  }

  purge(to: number, lazy: boolean): void {
    this.txnsStart = Math.max(this.txnsStart, to);
    if (!lazy) for (const r of this.rows) if (r.end < this.txnsStart) r.deleted = true;
  }
}

type Op =
  | {
      kind: 'push';
      fresh: number;
      dupIds: number[];
      outcome: 'ok' | 'unknownCommitted' | 'unknownLost';
      race: number[] | null;
      withPurged: boolean;
    }
  | { kind: 'other'; fresh: number; dupIds: number[] }
  | { kind: 'window'; seconds: number }
  | { kind: 'time'; ms: number }
  | { kind: 'purge'; fraction: number; lazy: boolean; intoRow: boolean }
  | { kind: 'filler'; size: number; slot: number }
  | { kind: 'clear' };

const freshCount = fc.oneof(
  { weight: 10, arbitrary: fc.integer({ min: 0, max: 6 }) },
  { weight: 2, arbitrary: fc.integer({ min: 300, max: 6000 }) },
);
const dupIds = fc.uniqueArray(fc.integer({ min: 0, max: 24 }), { maxLength: 3 });

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({
      kind: fc.constant('push' as const),
      fresh: freshCount,
      dupIds,
      outcome: fc.constantFrom<('ok' | 'unknownCommitted' | 'unknownLost')[]>(
        'ok',
        'ok',
        'ok',
        'ok',
        'ok',
        'ok',
        'unknownCommitted',
        'unknownLost',
      ),
      race: fc.option(dupIds, { freq: 6 }),
      withPurged: fc.boolean(),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('other' as const), fresh: freshCount, dupIds }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('window' as const), seconds: fc.constantFrom(0, 1, 5, 10, 60, 3600) }) },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('time' as const), ms: fc.constantFrom(0, 10, 400, 3000, 6000, 20_000, 70_000, 200_000) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('purge' as const),
      fraction: fc.double({ min: 0, max: 1, noNaN: true }),
      lazy: fc.boolean(),
      intoRow: fc.boolean(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('filler' as const),
      size: fc.constantFrom(50, 2000, 12_000),
      slot: fc.integer({ min: 0, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'clear' as const }) },
);

const PID = 1;
const ALPHABET = new Set(Array.from({ length: 25 }, (_, id) => hashAt(8, id).toString('hex')));
const fillerHashes = new Map<number, Buffer>([50, 2000, 12_000].map((n) => [n, hashRun(31, 0, n)]));

interface Totals {
  pushes: number;
  vouched: number;
  probeSkipped: number;
  vouchedButDupAbove: number;
  duplicates: number;
  knowledgeChecks: number;
  hintedItems: number;
  refutedHints: number;
  multiOffsetHints: number;
  vouchedWithHints: number;
  maybeItems: number;
  /** Maybe items whose span ends below the newest offsets (a generation older than the one appends go to). */
  spanBounded: number;
  lookupNamed: number;
  lookupAll: number;
  [k: string]: number;
}

function segmentOf(fresh: number, ids: number[], counter: { n: number }): { hashes: Buffer; count: number } {
  const count = Math.max(1, fresh + ids.length);
  const hashes = Buffer.alloc(count * 16);
  const f = count - ids.length;
  hashRun(7, counter.n, f).copy(hashes, 0);
  counter.n += f;
  ids.forEach((id, i) => hashAt(8, id, hashes, (f + i) * 16));
  return { hashes, count };
}

function runScenario(
  skew: number,
  capBytes: number,
  window0: number,
  ops: Op[],
  totals: Totals,
  knowledgeCheck: boolean,
  filterTier: boolean,
): void {
  const clock = new FakeClock();
  const cache = new DedupCache({ capBytes, now: clock.now, filterTier });
  const model = new ModelLog(window0);
  const counter = { n: 0 };
  const dbNow = (): number => clock.ms + skew;

  const check = (cond: boolean, what: string): void => {
    if (!cond) throw new Error(what);
  };

  const hydrateIfTold = (withPurged: boolean): void => {
    if (cache.prepare(PID, model.window) !== 'hydrate') return;
    if (!cache.admitRebuild(PID, model.upperBound())) return;
    cache.install(PID, model.window, model.last, model.txnsStart, model.fetch(dbNow(), withPurged), clock.ms);
  };

  const otherBroker = (fresh: number, ids: number[]): void => {
    const seg = segmentOf(fresh, ids, counter);
    if (model.probe(seg.hashes, seg.count, model.txnsStart - 1, dbNow()).size === 0) model.append(seg.hashes, seg.count, dbNow());
  };

  for (const op of ops) {
    switch (op.kind) {
      case 'push': {
        cache.beginFlush(PID);
        hydrateIfTold(op.withPurged);
        const seg = segmentOf(op.fresh, op.dupIds, counter);
        const vouch = cache.vouchWithHints(PID, seg.hashes, seg.count);
        let w = vouch.verified;
        let hits = vouch.hits;
        check(w <= model.last, `vouched ${w} above last_offset ${model.last}`);
        check(w >= 0 || (hits.length === 0 && vouch.maybe.length === 0), 'hints or maybe items without a vouch');
        const lookupAll = filterTier && w < 0 && model.window > 0 && !cache.hasVouchingEntry(PID);
        if (lookupAll) {
          // CacheWatermarks: no entry vouches, so every item is looked up and
          // the vouch is the lookup's lastOffset alone.
          const upTo = model.last;
          const at = dbNow();
          hits = Array.from({ length: seg.count }, (_, index) => ({
            index,
            offsets: model.lookup(seg.hashes.subarray(index * 16, index * 16 + 16), upTo, at),
          })).filter((h) => h.offsets.length > 0);
          totals.lookupAll++;
          w = upTo;
        } else if (vouch.maybe.length > 0) {
          check(filterTier, 'maybe items from a cache without the filter tier');
          // CacheWatermarks.lookUp: the maybe items looked up (no lock), what
          // was found named, the vouch lowered to the lookup's lastOffset.
          const upTo = model.last;
          const at = dbNow();
          const spans = vouch.spans;
          check(spans?.from.length === vouch.maybe.length && spans.to.length === vouch.maybe.length, 'a span per maybe item');
          const named = vouch.maybe
            .map((index, k) => ({
              index,
              offsets: model.lookup(seg.hashes.subarray(index * 16, index * 16 + 16), upTo, at, spans!.from[k], spans!.to[k]),
            }))
            .filter((h) => h.offsets.length > 0);
          totals.maybeItems += vouch.maybe.length;
          totals.spanBounded += spans!.to.filter((x) => x !== Infinity).length;
          totals.lookupNamed += named.length;
          hits = [...hits, ...named];
          w = Math.min(w, upTo);
        }
        if (model.window === 0) check(w === -1, 'vouched with dedup off');
        if (op.race !== null) otherBroker(1, op.race); // another broker commits between our ask and our push
        const now = dbNow();
        const sent = w > model.last ? -1 : w;
        const narrowed = model.probe(seg.hashes, seg.count, Math.max(sent, model.txnsStart - 1), now);
        const full = model.probe(seg.hashes, seg.count, model.txnsStart - 1, now);
        // log_push_v2: MIN over the verified named offsets and the tail probe.
        const hinted = new Map(narrowed);
        for (const h of hits) {
          const hash = seg.hashes.subarray(h.index * 16, h.index * 16 + 16);
          for (const off of h.offsets) {
            if (!model.verifyAt(hash, off, now)) {
              totals.refutedHints++;
              continue;
            }
            const prev = hinted.get(h.index);
            if (prev === undefined || off < prev) hinted.set(h.index, off);
          }
          totals.hintedItems++;
          if (h.offsets.length > 1) totals.multiOffsetHints++;
        }
        const sorted = (m: Map<number, number>): string => JSON.stringify([...m].sort((a, b) => a[0] - b[0]));
        check(
          sorted(hinted) === sorted(full),
          `hinted verdict with p_verified=${w} ${sorted(hinted)} differs from the full probe ${sorted(full)}`,
        );
        if (w !== -1) {
          // The vouch rule for the items it did not name: nothing at or below W.
          const named = new Set(hits.map((h) => h.index));
          const unnamed = Buffer.concat(
            Array.from({ length: seg.count }, (_, i) => i)
              .filter((i) => !named.has(i))
              .map((i) => seg.hashes.subarray(i * 16, i * 16 + 16)),
          );
          const bad = model.vouchViolations(unnamed, unnamed.length / 16, w, now);
          check(bad.length === 0, `vouched ${w} but in-window offsets ${bad.join(',')} hold an unnamed hash of the segment`);
        }
        totals.pushes++;
        if (w !== -1) totals.vouched++;
        if (w !== -1 && !(model.last > Math.max(w, model.txnsStart - 1))) totals.probeSkipped++;
        if (w !== -1 && full.size > 0) totals.vouchedButDupAbove++;
        if (w !== -1 && hits.length > 0) totals.vouchedWithHints++;
        if (full.size > 0) {
          totals.duplicates++;
          if (op.outcome !== 'ok') cache.recordUnknown(PID);
        } else {
          const base = op.outcome === 'unknownLost' ? -1 : model.append(seg.hashes, seg.count, now);
          clock.advance(1);
          if (op.outcome === 'ok') cache.recordAppend(PID, base, seg.hashes, seg.count, clock.ms);
          else cache.recordUnknown(PID);
        }
        cache.endFlush(PID);
        break;
      }
      case 'other':
        otherBroker(op.fresh, op.dupIds);
        break;
      case 'window':
        model.window = op.seconds;
        break;
      case 'time':
        clock.advance(op.ms);
        break;
      case 'purge': {
        // Either anywhere, or just inside a row (so a row straddles txnsStart).
        const row = op.intoRow ? model.rowAt(op.fraction) : undefined;
        const to =
          row !== undefined && row.end > row.base
            ? row.base + 1
            : model.txnsStart + Math.floor(op.fraction * (model.last + 1 - model.txnsStart));
        model.purge(to, op.lazy);
        break;
      }
      case 'filler': {
        const pid = 100 + op.slot;
        cache.beginFlush(pid);
        if (cache.prepare(pid, 60) === 'hydrate' && cache.admitRebuild(pid, op.size)) {
          cache.install(
            pid,
            60,
            op.size - 1,
            0,
            [{ baseOffset: 0, endOffset: op.size - 1, createdMs: clock.ms, hashes: fillerHashes.get(op.size)! }],
            clock.ms,
          );
        }
        cache.verifiedFor(pid, hashAt(9, 0), 1);
        cache.endFlush(pid);
        break;
      }
      case 'clear':
        cache.clear();
        break;
    }
    const info = cache.entryInfo(PID);
    if (info !== undefined) {
      check(info.hydratedFrom <= info.verifiedUpto, `hydratedFrom ${info.hydratedFrom} above verifiedUpto ${info.verifiedUpto}`);
      check(info.verifiedUpto <= model.last, `verifiedUpto ${info.verifiedUpto} above last_offset ${model.last}`);
      if (knowledgeCheck && info.state === 'vouching' && model.window > 0 && info.windowSeconds === model.window) {
        // The vouch rule itself, not just the verdicts it produced so far:
        // every in-window hash in (txnsStart - 1, V] must be a local hit.
        const before = { ...cache.stats };
        for (const h of model.mustKnow(info.verifiedUpto, dbNow(), 24)) {
          check(
            cache.verifiedFor(PID, h, 1) === -1,
            `vouching entry (V=${info.verifiedUpto}) does not know in-window hash ${h.toString('hex')}`,
          );
          totals.knowledgeChecks++;
        }
        Object.assign(cache.stats, before);
      }
    }
  }
  for (const k of [
    'hydrations',
    'filterInstalls',
    'demotions',
    'folds',
    'filterGrowths',
    'filterGenerationsExpired',
    'suppressions',
    'evictions',
    'localHits',
    'gaps',
    'rebuildsMarked',
  ] as const) {
    totals[k] = (totals[k] ?? 0) + cache.stats[k];
  }
}

test('model: a vouched watermark and its hints never change a verdict (random histories with interleaves, window changes, purges, pressure, one hash at several offsets)', (t) => {
  const totals: Totals = {
    pushes: 0,
    vouched: 0,
    probeSkipped: 0,
    vouchedButDupAbove: 0,
    duplicates: 0,
    knowledgeChecks: 0,
    hintedItems: 0,
    refutedHints: 0,
    multiOffsetHints: 0,
    vouchedWithHints: 0,
    maybeItems: 0,
    spanBounded: 0,
    lookupNamed: 0,
    lookupAll: 0,
  };
  fc.assert(
    fc.property(
      fc.integer({ min: -SKEW_SLACK_MS, max: SKEW_SLACK_MS }),
      fc.constantFrom(2 ** 30, 1.5 * 2 ** 20, 400 * 1024, 60 * 1024),
      fc.constantFrom(1, 10, 60),
      fc.array(opArb, { minLength: 1, maxLength: 60, size: 'max' }),
      fc.boolean(),
      (skew, cap, window0, ops, knowledgeCheck) => {
        // Without the filter tier: exact entries or suppression (the policy's other branch).
        runScenario(skew, cap, window0, ops, totals, knowledgeCheck, false);
      },
    ),
    { numRuns: 300 },
  );
  t.log(JSON.stringify(totals));
  // Coverage: the interesting paths actually ran.
  t.true(totals.vouched > 0 && totals.probeSkipped > 0, 'the cache vouched and SQL would skip the probe');
  t.true(totals.vouchedButDupAbove > 0, 'vouched segments whose duplicates sat above W (narrowed probe found them)');
  t.true(totals.duplicates > 0 && totals.localHits! > 0);
  t.true(totals.knowledgeChecks > 0);
  t.true(totals.vouchedWithHints > 0 && totals.hintedItems > 0, 'vouches carried hints');
  t.true(totals.multiOffsetHints > 0, 'a hash named at several offsets');
  t.true(totals.refutedHints > 0, 'stale (pre-window or purged) hints were refuted and the verdict still matched');
  t.true(totals.gaps! > 0 && totals.suppressions! > 0 && totals.evictions! > 0 && totals.rebuildsMarked! > 0);
});

/** A seed whose 200 filter-tier histories reach every path the coverage checks name (checked when it was picked). */
const COVERAGE_SEED = 1;

test('model (filter tier): demoted, folded and filter entries vouch only with their maybe items looked up, and no verdict changes', (t) => {
  const totals: Totals = {
    pushes: 0,
    vouched: 0,
    probeSkipped: 0,
    vouchedButDupAbove: 0,
    duplicates: 0,
    knowledgeChecks: 0,
    hintedItems: 0,
    refutedHints: 0,
    multiOffsetHints: 0,
    vouchedWithHints: 0,
    maybeItems: 0,
    spanBounded: 0,
    lookupNamed: 0,
    lookupAll: 0,
  };
  const property = fc.property(
    fc.integer({ min: -SKEW_SLACK_MS, max: SKEW_SLACK_MS }),
    // Caps at which the exact tier holds little or nothing of a 6 000-hash push and a filter does.
    fc.constantFrom(400 * 1024, 120 * 1024, 60 * 1024, 16 * 1024),
    fc.constantFrom(1, 10, 60),
    fc.array(opArb, { minLength: 1, maxLength: 60, size: 'max' }),
    fc.boolean(),
    (skew, cap, window0, ops, knowledgeCheck) => {
      runScenario(skew, cap, window0, ops, totals, knowledgeCheck, true);
    },
  );
  // New histories on every run, and a fixed set of them besides: a push no
  // entry vouches for (a refused rebuild) arose in 4-32 of 200 random
  // histories in six runs, and in none on a rare one, so the coverage checks
  // below must not hang on luck. The fixed seed's histories reach every path
  // they name.
  fc.assert(property, { numRuns: 200 });
  fc.assert(property, { numRuns: 200, seed: COVERAGE_SEED });
  t.log(JSON.stringify(totals));
  t.true(totals.filterInstalls! > 0, 'filter entries were installed');
  t.true(totals.demotions! > 0, 'exact entries were demoted to filters');
  t.true(totals.folds! > 0, 'filters were folded under pressure');
  t.true(totals.filterGrowths! > 0, 'filters grew generations for their appends');
  t.true(totals.filterGenerationsExpired! > 0, 'sealed generations were dropped once expiry passed them');
  t.true(totals.maybeItems > 0 && totals.lookupNamed > 0, 'maybe items were looked up and some were found');
  t.true(totals.spanBounded > 0, 'some maybe items were looked up only below the newest generation');
  t.true(totals.lookupAll > 0, 'pushes no entry vouched for looked every item up');
  t.true(totals.vouched > 0 && totals.probeSkipped > 0, 'the cache vouched and SQL would skip the probe');
  t.true(totals.duplicates > 0 && totals.localHits! > 0);
  t.true(totals.knowledgeChecks > 0);
  t.true(totals.vouchedWithHints > 0 && totals.hintedItems > 0, 'vouches carried hints');
  t.true(totals.multiOffsetHints > 0, 'a hash named at several offsets');
  t.true(totals.refutedHints > 0, 'stale hints were refuted and the verdict still matched');
  t.true(totals.gaps! > 0 && totals.rebuildsMarked! > 0);
});
