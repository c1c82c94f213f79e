import test from 'ava';
import fc from 'fast-check';
import { BlockedBloom } from '../../../bench/baselines/seedRing/bloom.js';
import { BloomFront } from '../../../bench/baselines/seedRing/bloomFront.js';
import { BLOCK_BYTES, BLOOM_MIN_GENERATIONS_PER_WINDOW, BLOOM_TIERS } from '../../../bench/baselines/seedRing/constants.js';
import { readWords, viewOf } from '../../../bench/baselines/seedRing/hashRecords.js';
import { hashRun } from '../dedup/helpers.js';

function fill(bloom: BlockedBloom, hashes: Buffer, count: number): void {
  const v = viewOf(hashes);
  for (let i = 0; i < count; i++) {
    const w = readWords(v, i * 16);
    bloom.add(w[0]!, w[1]!, w[2]!);
  }
}
function countMaybe(bloom: BlockedBloom, hashes: Buffer, count: number): number {
  const v = viewOf(hashes);
  let n = 0;
  for (let i = 0; i < count; i++) {
    const w = readWords(v, i * 16);
    if (bloom.mayContain(w[0]!, w[1]!, w[2]!)) n++;
  }
  return n;
}

test('blocked bloom: never a false negative (property over random hash sets)', (t) => {
  fc.assert(
    fc.property(fc.constantFrom(4096, 32_768), fc.uint8Array({ minLength: 16, maxLength: 16 * 6000 }), (capacity, bytes) => {
      const count = Math.floor(bytes.length / 16);
      const hashes = Buffer.from(bytes.buffer, bytes.byteOffset, count * 16);
      const bloom = new BlockedBloom(capacity);
      fill(bloom, hashes, count);
      return countMaybe(bloom, hashes, count) === count;
    }),
    { numRuns: 200 },
  );
  t.pass();
});

test('blocked bloom: false-positive rate at 16 bits/key, full generations of 4096 and 262144, all hashes in one slot or spread over eight', (t) => {
  const absent = 250_000;
  const probes = hashRun(999, 0, absent);
  for (const [capacity, stream, slots] of [
    [4096, 1, 1],
    [262_144, 2, 1],
    [32_768, 3, 8],
  ] as const) {
    const bloom = new BlockedBloom(capacity);
    const v = viewOf(hashRun(stream, 0, capacity));
    for (let i = 0; i < capacity; i++) {
      const w = readWords(v, i * 16);
      bloom.add(w[0]!, w[1]!, w[2]!, Math.floor((i * slots) / capacity));
    }
    t.true(bloom.full);
    const fp = countMaybe(bloom, probes, absent) / absent;
    t.log(
      `capacity ${capacity}, ${slots} slot(s): ${absent} absent probes, false-positive rate ${(fp * 100).toFixed(3)}% (expected ~0.5%)`,
    );
    // Seven bits in the 384-bit plain part (the slot bytes filter little more): ~0.5 %.
    t.true(fp >= 0.003 && fp <= 0.008, `fp ${fp} outside 0.3%..0.8%`);
  }
});

test('blocked bloom slots: a hash always answers its own slot, and with 8 slots in use other slots for few (property over slot layouts)', (t) => {
  let others = 0;
  let possible = 0;
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 2 ** 30 }), fc.integer({ min: 1, max: 8 }), (stream, used) => {
      const capacity = 32_768;
      const bloom = new BlockedBloom(capacity);
      const v = viewOf(hashRun(stream, 0, capacity));
      const slotOf = (i: number): number => Math.floor((i * used) / capacity);
      for (let i = 0; i < capacity; i++) {
        const w = readWords(v, i * 16);
        bloom.add(w[0]!, w[1]!, w[2]!, slotOf(i));
      }
      for (let i = 0; i < capacity; i += 3) {
        const w = readWords(v, i * 16);
        const mask = bloom.slotMask(w[0]!, w[1]!, w[2]!);
        if ((mask & (1 << slotOf(i))) === 0) return false;
        if (mask >>> used !== 0) return false; // no slot beyond those used answers
        if (used < 8) continue;
        possible += 7;
        for (let s = 0; s < 8; s++) if (s !== slotOf(i) && (mask & (1 << s)) !== 0) others++;
      }
      return true;
    }),
    // The examples always run, so the 8-slot rate below never rests on the
    // random draws happening to pick 8 (24 draws miss it ~4 % of the time).
    {
      numRuns: 24,
      examples: [
        [1, 8],
        [2, 8],
        [3, 8],
      ],
    },
  );
  // A generation of 8 blocks: each other slot of a present hash answers ~20 %
  // of the time, so a hit searches ~2.4 of its 8 blocks.
  const rate = others / possible;
  t.log(`8 slots in use: other slots answering ${(rate * 100).toFixed(1)}% (${possible / 7} present hashes)`);
  t.true(possible > 0);
  t.true(rate < 0.3, `other slots answer ${rate}`);
  t.throws(() => new BlockedBloom(4096).add(1, 2, 3, 8), { instanceOf: RangeError });
});

test('blocked bloom: pages are allocated lazily and no allocation exceeds one 64 KiB block', (t) => {
  const bloom = new BlockedBloom(1_048_576);
  t.is(bloom.bytes, 0);
  t.false(bloom.mayContain(1, 2, 3), 'an untouched page is a definitive miss');
  fill(bloom, hashRun(3, 0, 1_048_576), 1_048_576);
  t.is(bloom.bytes, bloom.fullBytes);
  t.is(bloom.fullBytes, 2 * 1_048_576, '16 bits per hash of capacity');
  let arrays = 0;
  for (const a of bloom.arrays()) {
    arrays++;
    t.true(a.byteLength <= BLOCK_BYTES, `array of ${a.byteLength} bytes`);
  }
  t.is(arrays, 32);
});

test('bloom front: plain ladder tiers x8 from 4096 up to the 1M ceiling', (t) => {
  const front = new BloomFront(60_000, 0);
  const v = viewOf(hashRun(4, 0, 1));
  const w = readWords(v, 0);
  let off = 0;
  const total = 4096 + 32_768 + 262_144 + 1_048_576 + 10;
  for (let i = 0; i < total; i++) front.add((w[0]! + i * 2654435761) >>> 0, (w[1]! ^ i) >>> 0, (w[2]! + i) >>> 0, 1000, off++);
  t.deepEqual(front.capacities(), [...BLOOM_TIERS, 1_048_576]);
});

test('bloom front: rate-aware tiers step up only when a window holds >= K of the next tier, and down when it holds < K', (t) => {
  const K = BLOOM_MIN_GENERATIONS_PER_WINDOW;
  t.is(K, 5);
  const front = new BloomFront(300_000); // the default K
  let off = 0;
  const add = (n: number, msPerHash: number, t0: number): number => {
    let ts = t0;
    for (let i = 0; i < n; i++, ts += msPerHash)
      front.add(Math.imul(off, 2654435761) >>> 0, Math.imul(off, 40503) >>> 0, off >>> 0, Math.floor(ts), off++);
    return ts;
  };
  // 300 s window at 4096 hashes/s: a 4096 generation fills in 1 s (a window
  // holds 37.5 of the next tier: up); 32768 fills in 8 s (4.7 of the next
  // tier < K: no step up; 37.5 of its own >= K: no step down): stay.
  let ts = add(4096 + 32_768 * 3 + 1, 1000 / 4096, 0);
  t.deepEqual(front.capacities(), [4096, 32_768, 32_768, 32_768, 32_768]);
  // 16x the rate: 32768 fills in 0.5 s, a window holds 75 of the next tier: up.
  ts = add(32_768, 1000 / 65_536, ts);
  t.deepEqual(front.capacities().slice(-2), [32_768, 262_144]);
  // The rate drops 64x: a 262144 generation takes 256 s (1.2 per window < K): step down.
  add(262_144, 64_000 / 65_536, ts);
  t.deepEqual(front.capacities().slice(-2), [262_144, 32_768]);
  // The plain ladder (K = 0) ignores the rate.
  const ladder = new BloomFront(300_000, 0);
  for (let i = 0; i < 4096 + 32_768 + 1; i++) ladder.add(i, Math.imul(i, 40503) >>> 0, i, i * 1000, i);
  t.deepEqual(ladder.capacities(), [4096, 32_768, 262_144]);
});

test('bloom front: a generation is dropped only when its max created time is before the cutoff; an idle front restarts small', (t) => {
  const front = new BloomFront(10_000, 0);
  const hashes = hashRun(5, 0, 5000);
  const v = viewOf(hashes);
  for (let i = 0; i < 5000; i++) {
    const w = readWords(v, i * 16);
    front.add(w[0]!, w[1]!, w[2]!, i < 4096 ? 1000 : 2000, i);
  }
  t.is(front.generations, 2);
  t.is(front.expire(1000), 0, 'max created == cutoff is not before it');
  t.is(front.expire(1001), 1);
  for (let i = 4096; i < 5000; i++) t.true(front.mayContain(...(Array.from(readWords(v, i * 16)).slice(0, 3) as [number, number, number])));
  t.is(front.expire(2001), 1);
  t.is(front.generations, 0);
  front.add(1, 2, 3, 3000, 6000);
  t.deepEqual(front.capacities(), [4096]);
});

test('bloom front: no false negatives for hashes committed at or after the cutoff (property)', (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ n: fc.integer({ min: 1, max: 3000 }), dt: fc.integer({ min: 0, max: 5000 }) }), { minLength: 1, maxLength: 12 }),
      fc.integer({ min: 0, max: 40_000 }),
      (batches, cutoff) => {
        const front = new BloomFront(10_000, 4);
        let off = 0;
        let ts = 0;
        const kept: Buffer[] = [];
        batches.forEach((b, bi) => {
          ts += b.dt;
          const hashes = hashRun(100 + bi, 0, b.n);
          const v = viewOf(hashes);
          for (let i = 0; i < b.n; i++) {
            const w = readWords(v, i * 16);
            front.add(w[0]!, w[1]!, w[2]!, ts, off++);
          }
          if (ts >= cutoff) kept.push(hashes);
        });
        front.expire(cutoff);
        for (const h of kept) {
          const v = viewOf(h);
          for (let i = 0; i < h.length / 16; i++) {
            const w = readWords(v, i * 16);
            if (!front.mayContain(w[0]!, w[1]!, w[2]!)) return false;
          }
        }
        return true;
      },
    ),
    { numRuns: 150 },
  );
  t.pass();
});

test('bloom front: a single-block generation asks one slot picked by the hash (~0.1 % false positives), a generation of 8 blocks names them (~0.5 %)', (t) => {
  const absent = 200_000;
  const probes = viewOf(hashRun(998, 0, absent));
  for (const [total, lo, hi] of [
    [4096, 0.0004, 0.002],
    [4096 + 32_768, 0.003, 0.009],
  ] as const) {
    const front = new BloomFront(3_600_000, 0);
    const v = viewOf(hashRun(41, 0, total));
    for (let i = 0; i < total; i++) {
      const w = readWords(v, i * 16);
      front.add(w[0]!, w[1]!, w[2]!, 1000, i);
    }
    t.deepEqual(front.capacities(), total === 4096 ? [4096] : [4096, 32_768]);
    // Only the newest generation's answers: the one under test.
    let fp = 0;
    for (let i = 0; i < absent; i++) {
      const w = readWords(probes, i * 16);
      const top = front.generations - 1;
      if (front.nextMaybe(w[0]!, w[1]!, w[2]!, top) === top) fp++;
    }
    const rate = fp / absent;
    t.log(`${total === 4096 ? 'one block' : 'eight blocks'}: false-positive rate ${(rate * 100).toFixed(3)}%`);
    t.true(rate >= lo && rate <= hi, `rate ${rate} outside ${lo}..${hi}`);
    // Present hashes always answer, with a mask naming their own block.
    for (let i = 0; i < total; i += 5) {
      const w = readWords(v, i * 16);
      const g = front.nextMaybe(w[0]!, w[1]!, w[2]!, front.generations - 1);
      if (g < 0) t.fail(`hash ${i} missed`);
      const own = i < 4096 ? 0 : (Math.floor(i / 4096) - front.firstBlockOf(g)) >> front.slotShiftOf(g);
      if ((front.lastMask & (1 << own)) === 0 && g === (i < 4096 ? 0 : 1)) t.fail(`hash ${i}: mask ${front.lastMask} lacks slot ${own}`);
    }
  }
});

test('bloom front: addMany sets the same bits, generations and watermarks as add() per hash, and scanMaybe answers what nextMaybe answers (property)', (t) => {
  const words = (hashes: Buffer, n: number): Uint32Array => {
    const w = new Uint32Array(n * 4);
    const v = viewOf(hashes);
    for (let i = 0; i < n; i++) for (let k = 0; k < 4; k++) w[4 * i + k] = v.getUint32(i * 16 + 4 * k);
    return w;
  };
  fc.assert(
    fc.property(
      // Batches: size, ms since the previous batch, whether the ring dropped a part-filled hot buffer before it (its record count restarts at 0 in the same block).
      fc.array(fc.tuple(fc.integer({ min: 1, max: 9000 }), fc.integer({ min: 0, max: 400 }), fc.boolean()), {
        minLength: 1,
        maxLength: 14,
      }),
      fc.constantFrom(0, BLOOM_MIN_GENERATIONS_PER_WINDOW),
      fc.integer({ min: 1, max: 1000 }),
      (batches, k, stream) => {
        const one = new BloomFront(60_000, k);
        const many = new BloomFront(60_000, k);
        let ms = 1_000;
        let offset = 0;
        let block = 0;
        let pos = 0;
        for (const [n, dt, dropHot] of batches) {
          ms += dt;
          if (dropHot) pos = 0;
          const hashes = hashRun(stream, offset, n);
          const w = words(hashes, n);
          for (let i = 0; i < n; i++) {
            const at = pos + i;
            one.add(w[4 * i]!, w[4 * i + 1]!, w[4 * i + 2]!, ms, offset + i, block + Math.floor(at / 4096), at % 4096);
          }
          many.addMany(w, n, ms, offset, block, pos);
          offset += n;
          pos += n;
          block += Math.floor(pos / 4096);
          pos %= 4096;
        }
        if (one.generations !== many.generations) return false;
        for (let g = 0; g < one.generations; g++) {
          if (one.minOffsetOf(g) !== many.minOffsetOf(g) || one.maxOffsetOf(g) !== many.maxOffsetOf(g)) return false;
          if (one.firstBlockOf(g) !== many.firstBlockOf(g) || one.slotShiftOf(g) !== many.slotShiftOf(g)) return false;
        }
        if (one.capacities().join() !== many.capacities().join()) return false;
        const a = [...one.arrays()];
        const b = [...many.arrays()];
        if (a.length !== b.length || a.some((x, i) => !Buffer.from(x.buffer).equals(Buffer.from(b[i]!.buffer)))) return false;
        // scanMaybe against nextMaybe, for stored hashes and absent ones.
        const queries = Buffer.concat([hashRun(stream, 0, Math.min(offset, 700)), hashRun(stream + 5000, 0, 700)]);
        const nq = queries.length / 16;
        const perGen: (number[] | undefined)[] = [];
        const perGenMasks: (number[] | undefined)[] = [];
        const flags = new Uint8Array(nq);
        const anyMaybe = many.scanMaybe(words(queries, nq), nq, perGen, perGenMasks, flags);
        const v = viewOf(queries);
        let expectAny = 0;
        const expectGen: number[][] = [];
        const expectMasks: number[][] = [];
        for (let i = 0; i < nq; i++) {
          const q = readWords(v, i * 16);
          const [q0, q1, q2] = [q[0]!, q[1]!, q[2]!];
          let g = one.nextMaybe(q0, q1, q2, one.generations - 1);
          if (g >= 0) expectAny++;
          if (g >= 0 !== (flags[i] === 1)) return false;
          while (g >= 0) {
            (expectGen[g] ??= []).push(i);
            (expectMasks[g] ??= []).push(one.lastMask);
            g = one.nextMaybe(q0, q1, q2, g - 1);
          }
        }
        if (anyMaybe !== expectAny) return false;
        for (let g = 0; g < one.generations; g++) {
          if ((perGen[g] ?? []).join() !== (expectGen[g] ?? []).join()) return false;
          if ((perGenMasks[g] ?? []).join() !== (expectMasks[g] ?? []).join()) return false;
        }
        return true;
      },
    ),
    { numRuns: 80 },
  );
  t.pass();
});
