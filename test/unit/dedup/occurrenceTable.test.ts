import test from 'ava';
import fc from 'fast-check';
import { MAX_PAGE_SLOTS, OccurrenceTable } from '../../../src/dedup/occurrenceTable.js';

/** A model of the table: every insert's offset under its key; live = above the floor. */
class Model {
  readonly byKey = new Map<string, number[]>();
  total = 0;
  floor = -Infinity;
  add(key: Key, offset: number): void {
    const k = `${key[0]}:${key[1]}`;
    const list = this.byKey.get(k);
    if (list === undefined) this.byKey.set(k, [offset]);
    else list.push(offset);
    this.total++;
  }
  live(key: Key): number[] {
    return (this.byKey.get(`${key[0]}:${key[1]}`) ?? []).filter((o) => o > this.floor);
  }
  liveCount(): number {
    let n = 0;
    for (const list of this.byKey.values()) for (const o of list) if (o > this.floor) n++;
    return n;
  }
}

type Key = [number, number];

const collected = (t: OccurrenceTable, key: Key): number[] => {
  const out: number[] = [];
  t.collect(key[0], key[1], out);
  return out.sort((a, b) => a - b);
};

test('occurrence table: every lookup agrees with a model through growth, splits, floors and sweeps (property, repeated and crowded keys)', (t) => {
  fc.assert(
    fc.property(
      fc.array(
        fc.oneof(
          // insert a run of new keys; `pick` reuses an earlier key (one key at several offsets)
          fc.record({ op: fc.constant('insert' as const), n: fc.integer({ min: 1, max: 8000 }), seed: fc.nat(), reuse: fc.boolean() }),
          fc.record({ op: fc.constant('floor' as const), by: fc.integer({ min: 0, max: 3000 }) }),
          fc.record({ op: fc.constant('compact' as const), pages: fc.integer({ min: 1, max: 40 }) }),
        ),
        { minLength: 1, maxLength: 25 },
      ),
      // Crowded: keys share the raw bits an unkeyed layout would place by
      // (k0 ^ k1's low 16 bits, k0's top 12 bits, or all of k0 with 8 bits
      // of k1: many occurrences per key); and the key (0, 0), which shares
      // its stored form with (0, 1).
      fc.constantFrom('uniform', 'same-home', 'same-page', 'same-k0', 'zero'),
      fc.integer({ min: 0, max: 1_000_000 }),
      // A shallow directory reaches the oversize-page path (growth past
      // MAX_PAGE_SLOTS, sweeps that shrink it) with few entries.
      fc.constantFrom(13, 2, 0),
      fc.tuple(fc.nat(), fc.nat()),
      (ops, shape, base, maxDepth, secret) => {
        const table = new OccurrenceTable(base, 0, { maxDepth, secret });
        const model = new Model();
        const keys: Key[] = [];
        let offset = base;
        const shaped = (k: number): Key => {
          const k1 = Math.imul(k ^ 0x5bd1e995, 0x27d4eb2f) >>> 0;
          // One home slot: the low 16 bits of k0 ^ k1 are the same for every key.
          if (shape === 'same-home') return [k >>> 0, ((k1 & 0xffff0000) | ((k & 0xffff) ^ 0x1234)) >>> 0];
          if (shape === 'same-page') return [(0xabc00000 | (k & 0x000fffff)) >>> 0, k1];
          if (shape === 'same-k0') return [0x9e3779b1, k1 & 0xff];
          if (shape === 'zero') return k % 331 === 0 ? [0, k % 3 === 0 ? 0 : 1] : [k >>> 0, k1];
          return [k >>> 0, k1];
        };
        // Crowded shapes make long probe runs by design: fewer entries keep the run short.
        const budget = { left: shape === 'uniform' || shape === 'same-page' ? Infinity : 12_000 };
        for (const o of ops) {
          if (o.op === 'insert') {
            for (let i = 0; i < o.n && budget.left-- > 0; i++) {
              const key =
                o.reuse && keys.length > 0 && i % 3 === 0
                  ? keys[(Math.imul(o.seed + i, 0x9e3779b1) >>> 0) % keys.length]!
                  : shaped(Math.imul(o.seed + i + 1, 0x85ebca6b) ^ Math.imul(offset, 0xc2b2ae35));
              keys.push(key);
              table.insert(key[0], key[1], offset);
              model.add(key, offset);
              offset += 1 + (i % 17 === 0 ? 3 : 0);
            }
          } else if (o.op === 'floor') {
            const f = Math.min(offset - 1, (model.floor === -Infinity ? base - 1 : model.floor) + o.by);
            table.raiseFloor(f);
            if (f > model.floor) model.floor = f;
          } else table.compact(o.pages);
          // Every key seen so far, and some absent ones.
          for (let k = 0; k < keys.length; k += 1 + Math.floor(keys.length / 400)) {
            const key = keys[k]!;
            const want = model.live(key);
            // (0, 0) is stored as (0, 1): a lookup of either names both.
            const wantAll = key[0] === 0 && key[1] <= 1 ? [...model.live([0, 0]), ...model.live([0, 1])].sort((a, b) => a - b) : want;
            if (collected(table, key).join() !== wantAll.join() || table.has(key[0], key[1]) !== wantAll.length > 0) return false;
          }
          for (let k = 0; k < 50; k++) {
            const key = shaped(Math.imul(k + 7, 0x27d4eb2f) ^ 0x5bd1e995);
            if (key[0] === 0 && key[1] <= 1) continue;
            const want = model.live(key);
            if (collected(table, key).join() !== want.join()) return false;
          }
          // Distinct keys split into pages of at most 64 KiB of keys, whatever raw bits they share.
          if (maxDepth === 13) for (const a of table.arrays()) if (a.byteLength > MAX_PAGE_SLOTS * 8) return false;
          if (table.invariantViolation() !== undefined) return false;
        }
        // A full sweep leaves exactly the live entries.
        table.compact(table.pages);
        return table.size === model.liveCount() && table.invariantViolation() === undefined;
      },
    ),
    { numRuns: 40 },
  );
  t.pass();
});

test('occurrence table: a sliding window of steady inserts stays under 21.5 bytes per live entry once swept, and never allocates over 64 KiB', (t) => {
  const table = new OccurrenceTable(0);
  const window = 200_000;
  let worst = 0;
  let best = Infinity;
  let x = 12345;
  for (let off = 0; off < 1_000_000; off++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    table.insert(x >>> 0, Math.imul(x, 0x9e3779b1) >>> 0, off);
    if (off >= window) table.raiseFloor(off - window);
    if (off % 4096 === 0) table.compact(8);
    if (off > 2 * window && off % 10_000 === 0) {
      const perLive = table.bytes / window;
      worst = Math.max(worst, perLive);
      best = Math.min(best, perLive);
    }
  }
  for (const a of table.arrays()) t.true(a.byteLength <= 65536);
  t.log(`bytes per live entry over the steady window: ${best.toFixed(2)} .. ${worst.toFixed(2)} (${table.pages} pages)`);
  t.true(worst <= 21.5, `worst ${worst}`);
});

test('occurrence table: sized up front for a hydration, inserting the expected count rebuilds no page', (t) => {
  const n = 300_000;
  const table = new OccurrenceTable(10, n);
  const pages0 = [...table.arrays()];
  for (let i = 0; i < n; i++) table.insert(Math.imul(i + 1, 0x9e3779b1) >>> 0, i, 10 + i);
  const pages1 = [...table.arrays()];
  t.is(pages1.length, pages0.length);
  t.true(
    pages1.every((a, i) => a === pages0[i]),
    'the same pages',
  );
  t.deepEqual(collected(table, [Math.imul(5, 0x9e3779b1) >>> 0, 4]), [14]);
  t.deepEqual(collected(table, [Math.imul(5, 0x9e3779b1) >>> 0, 5]), [], 'the second key word tells keys apart');
});

test('occurrence table: the floor hides dead entries at once, and offsets 2^32 or more above the base are refused', (t) => {
  const table = new OccurrenceTable(1000);
  table.insert(7, 1, 1000);
  table.insert(7, 1, 1005);
  table.insert(9, 1, 1006);
  t.deepEqual(collected(table, [7, 1]), [1000, 1005]);
  table.raiseFloor(1004);
  t.deepEqual(collected(table, [7, 1]), [1005]);
  t.false(table.has(8, 1));
  table.raiseFloor(1005);
  t.false(table.has(7, 1));
  t.true(table.has(9, 1));
  t.true(table.canHold(1000 + 0xffffffff));
  t.false(table.canHold(1000 + 0x100000000));
  t.false(table.canHold(999));
});

test('occurrence table: an oversize page (no directory bit left to split on) swept after its floor rose keeps room for every live entry', (t) => {
  // With no directory bit to split on, the page grows over MAX_PAGE_SLOTS
  // (13 000 entries: 22 397 slots). A sweep that sized it back to the
  // maximum would overfill it (a full page never ends a probe run).
  const table = new OccurrenceTable(0, 0, { maxDepth: 0 });
  const n = 13_000;
  for (let i = 0; i < n; i++) table.insert(0x9e3779b1, (Math.imul(i + 1, 0x85ebca6b) >>> 0) | 1, i);
  t.true(
    [...table.arrays()].some((a) => a.byteLength > MAX_PAGE_SLOTS * 8),
    'an oversize page exists',
  );
  table.raiseFloor(1_999);
  table.compact(table.pages);
  t.is(table.invariantViolation(), undefined);
  t.is(table.size, n - 2_000);
  t.true(
    [...table.arrays()].some((a) => a.byteLength > MAX_PAGE_SLOTS * 8),
    'still oversize: 11 000 live entries need it',
  );
  t.deepEqual(collected(table, [0x9e3779b1, (Math.imul(5_000 + 1, 0x85ebca6b) >>> 0) | 1]), [5_000]);
  t.deepEqual(collected(table, [0x9e3779b1, (Math.imul(10 + 1, 0x85ebca6b) >>> 0) | 1]), [], 'below the floor');
  // And it shrinks when the live set does.
  const before = table.bytes;
  table.raiseFloor(n - 100);
  table.compact(table.pages);
  t.true(table.bytes < before / 4, `${table.bytes} < ${before} / 4`);
  t.is(table.invariantViolation(), undefined);
});

test('occurrence table: keys crafted to share the raw bits of a page and a home slot still spread (placement is keyed)', (t) => {
  // One k0 (one page and no split under raw top bits) and k1 chosen so the
  // low 16 bits of k0 ^ k1 agree (one home slot): an unkeyed layout would
  // hold all 30 000 in one probe run of one oversize page.
  const k0 = 0x9e3779b1;
  const n = 30_000;
  const key = (i: number): Key => [k0, ((i << 16) | ((k0 ^ 0x1234) & 0xffff)) >>> 0];
  for (const secret of [
    [1, 2],
    [0xdeadbeef, 0x01234567],
  ] as [number, number][]) {
    const table = new OccurrenceTable(0, 0, { secret });
    for (let i = 0; i < n; i++) table.insert(...key(i), i);
    t.is(table.invariantViolation(), undefined);
    t.true(table.pages >= 4, `${table.pages} pages`);
    for (const a of table.arrays()) t.true(a.byteLength <= MAX_PAGE_SLOTS * 8);
    t.true(table.longestRun() < 1_000, `longest probe run ${table.longestRun()}`);
    t.deepEqual(collected(table, key(12_345)), [12_345]);
  }
});

test('occurrence table: insertMany (page by page) gives every lookup the answer of one insert per entry, presized or growing', (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 40_000 }), fc.nat(), fc.boolean(), fc.constantFrom(13, 1, 0), (n, seed, presized, maxDepth) => {
      const secret: [number, number] = [seed, seed ^ 0x5bd1e995];
      const k0s = new Uint32Array(n);
      const k1s = new Uint32Array(n);
      const offsets = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        // Every seventh entry repeats an earlier key (one key at several offsets); some keys are (0, 0).
        const src = i % 7 === 6 ? Math.imul(i, 0x9e3779b1) >>> 0 : i;
        const j = src % (i + 1);
        k0s[i] = j % 1009 === 0 ? 0 : Math.imul(j + seed, 0x85ebca6b) >>> 0;
        k1s[i] = j % 1009 === 0 ? 0 : Math.imul(j ^ seed, 0xc2b2ae35) >>> 0;
        offsets[i] = 100 + i;
      }
      const many = new OccurrenceTable(100, presized ? n : 0, { secret, maxDepth });
      many.insertMany(k0s, k1s, offsets, n);
      const one = new OccurrenceTable(100, 0, { secret, maxDepth });
      for (let i = 0; i < n; i++) one.insert(k0s[i]!, k1s[i]!, offsets[i]!);
      if (many.invariantViolation() !== undefined || many.size !== n) return false;
      for (let i = 0; i < n; i += 1 + (n >> 9)) {
        const key: Key = [k0s[i]!, k1s[i]!];
        if (collected(many, key).join() !== collected(one, key).join()) return false;
        if (!collected(many, key).includes(offsets[i]!)) return false;
      }
      return true;
    }),
    { numRuns: 30 },
  );
  t.pass();
});
