import test from 'ava';
import fc from 'fast-check';
import { BinaryCopyReader, BinaryCopyWriter, readInt8Array } from '../../src/engine/binaryCopy.js';
import { buildSlices, bucketOf, runBits } from '../../src/engine/hashRunSlices.js';

/** Cuts a buffer at the given points (sorted, deduplicated, inside it). */
function cut(b: Buffer, at: number[]): Buffer[] {
  const points = [...new Set(at.map((x) => x % (b.length + 1)))].sort((x, y) => x - y);
  const out: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    out.push(b.subarray(from, p));
    from = p;
  }
  out.push(b.subarray(from));
  return out;
}

test('what the writer packs, the reader hands back whole, however the stream is cut', (t) => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          id: fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
          bucket: fc.integer({ min: 0, max: 2 ** 24 - 1 }),
          bytes: fc.uint8Array({ maxLength: 200 }),
          offs: fc.array(fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }), { minLength: 1, maxLength: 40 }),
          // A nullable column (a slice's times): NULL travels as NULL, not as an empty array.
          times: fc.option(fc.array(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), { maxLength: 40 }), { nil: null }),
        }),
        { maxLength: 30 },
      ),
      fc.array(fc.nat(), { maxLength: 12 }),
      (rows, at) => {
        const w = new BinaryCopyWriter();
        for (const r of rows) {
          w.tuple([
            { int8: r.id },
            { int4: r.bucket },
            { bytea: Buffer.from(r.bytes) },
            { int8Array: r.offs },
            r.times === null ? { null: true } : { int8Array: r.times },
          ]);
        }
        const got: unknown[] = [];
        const reader = new BinaryCopyReader(5, (f) =>
          got.push({
            id: Number(f[0]!.readBigInt64BE(0)),
            bucket: f[1]!.readInt32BE(0),
            bytes: new Uint8Array(f[2]!),
            offs: readInt8Array(f[3]!),
            times: f[4] === null ? null : readInt8Array(f[4]!),
          }),
        );
        for (const chunk of cut(w.finish(), at)) reader.push(chunk);
        reader.finish();
        t.deepEqual(got, rows);
      },
    ),
  );
});

test('an int8 outside the safe integers is refused both ways, never rounded', (t) => {
  for (const v of [2 ** 53, -(2 ** 53), 1.5]) {
    t.throws(() => new BinaryCopyWriter().tuple([{ int8: v }]), { instanceOf: RangeError }, `writing ${v}`);
  }
  for (const v of [2n ** 53n, -(2n ** 53n), 2n ** 63n - 1n]) {
    const w = new BinaryCopyWriter();
    w.tuple([{ int8Array: [0] }]);
    const whole = Buffer.from(w.finish());
    // The one element's 8 bytes sit at the end of the tuple, before the 2-byte trailer.
    whole.writeBigInt64BE(v, whole.length - 10);
    const reader = new BinaryCopyReader(1, (f) => readInt8Array(f[0]!));
    t.throws(() => reader.push(whole), { instanceOf: RangeError }, `reading ${v}`);
  }
});

test('a stream without its trailer is an error, not a short answer', (t) => {
  const w = new BinaryCopyWriter();
  w.tuple([{ int4: 1 }]);
  const whole = w.finish();
  const reader = new BinaryCopyReader(1, () => undefined);
  reader.push(whole.subarray(0, whole.length - 2));
  t.throws(() => reader.finish(), { message: /ended early/ });
});

test('every pair lands in the slice of its leading bits, offsets ascending, none lost, its time with it', (t) => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          h: fc.uint8Array({ minLength: 16, maxLength: 16 }),
          off: fc.integer({ min: 0, max: 1e9 }),
          at: fc.integer({ min: 0, max: 2 ** 52 }),
        }),
        { minLength: 0, maxLength: 400 },
      ),
      fc.integer({ min: 1, max: 4 }),
      // Which parts come without times (slices of the previous release).
      fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
      (pairs, parts, timeless) => {
        // Split into parts as a merge sees runs: each part in ascending offset.
        const chunks = Array.from({ length: parts }, (_, p) => pairs.filter((_, i) => i % parts === p).sort((a, b) => a.off - b.off));
        const input = chunks.map((c, p) => ({
          hashes: Buffer.concat(c.map((x) => Buffer.from(x.h))),
          offs: c.map((x) => x.off),
          createdUs: timeless[p] ? null : c.map((x) => x.at),
        }));
        const bits = runBits(pairs.length);
        const slices = buildSlices(input, bits);
        let seen = 0;
        let lastBucket = -1;
        for (const s of slices) {
          t.true(s.bucket > lastBucket);
          lastBucket = s.bucket;
          for (let i = 0; i < s.offs.length; i++) {
            t.is(bucketOf(s.hashes, i * 16, bits), s.bucket);
            if (i > 0) t.true(s.offs[i - 1]! <= s.offs[i]!);
          }
          seen += s.offs.length;
        }
        t.is(seen, pairs.length);
        // The multiset of (hash, offset) pairs is the input's.
        const key = (h: Buffer | Uint8Array, off: number) => `${Buffer.from(h).toString('hex')}@${off}`;
        const want = pairs.map((p) => key(p.h, p.off)).sort();
        const have = slices.flatMap((s) => s.offs.map((off, i) => key(s.hashes.subarray(i * 16, i * 16 + 16), off))).sort();
        t.deepEqual(have, want);
        // A slice has times exactly when every pair in it came with one, and
        // then each pair's own: (hash, offset, time) as given.
        const timed = new Set(pairs.filter((_, i) => !timeless[i % parts]).map((p) => key(p.h, p.off)));
        const withTime = (p: { h: Uint8Array; off: number; at: number }) => `${key(p.h, p.off)}#${p.at}`;
        for (const s of slices) {
          const keys = s.offs.map((off, i) => key(s.hashes.subarray(i * 16, i * 16 + 16), off));
          if (s.createdUs === null) {
            t.false(
              keys.every((k) => timed.has(k)),
              'a slice whose pairs all have times keeps them',
            );
            continue;
          }
          t.is(s.createdUs.length, s.offs.length);
          t.true(keys.every((k) => timed.has(k)));
          const got = keys.map((k, i) => `${k}#${s.createdUs![i]}`);
          const wantTimed = new Set(pairs.filter((_, i) => !timeless[i % parts]).map(withTime));
          for (const g of got) t.true(wantTimed.has(g), `${g} is a pair with its own time`);
        }
      },
    ),
  );
});
