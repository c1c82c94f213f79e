import test from 'ava';
import { LookupPlacement } from '../../src/fusion/lookupPlacement.js';

test('a partition whose lookups find nothing is looked up in the push; one that finds goes apart until two empty lookups', (t) => {
  const p = new LookupPlacement();
  t.true(p.inPush(1), 'nothing known: in the push');
  p.record(1, 0);
  t.true(p.inPush(1));
  p.record(1, 3);
  t.false(p.inPush(1), 'a lookup that found: apart');
  p.record(1, 0);
  t.false(p.inPush(1), 'one empty lookup is not enough');
  p.record(1, 0);
  t.true(p.inPush(1), 'two empty ones bring it back');
  t.true(p.inPush(2), 'another partition is not moved by one partition');
});

test('a partition it has not seen follows the share over every partition', (t) => {
  const p = new LookupPlacement();
  // Re-sent ids everywhere: most lookups find something.
  for (let pid = 0; pid < 200; pid++) p.record(pid, 1);
  t.false(p.inPush(10_000), 'an unseen partition goes apart when most lookups find');
  for (let pid = 0; pid < 400; pid++) p.record(pid, 0);
  t.true(p.inPush(10_001), 'and in the push once most find nothing');
});

test('pinned modes ignore what lookups found', (t) => {
  const apart = new LookupPlacement('apart');
  const inPush = new LookupPlacement('in-push');
  for (let i = 0; i < 4; i++) {
    apart.record(1, 0);
    inPush.record(1, 5);
  }
  t.false(apart.inPush(1));
  t.true(inPush.inPush(1));
});
