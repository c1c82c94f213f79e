import test from 'ava';
import { LookupPlacement } from '../../src/fusion/lookupPlacement.js';

test('a partition whose lookups find nothing is looked up in the push; one that finds goes apart until its share halves twice', (t) => {
  const p = new LookupPlacement();
  t.true(p.inPush([1]), 'nothing known: in the push');
  p.record(1, 0);
  t.true(p.inPush([1]));
  p.record(1, 3);
  t.false(p.inPush([1]), 'a lookup that found: apart');
  p.record(1, 0);
  t.true(p.inPush([1]), 'its share halved (a quarter): in the push again, alone');
  p.record(2, 1);
  t.false(p.inPush([1, 2]), 'but not in a bundle with a partition that just found one: their expected finds add up');
  p.record(1, 0);
  t.true(p.inPush([1, 3]), 'an eighth, with an unseen partition at the global share');
});

test('the bundle decides: many segments, each unlikely to find, still go apart when their expected finds add up', (t) => {
  const p = new LookupPlacement();
  // One-item segments, a tenth of them re-sent ids: the global share moves to ~0.1.
  for (let pid = 0; pid < 1000; pid++) p.record(pid, pid % 10 === 0 ? 1 : 0);
  t.false(p.inPush(Array.from({ length: 100 }, (_, i) => 5000 + i)), 'a hundred unseen partitions at ~0.1 each expect ~10 finds: apart');
  t.true(p.inPush([5000, 5001]), 'two of them expect ~0.2: in the push');
  t.true(p.inPush([1, 11, 21, 31, 41]), 'five partitions whose one lookup found nothing, when the global share was still low');
});

test('a partition it has not seen follows the share over every partition', (t) => {
  const p = new LookupPlacement();
  // Re-sent ids everywhere: most lookups find something.
  for (let pid = 0; pid < 200; pid++) p.record(pid, 1);
  t.false(p.inPush([10_000]), 'an unseen partition goes apart when most lookups find');
  for (let pid = 0; pid < 400; pid++) p.record(pid, 0);
  t.true(p.inPush([10_001]), 'and in the push once most find nothing');
});

test('pinned modes ignore what lookups found', (t) => {
  const apart = new LookupPlacement('apart');
  const inPush = new LookupPlacement('in-push');
  for (let i = 0; i < 4; i++) {
    apart.record(1, 0);
    inPush.record(1, 5);
  }
  t.false(apart.inPush([1]));
  t.true(inPush.inPush([1]));
});
