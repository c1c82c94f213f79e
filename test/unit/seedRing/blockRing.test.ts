import test from 'ava';
import fc from 'fast-check';
import { BlockRing } from '../../../bench/baselines/seedRing/blockRing.js';
import { BLOCK_BYTES, BLOCK_HASHES } from '../../../bench/baselines/seedRing/constants.js';
import {
  compareAcross,
  isSorted,
  lowerBound,
  readWords,
  sortItemsByHash,
  sortRecordsInPlace,
  viewOf,
} from '../../../bench/baselines/seedRing/hashRecords.js';
import { hashAt, hashRun } from '../dedup/helpers.js';

function has(ring: BlockRing, hash: Buffer, at = 0): boolean {
  const w = readWords(viewOf(hash), at);
  return ring.has(w[0]!, w[1]!, w[2]!, w[3]!);
}

test('sortRecordsInPlace sorts 16-byte records bytewise, in the same buffer (property, with first-word ties)', (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.uint8Array({ minLength: 12, maxLength: 12 })), {
        minLength: 0,
        maxLength: BLOCK_HASHES,
      }),
      (recs) => {
        const buf = Buffer.alloc(recs.length * 16);
        recs.forEach(([hi, lo], i) => {
          buf.writeUInt32BE(hi, i * 16); // tiny first words: many ties, so the tie-break path runs
          Buffer.from(lo).copy(buf, i * 16 + 4);
        });
        const expected = recs.map((_, i) => buf.subarray(i * 16, i * 16 + 16).toString('hex')).sort();
        const before = buf.buffer;
        sortRecordsInPlace(buf, recs.length);
        const got = recs.map((_, i) => buf.subarray(i * 16, i * 16 + 16).toString('hex'));
        return buf.buffer === before && isSorted(buf, recs.length) && JSON.stringify(got) === JSON.stringify(expected);
      },
    ),
    { numRuns: 150 },
  );
  t.pass();
});

test('sortRecordsInPlace: offsets travel with their records and equal records keep their order (property: uniform, crowded and repeated records)', (t) => {
  fc.assert(
    fc.property(
      fc.array(
        fc.oneof(
          // Uniform first words (buckets of about one), a crowded band (one big bucket), or a copy of an earlier record.
          fc.record({
            kind: fc.constant('uniform' as const),
            w: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
            lo: fc.integer({ min: 0, max: 7 }),
          }),
          fc.record({ kind: fc.constant('crowded' as const), w: fc.integer({ min: 0, max: 4095 }), lo: fc.integer({ min: 0, max: 7 }) }),
          fc.record({ kind: fc.constant('repeat' as const), w: fc.nat(), lo: fc.constant(0) }),
        ),
        { minLength: 0, maxLength: BLOCK_HASHES },
      ),
      (recs) => {
        const buf = Buffer.alloc(recs.length * 16);
        recs.forEach((r, i) => {
          if (r.kind === 'repeat' && i > 0) buf.copy(buf, i * 16, (r.w % i) * 16, (r.w % i) * 16 + 16);
          else {
            buf.writeUInt32BE(r.kind === 'crowded' ? r.w : r.w >>> 0, i * 16);
            buf.writeUInt32BE(r.lo, i * 16 + 12);
          }
        });
        const hex = (b: Buffer, i: number) => b.subarray(i * 16, i * 16 + 16).toString('hex');
        // Reference: a stable sort of (record, index).
        const expected = recs.map((_, i) => [hex(buf, i), i] as const).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]));
        const offsets = Uint32Array.from(recs.map((_, i) => i));
        sortRecordsInPlace(buf, recs.length, offsets);
        return expected.every(([h, i], j) => hex(buf, j) === h && offsets[j] === i);
      },
    ),
    { numRuns: 120 },
  );
  t.pass();
});

test('block ring: the hot buffer doubles and is sealed at exactly 4096 by handing off the same Buffer, sorted', (t) => {
  const ring = new BlockRing();
  const hashes = hashRun(1, 0, BLOCK_HASHES + 10);
  const caps: number[] = [];
  let hotBefore: Buffer | undefined;
  for (let i = 0; i < BLOCK_HASHES; i++) {
    ring.append(hashes.subarray(i * 16, i * 16 + 16), 0, 1, i, 1000);
    const info = ring.hotInfo();
    if (info && caps[caps.length - 1] !== info.capacity) caps.push(info.capacity);
    if (i === BLOCK_HASHES - 2) hotBefore = [...ring.buffers()].pop();
    if (i < BLOCK_HASHES - 1) t.is(ring.blockCount, 0);
  }
  t.deepEqual(caps, [16, 32, 64, 128, 256, 512, 1024, 2048, 4096], 'power-of-two doubling up to one block');
  t.is(ring.blockCount, 1, 'sealed the instant it reached 4096');
  t.is(ring.hotHashes, 0);
  const block = ring.sealedBlocks()[0]!;
  t.true(block.hashes === hotBefore, 'the seal is a hand-off of the same Buffer (no copy)');
  t.is(block.hashes.length, BLOCK_BYTES);
  t.true(isSorted(block.hashes, BLOCK_HASHES));
  t.is(block.minOffset, 0);
  t.is(block.maxOffset, BLOCK_HASHES - 1);
  ring.append(hashes, BLOCK_HASHES * 16, 10, BLOCK_HASHES, 2000);
  t.is(ring.hotHashes, 10);
  t.is(ring.hashCount, BLOCK_HASHES + 10);
});

test('block ring: membership is exact for present and absent hashes, across blocks and the hot buffer', (t) => {
  const ring = new BlockRing();
  const n = BLOCK_HASHES * 3 + 777;
  const present = hashRun(2, 0, n);
  // Appends of uneven sizes straddling block boundaries.
  let off = 0;
  for (const size of [1, 4000, 4096, 5000, 3000, n]) {
    const take = Math.min(size, n - off);
    if (take <= 0) break;
    ring.append(present, off * 16, take, off, 1000 + off);
    off += take;
  }
  t.is(ring.blockCount, 3);
  t.is(ring.hotHashes, 777);
  for (let i = 0; i < n; i++) if (!has(ring, present, i * 16)) t.fail(`present hash ${i} not found`);
  const absent = hashRun(3, 0, 20_000);
  let hits = 0;
  for (let i = 0; i < 20_000; i++) if (has(ring, absent, i * 16)) hits++;
  t.is(hits, 0);
  // A near miss: same first 12 bytes, different last word.
  const near = Buffer.from(present.subarray(16 * 5, 16 * 6));
  near.writeUInt32BE((near.readUInt32BE(12) + 1) >>> 0, 12);
  t.false(has(ring, near));
  // hasInRange finds a hash only through the units whose span meets the range.
  const w = readWords(viewOf(present), 16 * 5000);
  t.true(ring.hasInRange(w[0]!, w[1]!, w[2]!, w[3]!, 4096, 8191));
  t.true(ring.hasInRange(w[0]!, w[1]!, w[2]!, w[3]!, 5000, 5000));
  t.false(ring.hasInRange(w[0]!, w[1]!, w[2]!, w[3]!, 0, 4095));
  t.false(ring.hasInRange(w[0]!, w[1]!, w[2]!, w[3]!, 8192, n));
});

test('block ring: expiry drops only wholly pre-window front blocks and reports their highest offset', (t) => {
  const ring = new BlockRing();
  const h = hashRun(4, 0, BLOCK_HASHES * 3 + 5);
  // Block 0: created 1000..1999; block 1: 1500 and 5000 (mixed); block 2: 3000; hot: 6000.
  ring.append(h, 0, BLOCK_HASHES - 1, 0, 1000);
  ring.append(h, (BLOCK_HASHES - 1) * 16, 1, BLOCK_HASHES - 1, 1999);
  ring.append(h, BLOCK_HASHES * 16, 100, BLOCK_HASHES, 1500);
  ring.append(h, (BLOCK_HASHES + 100) * 16, BLOCK_HASHES - 100, BLOCK_HASHES + 100, 5000);
  ring.append(h, 2 * BLOCK_HASHES * 16, BLOCK_HASHES, 2 * BLOCK_HASHES, 3000);
  ring.append(h, 3 * BLOCK_HASHES * 16, 5, 3 * BLOCK_HASHES, 6000);
  t.is(ring.blockCount, 3);
  t.is(ring.expire(1999), undefined, 'block 0 has a hash created at the cutoff: kept');
  t.is(ring.expire(2000), BLOCK_HASHES - 1, 'block 0 wholly before the cutoff: dropped, max offset reported');
  t.is(ring.blockCount, 2);
  // Block 2 is wholly pre-cutoff but block 1 (its front) is not: front-only, so nothing drops.
  t.is(ring.expire(4500), undefined);
  t.is(ring.blockCount, 2);
  t.true(has(ring, h, 2 * BLOCK_HASHES * 16));
  t.is(ring.expire(5001), 3 * BLOCK_HASHES - 1);
  t.is(ring.blockCount, 0);
  t.is(ring.hotHashes, 5, 'the hot buffer goes only under the same rule');
  t.is(ring.expire(6000), undefined);
  t.is(ring.expire(6001), 3 * BLOCK_HASHES + 4);
  t.is(ring.hashCount, 0);
  t.is(ring.bytes, 0);
});

test('block ring: a hash held by two blocks stays known until its last block drops (no refcounts)', (t) => {
  const ring = new BlockRing();
  const dup = hashAt(77, 0);
  const a = hashRun(5, 0, BLOCK_HASHES);
  dup.copy(a, 100 * 16);
  const b = hashRun(6, 0, BLOCK_HASHES);
  dup.copy(b, 3000 * 16);
  ring.append(a, 0, BLOCK_HASHES, 0, 1000);
  ring.append(b, 0, BLOCK_HASHES, BLOCK_HASHES, 2000);
  t.is(ring.blockCount, 2);
  t.true(has(ring, dup));
  t.is(ring.expire(1500), BLOCK_HASHES - 1);
  t.true(has(ring, dup), 'still in the second block');
  t.is(ring.expire(2500), 2 * BLOCK_HASHES - 1);
  t.false(has(ring, dup));
});

test('block ring: offsets must grow along the ring', (t) => {
  const ring = new BlockRing();
  ring.append(hashRun(7, 0, 2), 0, 2, 10, 0);
  t.throws(() => ring.append(hashRun(7, 2, 1), 0, 1, 11, 0), { instanceOf: RangeError });
  t.notThrows(() => ring.append(hashRun(7, 2, 1), 0, 1, 20, 0));
});

test('block ring: no Buffer it holds exceeds one 64 KiB block, at any fill (property)', (t) => {
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 1, max: 9000 }), { minLength: 1, maxLength: 8 }), (sizes) => {
      const ring = new BlockRing();
      let off = 0;
      for (const [i, n] of sizes.entries()) {
        ring.append(hashRun(8 + i, 0, n), 0, n, off, i);
        off += n;
        for (const b of ring.buffers()) if (b.length > BLOCK_BYTES || b.buffer.byteLength > BLOCK_BYTES) return false;
        for (const blk of ring.sealedBlocks()) if (blk.hashes.length !== BLOCK_BYTES) return false;
      }
      return ring.hashCount === off;
    }),
    { numRuns: 60 },
  );
  t.pass();
});

test('block ring: sealed blocks are sorted and every lookup agrees with a model (property, repeated hashes, a crowded hot index)', (t) => {
  fc.assert(
    fc.property(
      // Append sizes (1 .. 700 straddles hot-buffer growth and block seals),
      // hash picks from a small pool, so one hash sits at several offsets,
      // and whether the append announces more to follow (a hydration).
      // Crowded: every pooled hash shares its last word, the hot index's
      // probe key, so every hot record sits in one probe run (wrapping
      // around the index) and only the full compare tells them apart.
      fc.array(fc.tuple(fc.integer({ min: 1, max: 700 }), fc.integer({ min: 0, max: 2 ** 31 }), fc.boolean()), {
        minLength: 1,
        maxLength: 16,
      }),
      fc.integer({ min: 50, max: 3000 }),
      fc.boolean(),
      (appends, poolSize, crowded) => {
        const ring = new BlockRing();
        const pool = hashRun(9, 0, poolSize);
        if (crowded) for (let k = 0; k < poolSize; k++) pool.writeUInt32BE(0xfffffff0, k * 16 + 12);
        const model = new Map<string, number[]>();
        let offset = 0;
        for (const [size, seed, more] of appends) {
          const src = Buffer.alloc(size * 16);
          for (let k = 0; k < size; k++) {
            const pick = (Math.imul(seed + k, 0x9e3779b1) >>> 0) % poolSize;
            pool.copy(src, k * 16, pick * 16, pick * 16 + 16);
            const key = src.subarray(k * 16, k * 16 + 16).toString('hex');
            model.set(key, [...(model.get(key) ?? []), offset + k]);
          }
          ring.append(src, 0, size, offset, 1000, more ? 1000 : 0);
          offset += size;
          for (const blk of ring.sealedBlocks()) if (!isSorted(blk.hashes, BLOCK_HASHES)) return false;
          // Every pooled hash: membership, and collectManyInRange (one query)
          // over a random range names every model occurrence in it, and only
          // true ones.
          for (let p = 0; p < poolSize; p += 7) {
            const h = pool.subarray(p * 16, p * 16 + 16);
            const occ = model.get(h.toString('hex')) ?? [];
            if (has(ring, h) !== occ.length > 0) return false;
            const lo = (p * 131) % Math.max(1, offset);
            const hi = lo + ((p * 17) % 2000);
            const out: (number[] | undefined)[] = [];
            if (!ring.collectManyInRange(viewOf(h), Int32Array.of(0), 1, lo, hi, out)) return false;
            const got = out[0] ?? [];
            for (const o of occ) if (o >= lo && o <= hi && !got.includes(o)) return false;
            for (const o of got) if (!occ.includes(o)) return false;
          }
          // Many queries at once, in hash order (one of them twice): each
          // gets every model occurrence in the range, and only true ones.
          const picks = Array.from({ length: 1 + (seed % 40) }, (_, k) => (Math.imul(seed + 7 * k, 0x85ebca6b) >>> 0) % poolSize);
          picks.push(picks[0]!);
          const qbuf = Buffer.alloc(picks.length * 16);
          picks.forEach((pick, k) => pool.copy(qbuf, k * 16, pick * 16, pick * 16 + 16));
          const qv = viewOf(qbuf);
          const order = Int32Array.from(picks.keys()).sort((x, y) => compareAcross(qv, x * 16, qv, y * 16));
          const lo = seed % Math.max(1, offset);
          const hi = lo + (seed % 5000);
          const many: (number[] | undefined)[] = [];
          if (!ring.collectManyInRange(qv, order, order.length, lo, hi, many)) return false;
          for (let k = 0; k < picks.length; k++) {
            const occ = model.get(qbuf.subarray(k * 16, k * 16 + 16).toString('hex')) ?? [];
            const got = many[k] ?? [];
            for (const o of occ) if (o >= lo && o <= hi && !got.includes(o)) return false;
            for (const o of got) if (!occ.includes(o)) return false;
          }
        }
        return true;
      },
    ),
    { numRuns: 60 },
  );
  t.pass();
});

test('lowerBound finds the first record at or above the query from any start, on uniform and on clustered first words (property)', (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 2 ** 32 - 1 }), fc.integer({ min: 0, max: 3 })), { minLength: 0, maxLength: 600 }),
      fc.boolean(),
      fc.array(fc.tuple(fc.integer({ min: 0, max: 2 ** 32 - 1 }), fc.integer({ min: 0, max: 3 })), { minLength: 1, maxLength: 20 }),
      fc.nat(),
      (recs, clustered, queries, fromSeed) => {
        // Clustered: every first word in a narrow band, so the uniform guess is far off.
        const word = (w: number) => (clustered ? 0x7fff0000 + (w % 64) : w);
        const buf = Buffer.alloc(recs.length * 16);
        recs.forEach(([w, lo], i) => {
          buf.writeUInt32BE(word(w), i * 16);
          buf.writeUInt32BE(lo, i * 16 + 12);
        });
        sortRecordsInPlace(buf, recs.length);
        const v = viewOf(buf);
        const q = Buffer.alloc(16);
        for (const [w, lo] of queries) {
          q.fill(0);
          q.writeUInt32BE(word(w), 0);
          q.writeUInt32BE(lo, 12);
          const qw = readWords(viewOf(q), 0);
          const from = recs.length === 0 ? 0 : fromSeed % (recs.length + 1);
          let expect = from;
          while (expect < recs.length && compareAcross(v, expect * 16, viewOf(q), 0) < 0) expect++;
          if (lowerBound(v, from, recs.length, qw[0]!, qw[1]!, qw[2]!, qw[3]!) !== expect) return false;
        }
        // A query equal to a stored record, from 0: the first of its equals.
        if (recs.length > 0) {
          const k = fromSeed % recs.length;
          const qw = readWords(v, k * 16);
          let first = k;
          while (first > 0 && compareAcross(v, (first - 1) * 16, v, k * 16) === 0) first--;
          if (lowerBound(v, 0, recs.length, qw[0]!, qw[1]!, qw[2]!, qw[3]!) !== first) return false;
        }
        return true;
      },
    ),
    { numRuns: 300 },
  );
  t.pass();
});

test('block ring: a slot filter searches only the blocks its masks name (block number = hashes before it / 4096), the hot buffer included', (t) => {
  const ring = new BlockRing();
  const n = 5 * BLOCK_HASHES + 100; // blocks 0..4 sealed, the hot buffer is block 5
  const hashes = hashRun(21, 0, n);
  const target = hashAt(22, 0);
  for (const at of [BLOCK_HASHES + 7, 3 * BLOCK_HASHES + 9, 5 * BLOCK_HASHES + 50]) target.copy(hashes, at * 16);
  ring.append(hashes, 0, n, 1000, 1);
  const q = viewOf(target);
  const collect = (mask: number, firstBlock: number, slotShift: number): number[] => {
    const out: (number[] | undefined)[] = [];
    t.true(ring.collectManyInRange(q, Int32Array.of(0), 1, 0, 1_000_000, out, { masks: Int32Array.of(mask), firstBlock, slotShift }));
    return (out[0] ?? []).sort((a, b) => a - b);
  };
  const all = [1000 + BLOCK_HASHES + 7, 1000 + 3 * BLOCK_HASHES + 9, 1000 + 5 * BLOCK_HASHES + 50];
  t.deepEqual(collect(0b101010, 0, 0), all, 'slots 1, 3, 5: every occurrence');
  t.deepEqual(collect(0b000010, 0, 0), [all[0]], 'slot 1 only: block 1');
  t.deepEqual(collect(0b100000, 0, 0), [all[2]], 'slot 5 only: the hot buffer');
  t.deepEqual(collect(0b010101, 0, 0), [], 'slots of the other blocks: nothing');
  t.deepEqual(collect(0b000001, 1, 0), [all[0]], 'numbering from block 1: slot 0 is block 1');
  t.deepEqual(collect(0b000110, 0, 1), all.slice(1), 'two blocks per slot: slots 1 and 2 are blocks 2..5');
  t.deepEqual(collect(0b000001, 2, 0), [all[0]], 'a block before the first slot is searched for every query, later ones by slot');
  // Without a filter: everything, as before.
  const out: (number[] | undefined)[] = [];
  ring.collectManyInRange(q, Int32Array.of(0), 1, 0, 1_000_000, out);
  t.deepEqual(
    (out[0] ?? []).sort((a, b) => a - b),
    all,
  );
  t.true(
    ring.hasInRange(
      ...(Array.from(readWords(q, 0)) as [number, number, number, number]),
      0,
      1_000_000,
      { masks: Int32Array.of(0b1000), firstBlock: 0, slotShift: 0 },
      0,
    ),
  );
  t.false(
    ring.hasInRange(
      ...(Array.from(readWords(q, 0)) as [number, number, number, number]),
      0,
      1_000_000,
      { masks: Int32Array.of(0b10101), firstBlock: 0, slotShift: 0 },
      0,
    ),
  );
});

test('sortItemsByHash orders item indexes by their whole hash, equal hashes in the given order (property: uniform, shared first words, repeats)', (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 2 ** 31 })), { minLength: 1, maxLength: 300 }),
      fc.integer({ min: 0, max: 2 ** 31 }),
      (spec, seed) => {
        const n = spec.length;
        const buf = Buffer.alloc(n * 16);
        for (let i = 0; i < n; i++) {
          const [kind, x] = spec[i]!;
          hashAt(seed, x).copy(buf, i * 16);
          if (kind === 1) buf.writeUInt32BE(0xdeadbeef, i * 16); // shared first word, different rest
          if (kind === 2 && i > 0) buf.copy(buf, i * 16, (x % i) * 16, (x % i) * 16 + 16); // a repeat
        }
        const v = viewOf(buf);
        const items = Array.from({ length: n }, (_, i) => i).filter((i) => (seed + i) % 5 !== 0);
        if (items.length === 0) return true;
        const want = [...items].sort((x, y) => compareAcross(v, x * 16, v, y * 16) || x - y);
        return Array.from(sortItemsByHash(v, items).subarray(0, items.length)).join() === want.join();
      },
    ),
    { numRuns: 300 },
  );
  t.pass();
});
