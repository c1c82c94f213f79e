import pg from 'pg';
import { TimerSweeper } from '../../src/timers/timerSweeper.js';
import { MetricsRegistry } from '../../src/telemetry/metrics.js';

/**
 * A broker's timer sweeper as its own OS process, stopped dead at a chosen
 * point: it claims the due timers and appends their frames in one fire
 * transaction, prints "claimed N" and then waits before COMMIT, so the test
 * can kill -9 it between claim and commit.
 *
 * Usage: node timerFireChild.js DATABASE_URL
 */
const url = process.argv[2];
if (!url) throw new Error('usage: timerFireChild DATABASE_URL');
const pool = new pg.Pool({ connectionString: url, max: 2 });
const sweeper = new TimerSweeper({
  pool,
  pollMs: 10,
  batch: 1000,
  metrics: new MetricsRegistry(),
  beforeCommit: async (claimed) => {
    process.stdout.write(`${JSON.stringify({ msg: 'claimed', n: claimed.length })}\n`);
    await new Promise(() => undefined);
  },
});
// The sweeper's wait is unref'd (a service lives on its HTTP server and
// consumer, not its background loops); this process has nothing else, so it
// holds itself open until the test kills it.
setInterval(() => undefined, 60_000);
await sweeper.start();
