import test from 'ava';
import fc from 'fast-check';
import { CompactTier, STASH_MAX } from '../../../src/dedup/compactTier.js';

/** A hash as four 32-bit words. */
type Hash = [number, number, number, number];

function fmix(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** Hash number n of stream s: four independent-looking words. */
const hashOf = (s: number, n: number): Hash => {
  const a = fmix(Math.imul(s, 0x9e3779b1) + n);
  return [a, fmix(a ^ 0x1b873593), fmix(a + 0x3c6ef372), fmix(a ^ Math.imul(n, 0x27d4eb2f))];
};

/** The plain model: every append's offset under its full hash; live = above the floor. */
class Model {
  readonly byHash = new Map<string, number[]>();
  readonly all = new Set<number>();
  floor = -Infinity;
  add(h: Hash, offset: number): void {
    const k = h.join(':');
    const list = this.byHash.get(k);
    if (list === undefined) this.byHash.set(k, [offset]);
    else list.push(offset);
    this.all.add(offset);
  }
  live(h: Hash): number[] {
    return (this.byHash.get(h.join(':')) ?? []).filter((o) => o > this.floor);
  }
}

const named = (t: CompactTier, h: Hash): number[] => {
  const out: number[] = [];
  t.collect(h[0], h[1], h[2], h[3], out);
  return out.sort((a, b) => a - b);
};

/** Whether every offset in `want` lies in a named span. */
const covers = (spans: number[], len: number, want: number[]): boolean => want.every((o) => spans.some((s) => s <= o && o < s + len));

test('compact tier: no false negative against a plain Map model, over random histories (forced fingerprint collisions, one hash at several offsets, floors racing appends, window jumps, many generations)', (t) => {
  let falseNames = 0;
  let lookups = 0;
  fc.assert(
    fc.property(
      fc.array(
        fc.oneof(
          // a run of appends: new hashes, or (reuse) earlier ones again; offsets may skip (holes)
          fc.record({
            op: fc.constant('append' as const),
            n: fc.integer({ min: 1, max: 1500 }),
            seed: fc.nat(),
            reuse: fc.constantFrom(0, 3, 1),
            skip: fc.constantFrom(0, 0, 5, 70_000),
          }),
          // the window slides: the floor rises by a little, a lot, or past everything appended
          fc.record({ op: fc.constant('floor' as const), by: fc.constantFrom(1, 50, 1000, 20_000, 1_000_000) }),
          // a hydration announces its size
          fc.record({ op: fc.constant('expect' as const), n: fc.integer({ min: 0, max: 50_000 }) }),
        ),
        { minLength: 1, maxLength: 12 },
      ),
      // 1: every fingerprint equal; 3: most collide; undefined: the real width
      fc.constantFrom(1, 3, 40, undefined),
      // small generations: many of them, sealed often
      fc.constantFrom(300, 5000, undefined),
      fc.constantFrom([0, 16], [0, 10], [3, 14], [8, 12]),
      fc.tuple(fc.nat(), fc.nat(), fc.nat(), fc.nat(), fc.nat()),
      fc.integer({ min: 0, max: 2 ** 40 }),
      (ops, fingerprintValues, maxGenEntries, [spanBits, deltaBits], secret, start) => {
        const tier = new CompactTier({ secret, spanBits, deltaBits, fingerprintValues, maxGenEntries });
        const model = new Model();
        const hashes: Hash[] = [];
        let next = start;
        const len = tier.spanLength;
        for (const o of ops) {
          if (o.op === 'append') {
            next += o.skip;
            for (let i = 0; i < o.n; i++) {
              const h =
                o.reuse > 0 && hashes.length > 0 && i % o.reuse === 0
                  ? hashes[fmix(o.seed + i) % hashes.length]!
                  : hashOf(o.seed, i + next);
              hashes.push(h);
              tier.append(h[0], h[1], h[2], h[3], next);
              model.add(h, next);
              next += 1 + (i % 13 === 0 ? 2 : 0);
            }
          } else if (o.op === 'floor') {
            const f = (model.floor === -Infinity ? start - 1 : model.floor) + o.by;
            tier.raiseFloor(f);
            model.floor = Math.max(model.floor, f);
          } else tier.expect(o.n);
          if (tier.invariantViolation() !== undefined) return false;
          // Every hash appended so far (a sample), and absent ones.
          const step = 1 + Math.floor(hashes.length / 120);
          for (let k = 0; k < hashes.length; k += step) {
            const h = hashes[k]!;
            const want = model.live(h);
            const got = named(tier, h);
            lookups++;
            if (!covers(got, len, want)) return false;
            if (tier.has(h[0], h[1], h[2], h[3]) !== got.length > 0) return false;
            // A name is a span holding some live appended offset (I2): never an offset nothing was appended at.
            for (const s of got) {
              if (s + len - 1 <= model.floor) return false;
              let held = false;
              for (let a = s; a < s + len && !held; a++) held = model.all.has(a);
              if (!held) return false;
            }
            falseNames += got.length - want.length;
          }
          for (let k = 0; k < 20; k++) {
            const h = hashOf(0xabcdef, k * 7919 + 13);
            const got = named(tier, h);
            if (got.some((s) => s + len - 1 <= model.floor)) return false;
          }
        }
        return true;
      },
    ),
    { numRuns: 40 },
  );
  t.log(`${lookups} lookups of stored hashes, ${falseNames} extra names (forced collisions included)`);
  t.pass();
});

test('compact tier: one hash at many offsets, past what its two buckets and the stash hold, is named at every one', (t) => {
  const tier = new CompactTier({ secret: [1, 2, 3, 4, 5] });
  const h = hashOf(7, 7);
  const offsets: number[] = [];
  // Interleaved with other hashes, so the buckets fill with both.
  for (let i = 0; i < 200; i++) {
    const off = 1000 + 3 * i;
    tier.append(h[0], h[1], h[2], h[3], off);
    offsets.push(off);
    const o = hashOf(8, i);
    tier.append(o[0], o[1], o[2], o[3], off + 1);
  }
  t.is(tier.invariantViolation(), undefined);
  // 200 copies cannot share one bucket pair in one generation (8 slots + STASH_MAX): they sealed generations.
  t.true(tier.generations >= Math.ceil(200 / (8 + STASH_MAX)), `${tier.generations} generations`);
  t.deepEqual(
    named(tier, h).filter((o) => offsets.includes(o)),
    offsets,
  );
  tier.raiseFloor(1000 + 3 * 150);
  t.deepEqual(
    named(tier, h).filter((o) => offsets.includes(o)),
    offsets.filter((o) => o > 1000 + 3 * 150),
  );
  tier.raiseFloor(10_000);
  t.deepEqual(named(tier, h), []);
  t.is(tier.generations, 0);
  t.is(tier.size, 0);
  t.is(tier.bytes, 0);
});

test('compact tier: appends must come in increasing offset order', (t) => {
  const tier = new CompactTier();
  tier.append(1, 2, 3, 4, 10);
  t.throws(() => tier.append(1, 2, 3, 4, 10), { instanceOf: RangeError });
  t.throws(() => tier.append(1, 2, 3, 4, 9), { instanceOf: RangeError });
  tier.append(1, 2, 3, 4, 11);
  t.deepEqual(named(tier, [1, 2, 3, 4]), [10, 11]);
});

test('compact tier: a hydrated 1.2 M-hash window costs at most 4 bytes per hash, allocates at most 64 KiB at a time, and names every hash', (t) => {
  const n = 300 * 4096;
  const tier = new CompactTier({ secret: [11, 22, 33, 44, 55] });
  tier.expect(n);
  for (let i = 0; i < n; i++) {
    const h = hashOf(1, i);
    tier.append(h[0], h[1], h[2], h[3], i);
  }
  t.is(tier.invariantViolation(), undefined);
  const perHash = tier.bytes / tier.size;
  t.log(`${perHash.toFixed(3)} B/hash, ${tier.generations} generations, ${tier.pages} pages`);
  t.true(perHash <= 4, `${perHash} B/hash`);
  t.true(tier.largestArrayBytes() <= 65536);
  for (let i = 0; i < n; i += 101) t.true(named(tier, hashOf(1, i)).includes(i), `hash ${i}`);
});

test('compact tier: a sliding window of steady appends stays at most 4 bytes per live hash (exact offsets)', (t) => {
  const tier = new CompactTier({ secret: [5, 4, 3, 2, 1] });
  const window = 300 * 4096;
  let worst = 0;
  let best = Infinity;
  let floor = -1;
  for (let off = 0; off < 2 * window; off++) {
    const h = hashOf(2, off);
    tier.append(h[0], h[1], h[2], h[3], off);
    // Expiry by units of 4096, as the entry's units advance the floor.
    if (off >= window && off % 4096 === 0) tier.raiseFloor((floor = off - window));
    if (off > window + 4096 && off % 4096 === 2048) {
      const perLive = tier.bytes / (off - floor);
      worst = Math.max(worst, perLive);
      best = Math.min(best, perLive);
    }
  }
  t.log(`bytes per live hash over the steady window: ${best.toFixed(3)} .. ${worst.toFixed(3)} (${tier.generations} generations)`);
  t.true(worst <= 4, `worst ${worst}`);
  t.true(tier.largestArrayBytes() <= 65536);
});

test('compact tier: false candidates per absent lookup match the model (8 slots per generation at its load, 1 / fingerprint values each): exact offsets and 256-offset spans, hydrated and sliding', (t) => {
  const n = 300 * 4096;
  for (const [spanBits, deltaBits] of [
    [0, 16],
    [8, 12],
  ] as const) {
    for (const sliding of [false, true]) {
      const tier = new CompactTier({ secret: [9, 8, 7, 6, 5], spanBits, deltaBits });
      if (!sliding) tier.expect(n);
      for (let i = 0; i < (sliding ? 2 * n : n); i++) {
        const h = hashOf(3, i);
        tier.append(h[0], h[1], h[2], h[3], i);
        if (sliding && i >= n && i % 4096 === 0) tier.raiseFloor(i - n);
      }
      const probes = 100_000;
      let names = 0;
      for (let i = 0; i < probes; i++) names += named(tier, hashOf(4, i)).length;
      const rate = names / probes;
      const model = tier.falseCandidateModel();
      t.log(
        `spans of 2^${spanBits}, ${sliding ? 'sliding' : 'hydrated'}: ${rate.toFixed(5)} false candidates per absent lookup (${tier.generations} generations; model ${model.toFixed(5)}); ${(tier.bytes / tier.size).toFixed(3)} B/hash`,
      );
      t.true(rate < model * 1.3 + 2e-5 && rate > model * 0.7 - 2e-5, `${rate} vs ${model}`);
    }
  }
});

test('compact tier: hashes crafted to share the raw bits of a bucket and a fingerprint still spread (placement and fingerprints are keyed)', (t) => {
  // Equal first words and equal last two words: an unkeyed layout placing by
  // raw bits would put them all in one bucket pair with one fingerprint.
  const n = 60_000;
  const h = (i: number): Hash => [0x9e3779b1, ((i << 12) | 0x123) >>> 0, 0xdeadbeef, 0x01234567];
  for (const secret of [
    [1, 2, 3, 4, 5],
    [0xdeadbeef, 0x01234567, 7, 8, 9],
  ] as [number, number, number, number, number][]) {
    const tier = new CompactTier({ secret });
    tier.expect(n);
    for (let i = 0; i < n; i++) tier.append(...h(i), i);
    t.is(tier.invariantViolation(), undefined);
    // They fill generations like random hashes would (no early sealing by stash overflow).
    t.true(tier.generations <= 2, `${tier.generations} generations`);
    t.true(named(tier, h(12_345)).includes(12_345));
  }
});
