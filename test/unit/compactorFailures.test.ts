import test from 'ava';
import { pino } from 'pino';
import { defaultPipelineOptions, WritePipeline } from '../../src/pipeline.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';
import { waitFor } from '../helpers/leaks.js';

/**
 * A compaction pass that fails is counted and logged where it is handled (the
 * compactor's loop), through the logger the pipeline is given: the service
 * passes its own, so an operator sees why QueenCompactionFailing fired. No
 * PostgreSQL is needed: the pool points at a port nothing listens on, so every
 * step fails to connect.
 */
test('each failed compaction pass is counted and logged once, through the pipeline logger', async (t) => {
  const lines: { level: number; msg: string; err?: string; component?: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as (typeof lines)[number]) }).child({
    component: 'compaction',
  });
  const metrics = new MetricsRegistry();
  const pipeline = new WritePipeline(defaultPipelineOptions('postgres://nobody@127.0.0.1:1/none', { metrics, compactionLogger: logger }));
  const compactor = pipeline.compactor;
  if (compactor === undefined) return t.fail('the default pipeline has a compactor');
  try {
    await compactor.start();
    compactor.request(7);
    const line = await waitFor('a logged compaction failure', () =>
      lines.find((l) => l.msg === 'compaction pass failed; its partitions are asked for again'),
    );
    t.is(line.level, 40, 'a warning');
    t.is(line.component, 'compaction');
    t.truthy(line.err, 'the cause is in the line');
    t.true(metrics.counter('queen_compaction_failures_total', '').get() >= 1);
    // The failed partition is asked for again: a later pass fails and logs again.
    await waitFor('a second failed pass', () => lines.length >= 2);
    t.true(metrics.counter('queen_compaction_failures_total', '').get() >= 2);
  } finally {
    await compactor.stop();
    await pipeline.engine.pool.end();
  }
  // One line per failed pass, no other log line for it.
  t.true(lines.every((l) => l.msg === 'compaction pass failed; its partitions are asked for again'));
});
