import test from 'ava';
import fc from 'fast-check';
import { LeaderTable } from '../../src/engine/leaderTable.js';

/** Word arrays of n hashes given as 4 words each. */
function wordsOf(hashes: readonly (readonly number[])[]): Uint32Array {
  const w = new Uint32Array(hashes.length * 4);
  hashes.forEach((h, k) => w.set(h, k * 4));
  return w;
}

test('an equal hash finds its first holder; hashes sharing only their first word stay apart', (t) => {
  const w = wordsOf([
    [7, 1, 2, 3],
    [7, 1, 2, 4], // same first three words, last differs
    [7, 9, 2, 3], // same first word, second differs
    [7, 1, 2, 3], // equal to item 0
    [7, 1, 2, 4], // equal to item 1
  ]);
  const table = new LeaderTable(w);
  t.is(table.findOrAdd(0), -1);
  t.is(table.findOrAdd(1), -1);
  t.is(table.findOrAdd(2), -1);
  t.is(table.findOrAdd(3), 0);
  t.is(table.findOrAdd(4), 1);
  t.is(table.count, 3);
});

test('model: over random hashes with repeats and shared first words, each item finds the first item with its 16 bytes', (t) => {
  fc.assert(
    fc.property(
      // Few distinct words, so first-word clashes and full repeats are common;
      // up to 2 000 items, so the table doubles several times.
      fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 3 }), fc.nat(40)), { minLength: 1, maxLength: 2000 }),
      (specs) => {
        const hashes = specs.map(([a, b, c]) => [a * 0x40000000 + 64, b, c, a ^ c]);
        const table = new LeaderTable(wordsOf(hashes));
        const first = new Map<string, number>();
        hashes.forEach((h, k) => {
          const key = h.join(',');
          const expected = first.get(key) ?? -1;
          if (expected < 0) first.set(key, k);
          if (table.findOrAdd(k) !== expected) throw new Error(`item ${k} (${key}) answered other than ${expected}`);
        });
        return table.count === first.size;
      },
    ),
    { numRuns: 200 },
  );
  t.pass();
});
