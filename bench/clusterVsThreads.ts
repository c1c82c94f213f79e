/**
 * The small check behind docs/scaling.md's "node:cluster, not worker_threads"
 * (issue 39). Not part of `make bench`, and no substitute for its
 * `workers 2 / workers 1` rows: it measures only what the two models cost
 * before any record flows.
 *
 *   node dist/bench/clusterVsThreads.js cluster
 *   node dist/bench/clusterVsThreads.js threads
 *
 * Two workers each load the broker's heavy libraries (fastify, kafkajs, pg,
 * prom-client, pino) and hold 200 000 small objects; once both are up it
 * prints the time since the first fork/spawn and the resident memory: for
 * cluster, the sum of each process's own RSS (primary included); for
 * threads, the one process's RSS.
 */
import cluster from 'node:cluster';
import { isMainThread, parentPort, Worker } from 'node:worker_threads';

const WORKERS = 2;
const mode = process.argv[2];
if (mode !== 'cluster' && mode !== 'threads') throw new Error('usage: clusterVsThreads.js cluster|threads');

const MiB = 2 ** 20;
let held: unknown[] = [];

async function loadLikeABroker(): Promise<void> {
  await Promise.all([import('fastify'), import('kafkajs'), import('pg'), import('prom-client'), import('pino')]);
  held = Array.from({ length: 200_000 }, (_, i) => ({ i, s: String(i).repeat(8) }));
}

const report = (startedAt: number, rssBytes: number, extra: Record<string, number> = {}) =>
  process.stdout.write(
    `${JSON.stringify({ mode, workers: WORKERS, upMs: Math.round(performance.now() - startedAt), rssMB: Math.round(rssBytes / MiB), ...extra })}\n`,
  );

if (mode === 'cluster') {
  if (cluster.isPrimary) {
    const t0 = performance.now();
    const rss: number[] = [];
    for (let i = 0; i < WORKERS; i++) cluster.fork();
    cluster.on('message', (_w, m: number) => {
      rss.push(m);
      if (rss.length < WORKERS) return;
      const primary = process.memoryUsage().rss;
      report(
        t0,
        rss.reduce((a, b) => a + b, primary),
        { primaryMB: Math.round(primary / MiB) },
      );
      for (const w of Object.values(cluster.workers ?? {})) w?.kill();
    });
  } else {
    await loadLikeABroker();
    process.send!(process.memoryUsage().rss);
  }
} else if (isMainThread) {
  const t0 = performance.now();
  let up = 0;
  const threads = Array.from({ length: WORKERS }, () => new Worker(new URL(import.meta.url), { argv: ['threads'] }));
  for (const w of threads)
    w.on('message', () => {
      if (++up < WORKERS) return;
      report(t0, process.memoryUsage().rss);
      for (const x of threads) void x.terminate();
    });
} else {
  await loadLikeABroker();
  parentPort!.postMessage(held.length);
}
