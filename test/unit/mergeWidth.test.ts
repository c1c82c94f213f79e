import test from 'ava';
import fc from 'fast-check';
import { MergeWidth } from '../../src/compaction/mergeWidth.js';

/**
 * The compactor's merge width (src/compaction/mergeWidth.ts): the fan-out
 * until a partition has shown, over enough built hashes, that its runs are
 * rarely read; then WIDE_FACTOR times it, and back as soon as reads rise.
 */
const E = MergeWidth.MIN_EVIDENCE;

test('a partition merges at the fan-out until enough hashes were built to judge it', (t) => {
  const w = new MergeWidth(4);
  t.is(w.widthFor(1), 4, 'never seen');
  w.noteBuilt(1, E - 1);
  t.is(w.widthFor(1), 4, 'too little evidence, even with no reads at all');
  w.noteBuilt(1, 1);
  t.is(w.widthFor(1), 16, 'no reads over MIN_EVIDENCE hashes: wide');
});

test('reads at or above WIDE_BELOW of the hashes built keep the merges narrow; below it they go wide', (t) => {
  const w = new MergeWidth(4);
  w.noteBuilt(7, 1_000_000);
  w.noteReads(7, MergeWidth.WIDE_BELOW * 1_000_000);
  t.is(w.widthFor(7), 4, 'at the threshold: narrow');
  const v = new MergeWidth(4);
  v.noteBuilt(7, 1_000_000);
  v.noteReads(7, MergeWidth.WIDE_BELOW * 1_000_000 - 1);
  t.is(v.widthFor(7), 16, 'under it: wide');
  // A lookup-heavy partition (a tenth of its ids re-sent, each looked up) stays narrow.
  const heavy = new MergeWidth(4);
  heavy.noteBuilt(3, 1_000_000);
  heavy.noteReads(3, 100_000);
  t.is(heavy.widthFor(3), 4);
});

test('partitions are judged apart', (t) => {
  const w = new MergeWidth(2);
  w.noteBuilt(1, 2 * E);
  w.noteBuilt(2, 2 * E);
  w.noteReads(2, E);
  t.is(w.widthFor(1), 2 * MergeWidth.WIDE_FACTOR);
  t.is(w.widthFor(2), 2);
});

test('the counts describe the recent past: reads that stopped long ago stop holding the merges narrow', (t) => {
  const w = new MergeWidth(4);
  w.noteBuilt(1, MergeWidth.HORIZON);
  w.noteReads(1, MergeWidth.HORIZON / 10);
  t.is(w.widthFor(1), 4);
  // Each HORIZON built since halves the old reads; about five horizons with no reads bring them under the threshold.
  for (let k = 0; k < 6; k++) w.noteBuilt(1, MergeWidth.HORIZON);
  t.is(w.widthFor(1), 16);
  // And new reads bring it back at once.
  w.noteReads(1, MergeWidth.HORIZON / 10);
  t.is(w.widthFor(1), 4);
});

test('at most MAX_PARTITIONS are tracked: past the cap the least recently compacted go, and a forgotten partition merges narrow until judged again', (t) => {
  const w = new MergeWidth(4);
  w.noteBuilt(0, E);
  w.noteReads(1, E); // partition 1: searched, never compacted yet
  for (let p = 2; p < MergeWidth.MAX_PARTITIONS; p++) w.noteReads(p, 1);
  t.is(w.trackedPartitions, MergeWidth.MAX_PARTITIONS);
  w.noteBuilt(0, 1); // partition 0 compacted again: now the most recent
  w.noteReads(MergeWidth.MAX_PARTITIONS, 1); // one past the cap: pruned to three quarters, oldest first
  t.is(w.trackedPartitions, Math.floor((MergeWidth.MAX_PARTITIONS * 3) / 4));
  t.is(w.widthFor(0), 16, 'kept, and still judged wide');
  // Partition 1's reads were forgotten with it: what it builds now is judged alone.
  w.noteBuilt(1, E);
  t.is(w.widthFor(1), 16);
});

test('however many partitions are noted, at most MAX_PARTITIONS are kept', (t) => {
  const w = new MergeWidth(4);
  // 4 x the cap of one-item segments over distinct partitions, as a bundle spread over 100 k partitions sends.
  for (let p = 0; p < 4 * MergeWidth.MAX_PARTITIONS; p++) w.noteReads(p, 1);
  t.true(w.trackedPartitions <= MergeWidth.MAX_PARTITIONS);
});

test('the width is always the fan-out or WIDE_FACTOR times it, whatever is noted', (t) => {
  t.notThrows(() =>
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 16 }),
        fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 3 }), fc.integer({ min: -5, max: 5_000_000 })), { maxLength: 60 }),
        (fanout, notes) => {
          const w = new MergeWidth(fanout);
          for (const [built, pid, n] of notes) {
            if (built) w.noteBuilt(pid, n);
            else w.noteReads(pid, n);
          }
          for (let pid = 0; pid < 4; pid++) {
            const width = w.widthFor(pid);
            if (width !== fanout && width !== fanout * MergeWidth.WIDE_FACTOR) return false;
          }
          return true;
        },
      ),
    ),
  );
});

test('a fan-out under 2 is refused', (t) => {
  t.throws(() => new MergeWidth(1), { instanceOf: RangeError });
  t.throws(() => new MergeWidth(2.5), { instanceOf: RangeError });
});
