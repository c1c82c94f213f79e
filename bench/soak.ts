/**
 * Soaks: long runs that are not part of `make bench` or `make test`.
 *   node dist/bench/soak.js retention [--minutes 30] [--retention 300] [--window 600] [--service-defaults] [--loops N: 4 with --service-defaults, else 2]
 * (`make soak-retention` runs it with PostgreSQL up.) Results and curves go
 * to bench/results/latest/ and history/ like the benchmarks' (a run shorter
 * than 30 minutes as mode quick; QUEEN_SOAK_TAG=NAME records an experiment
 * in history only).
 */
import { parseArgs } from 'node:util';
import { dropAllBenchDatabases } from './lib/db.js';
import { machineInfo } from './lib/machine.js';
import { StderrProgress } from './lib/progress.js';
import { renderTable, resultPath, rowsOf, writeSuite, writeSummary, type RunMeta } from './lib/report.js';
import { retentionSoak } from './suites/retentionSoak.js';

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    args: process.argv.slice(2),
    allowPositionals: true,
    options: {
      minutes: { type: 'string' },
      retention: { type: 'string' },
      window: { type: 'string' },
      'service-defaults': { type: 'boolean' },
      rate: { type: 'string' },
      loops: { type: 'string' },
    },
  });
  if (positionals[0] !== 'retention' || positionals.length !== 1) {
    process.stderr.write(
      'usage: node dist/bench/soak.js retention [--minutes N] [--retention SECONDS] [--window SECONDS] [--service-defaults] [--rate MSG_PER_S] [--loops N]\n',
    );
    return 2;
  }
  const adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) throw new Error('DATABASE_URL is not set (make soak-retention sets it)');
  const num = (v: string | undefined, d: number) => (v === undefined ? d : Number(v));
  const sp = { minutes: num(values.minutes, 30), retentionSeconds: num(values.retention, 300), windowSeconds: num(values.window, 600) };
  for (const [k, v] of Object.entries(sp)) if (!(v > 0)) throw new Error(`--${k} must be a positive number`);
  const serviceDefaults = values['service-defaults'] === true;
  // A fixed asked rate instead of half the measured maximum: two builds compared at the same load.
  const rate = values.rate === undefined ? undefined : Number(values.rate);
  if (rate !== undefined && !(rate > 0)) throw new Error('--rate must be a positive number');
  const loops = values.loops === undefined ? undefined : Number(values.loops);
  const started = new Date();
  const quick = sp.minutes < 30;
  const meta: RunMeta = {
    mode: quick ? 'quick' : 'full',
    date: started.toISOString().slice(0, 10),
    startedAt: started.toISOString(),
    machine: await machineInfo(adminUrl, undefined),
    tag: process.env.QUEEN_SOAK_TAG || undefined,
  };
  const progress = new StderrProgress();
  progress.setSuite(1, 1, 'soak-retention');
  const t0 = Date.now();
  const result = await retentionSoak({ quick, progress, adminUrl, brokers: undefined }, { ...sp, serviceDefaults, rate, loops });
  const written = await writeSuite(meta, result, (Date.now() - t0) / 1000);
  // The summary of this mode is rebuilt from every suite's latest result, as
  // after a benchmark run, so it never shows a soak's previous numbers.
  const summary = await writeSummary(meta, ['Files:', ...written.map((f) => `- ${resultPath(f)}`)]);
  if (summary !== undefined) written.push(summary);
  process.stdout.write(`\n${renderTable(rowsOf(result))}\nresults: ${written.join(', ')}\n`);
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
    setTimeout(() => process.exit(code), 200).unref();
  },
  async (err: unknown) => {
    process.stderr.write(`soak: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    await dropAllBenchDatabases();
    process.exit(1);
  },
);
