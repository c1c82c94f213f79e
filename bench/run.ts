/**
 * The benchmark harness: `node dist/bench/run.js --quick|--full [--only a,b] [--tag NAME]`
 * (`make bench-quick` / `make bench` run it with PostgreSQL and Kafka up).
 *
 * Runs the suites in sequence, writes each suite's result to
 * bench/results/latest/ (with an .svg per curve) and a line to
 * bench/results/history/<suite>.jsonl, rewrites latest/summary[-quick].md, and
 * prints one table: suite, metric, measured, baseline, ratio, target,
 * MET/MISSED. A tagged run (an experiment) goes to history only. A miss is a
 * result, not a failure: the exit code is non-zero only when a suite could not
 * run at all.
 */
import { installRecordDecoder } from '../src/ingress/recordDecoder.js';
import { liveComponents } from '../src/util/lifecycle.js';
import { dropAllBenchDatabases } from './lib/db.js';
import { machineInfo } from './lib/machine.js';
import { StderrProgress } from './lib/progress.js';
import { renderTable, resultPath, rowsOf, writeSuite, writeSummary, type Row, type RunMeta } from './lib/report.js';
import type { Suite, SuiteResult } from './lib/types.js';
import { dedupCacheSuite } from './suites/dedupCacheTargets.js';
import { dedupCost } from './suites/dedupCost.js';
import { kafkaDuplicates } from './suites/kafkaDuplicates.js';
import { kafkaE2e } from './suites/kafkaE2e.js';
import { memoryPressure } from './suites/memoryPressure.js';
import { pushDuplicates } from './suites/pushDuplicates.js';
import { pushVsStored } from './suites/pushVsStored.js';
import { retentionCost } from './suites/retentionCost.js';
import { consume } from './suites/consume.js';
import { timerBurst } from './suites/timerBurst.js';
import { tracingCost } from './suites/tracingCost.js';

// Every kafkajs consumer of this process decodes records as the service
// does (src/ingress/recordDecoder.ts), the baselines (consume-only, the
// ON CONFLICT sink) included: installed first, so no suite's order decides
// which decoder another suite runs with, and a baseline is never slower
// here than the service's own client.
installRecordDecoder();

const SUITES: Suite[] = [
  pushVsStored,
  pushDuplicates,
  dedupCost,
  dedupCacheSuite,
  kafkaE2e,
  kafkaDuplicates,
  memoryPressure,
  retentionCost,
  consume,
  timerBurst,
  tracingCost,
];

function usage(msg?: string): never {
  if (msg) process.stderr.write(`bench: ${msg}\n`);
  process.stderr.write(`usage: node dist/bench/run.js --quick|--full [--only ${SUITES.map((s) => s.name).join(',')}] [--tag NAME]\n`);
  process.exit(2);
}

function parseArgs(argv: string[]): { quick: boolean; only: Set<string> | undefined; tag: string | undefined } {
  let quick: boolean | undefined;
  let only: Set<string> | undefined;
  let tag: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--quick') quick = true;
    else if (a === '--full') quick = false;
    else if (a === '--only' || a.startsWith('--only=')) {
      const v = a === '--only' ? argv[++i] : a.slice('--only='.length);
      if (!v) usage('--only needs a comma-separated list of suite names');
      only = new Set(
        v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      );
      for (const n of only) if (!SUITES.some((s) => s.name === n)) usage(`unknown suite "${n}"`);
    } else if (a === '--tag' || a.startsWith('--tag=')) {
      tag = a === '--tag' ? argv[++i] : a.slice('--tag='.length);
      if (!tag || !/^[A-Za-z0-9._-]{1,64}$/.test(tag)) usage('--tag needs a name of 1-64 characters of A-Z a-z 0-9 . _ -');
    } else if (a === '--help' || a === '-h') usage();
    else usage(`unknown argument "${a}"`);
  }
  if (quick === undefined) usage('choose --quick or --full');
  return { quick, only, tag };
}

async function main(): Promise<number> {
  const { quick, only, tag } = parseArgs(process.argv.slice(2));
  const adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) usage('DATABASE_URL is not set (make bench / make bench-quick set it)');
  const brokers = process.env.KAFKA_BROKERS?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const suites = SUITES.filter((s) => !only || only.has(s.name));
  const started = new Date();
  const meta: RunMeta = {
    mode: quick ? 'quick' : 'full',
    date: started.toISOString().slice(0, 10),
    startedAt: started.toISOString(),
    machine: await machineInfo(adminUrl, brokers),
    tag,
  };
  const progress = new StderrProgress();
  const rows: Row[] = [];
  const written: string[] = [];
  let crashed = 0;
  for (let i = 0; i < suites.length; i++) {
    const s = suites[i]!;
    progress.setSuite(i + 1, suites.length, s.name);
    const t0 = Date.now();
    let result: SuiteResult;
    let error: string | undefined;
    try {
      if (s.needsKafka && (!brokers || brokers.length === 0)) throw new Error('KAFKA_BROKERS is not set');
      result = await s.run({ quick, progress, adminUrl, brokers });
    } catch (err) {
      crashed++;
      error = err instanceof Error ? (err.stack ?? err.message) : String(err);
      progress.note(`FAILED: ${error}`);
      result = { name: s.name, params: {}, results: {}, samples: {}, targets: [] };
      await dropAllBenchDatabases();
    }
    const dur = (Date.now() - t0) / 1000;
    written.push(...(await writeSuite(meta, result, dur, error)));
    rows.push(...rowsOf(result, error));
    progress.note(`done in ${dur.toFixed(1)} s`);
  }
  const table = renderTable(rows);
  const missed = rows.filter((r) => r.status === 'MISSED').length;
  const met = rows.filter((r) => r.status === 'MET').length;
  const totalS = ((Date.now() - started.getTime()) / 1000).toFixed(0);
  const footer = [
    `${met} target(s) met, ${missed} missed; mode ${meta.mode}; ${totalS} s.`,
    '',
    'Files:',
    ...written.map((p) => `- ${resultPath(p)}`),
    ...(tag !== undefined ? ['', `Tagged run "${tag}": recorded in history only; latest/ is unchanged.`] : []),
  ];
  const summary = await writeSummary(meta, footer.slice(1));
  if (summary) written.push(summary);
  process.stdout.write(`\n${table}\n\n${footer[0]}\n`);
  process.stdout.write(`results: ${written.map(resultPath).join(', ')}\n`);
  const live = liveComponents();
  if (live.length > 0) {
    process.stderr.write(`bench: components left running: ${live.join(', ')}\n`);
    return 1;
  }
  // Sockets, servers or workers still open here would be a leak (pools not
  // ended, consumers not disconnected): name them.
  await new Promise((r) => setTimeout(r, 100));
  const open = process.getActiveResourcesInfo().filter((r) => !['TTYWrap', 'Timeout', 'PipeWrap', 'FSReqCallback'].includes(r));
  if (open.length > 0) process.stderr.write(`bench: still open after the run: ${open.join(', ')}\n`);
  return crashed > 0 ? 1 : 0;
}

let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) process.exit(130);
    stopping = true;
    process.stderr.write(`bench: ${sig}: dropping benchmark databases\n`);
    void dropAllBenchDatabases().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  });
}

main().then(
  (code) => {
    // Everything was stopped above; an explicit exit also covers a library
    // timer that would otherwise keep the event loop alive for seconds.
    process.exitCode = code;
    setTimeout(() => process.exit(code), 200).unref();
  },
  async (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    await dropAllBenchDatabases();
    process.exit(1);
  },
);
