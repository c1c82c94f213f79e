import test from 'ava';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';

/** The sample lines of one metric family in a scrape, as "series value". */
function samples(text: string, name: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(name) && !l.startsWith('#'));
}

test('counters keep the single-label call style and expose TYPE counter', async (t) => {
  const m = new MetricsRegistry();
  const c = m.counter('queen_things_total', 'Things by outcome', 'outcome');
  c.inc(2, 'queued');
  c.inc(1, 'duplicate');
  c.inc(3, 'queued');
  t.is(c.get('queued'), 5);
  t.is(m.counter('queen_things_total', '').get('duplicate'), 1, 'lookup by name returns the same counter');
  const text = await m.render();
  t.true(text.includes('# TYPE queen_things_total counter'));
  t.deepEqual(samples(text, 'queen_things_total').sort(), [
    'queen_things_total{outcome="duplicate"} 1',
    'queen_things_total{outcome="queued"} 5',
  ]);
});

test('multi-label counters, and a plain label value on them is refused', (t) => {
  const m = new MetricsRegistry();
  const c = m.counter('queen_verdicts_total', 'v', ['source', 'status']);
  c.inc(4, { source: 'kafka', status: 'queued' });
  t.is(c.get({ source: 'kafka', status: 'queued' }), 4);
  t.is(c.get({ source: 'http', status: 'queued' }), 0);
  t.throws(() => c.inc(1, 'queued'), { instanceOf: RangeError });
});

test('a counter read from a monotonic source is a counter that follows the source', async (t) => {
  const m = new MetricsRegistry();
  let hydrations = 0;
  m.counterFrom('queen_hydrations_total', 'h', () => hydrations);
  hydrations = 3;
  t.deepEqual(samples(await m.render(), 'queen_hydrations_total'), ['queen_hydrations_total 3']);
  hydrations = 7;
  const text = await m.render();
  t.true(text.includes('# TYPE queen_hydrations_total counter'));
  t.deepEqual(samples(text, 'queen_hydrations_total'), ['queen_hydrations_total 7']);
});

test('gauges: set, computed, and labelled series that vanish when the source drops them', async (t) => {
  const m = new MetricsRegistry();
  m.gauge('queen_set', 's').set(2.5);
  let v = 1;
  m.gauge('queen_computed', 'c').collect(() => v);
  let parts: [Record<string, string>, number][] = [
    [{ partition: '0' }, 5],
    [{ partition: '1' }, 6],
  ];
  m.gauge('queen_lagish', 'l', ['partition']).collectLabeled(() => parts);
  v = 9;
  let text = await m.render();
  t.deepEqual(samples(text, 'queen_set'), ['queen_set 2.5']);
  t.deepEqual(samples(text, 'queen_computed'), ['queen_computed 9']);
  t.deepEqual(samples(text, 'queen_lagish'), ['queen_lagish{partition="0"} 5', 'queen_lagish{partition="1"} 6']);
  parts = [[{ partition: '1' }, 0]];
  text = await m.render();
  t.deepEqual(samples(text, 'queen_lagish'), ['queen_lagish{partition="1"} 0']);
});

test('histograms in seconds: buckets, sum and count per label set', async (t) => {
  const m = new MetricsRegistry();
  const h = m.histogram('queen_op_duration_seconds', 'd', { labelKeys: ['route'], buckets: [0.1, 1] });
  h.observe(0.05, { route: '/a' });
  h.observe(0.5, { route: '/a' });
  h.observe(2, { route: '/a' });
  t.is(h.count({ route: '/a' }), 3);
  const text = await m.render();
  t.true(text.includes('# TYPE queen_op_duration_seconds histogram'));
  t.true(text.includes('queen_op_duration_seconds_bucket{le="0.1",route="/a"} 1'));
  t.true(text.includes('queen_op_duration_seconds_bucket{le="1",route="/a"} 2'));
  t.true(text.includes('queen_op_duration_seconds_bucket{le="+Inf",route="/a"} 3'));
  t.true(text.includes('queen_op_duration_seconds_count{route="/a"} 3'));
});

test('a name registered as one kind cannot come back as another', (t) => {
  const m = new MetricsRegistry();
  m.counter('queen_x_total', 'x');
  t.throws(() => m.gauge('queen_x_total', 'x'), { instanceOf: TypeError });
});

test('build info and the default process metrics', async (t) => {
  const m = new MetricsRegistry();
  m.buildInfo('1.2.3', 'abc123');
  m.collectDefaults();
  m.collectDefaults();
  const text = await m.render();
  t.deepEqual(samples(text, 'queen_build_info'), ['queen_build_info{version="1.2.3",commit="abc123"} 1']);
  t.true(text.includes('# TYPE process_cpu_seconds_total counter'));
  t.true(text.includes('# TYPE nodejs_eventloop_lag_seconds gauge'));
});

test("process and Node.js defaults follow promtool's naming rules: no non-counter family ends in _total", async (t) => {
  const m = new MetricsRegistry();
  m.collectDefaults();
  const types = (await m.render())
    .split('\n')
    .filter((l) => l.startsWith('# TYPE '))
    .map((l) => l.split(' ').slice(2, 4) as [string, string]);
  t.true(
    types.some(([name]) => name === 'nodejs_active_handles'),
    'the per-type gauges stay',
  );
  t.deepEqual(
    types.filter(([name, type]) => type !== 'counter' && name.endsWith('_total')),
    [],
  );
});
