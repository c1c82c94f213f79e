import test from 'ava';
import { isReplacedCurve } from '../../bench/lib/report.js';

/** The stored results' bases in latest/ (one `<base>.json` each), as a run finds them. */
const BASES = ['kafka-dups', 'kafka-dups-quick', 'kafka-e2e', 'soak-retention', 'soak-retention-defaults', 'soak-retention-quick'];

test("a run replaces its own curves, and leaves the other mode's and other suites' that share its prefix", (t) => {
  // A full run of kafka-dups.
  t.true(isReplacedCurve('kafka-dups-recs-per-s.svg', 'kafka-dups', BASES));
  t.false(isReplacedCurve('kafka-dups-quick-recs-per-s.svg', 'kafka-dups', BASES), "the quick run's curve stays");
  t.false(isReplacedCurve('kafka-dups.json', 'kafka-dups', BASES));
  t.false(isReplacedCurve('kafka-e2e-latency.svg', 'kafka-dups', BASES));
  // A quick run.
  t.true(isReplacedCurve('kafka-dups-quick-recs-per-s.svg', 'kafka-dups-quick', BASES));
  t.false(isReplacedCurve('kafka-dups-recs-per-s.svg', 'kafka-dups-quick', BASES), "the full run's curve stays");
  // One suite's name is another's prefix.
  t.true(isReplacedCurve('soak-retention-table-sizes.svg', 'soak-retention', BASES));
  t.false(isReplacedCurve('soak-retention-defaults-table-sizes.svg', 'soak-retention', BASES));
  t.true(isReplacedCurve('soak-retention-defaults-table-sizes.svg', 'soak-retention-defaults', BASES));
  // A suite's first run (no result stored yet) still owns its own curves.
  t.true(isReplacedCurve('timer-burst-latency.svg', 'timer-burst', BASES));
});
