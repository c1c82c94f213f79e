import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { freePort } from '../lib/freePort.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createBenchDatabase } from '../lib/db.js';
import { machineInfo } from '../lib/machine.js';
import { writeResult, type RunMeta } from '../lib/report.js';
import { lineChartSvg } from '../lib/svg.js';
import { rng } from '../lib/rng.js';
import { target, type Info } from '../lib/types.js';

/**
 * `make soak-memory`: does the service's memory level off?
 *
 * Starts the real service (node dist/src/main.js, HTTP only) on a private
 * database, drives mixed HTTP traffic at it with keep-alive for a bounded time
 * (pushes over an ever-growing set of partitions with 10 % re-sent ids,
 * configures, queue reads, bad input of every kind, health and metrics
 * scrapes), and records the process's RSS and heap (memProbe.ts, loaded with
 * --import) and the dedup cache's resident bytes (/metrics) over time.
 *
 * Verdict: the dedup cache is allowed to grow up to its budget
 * (QUEEN_DEDUP_CACHE_MB); everything else must level off. So the series that
 * must be flat is RSS minus the cache's resident bytes: its slope over the
 * second half of the run is reported, and the soak fails when that slope is
 * above QUEEN_SOAK_MAX_SLOPE_MIB_MIN (default 1 MiB/min).
 *
 * Settings (env): QUEEN_SOAK_SECONDS (4200, see below), QUEEN_SOAK_CONCURRENCY (8),
 * QUEEN_SOAK_DEDUP_CACHE_MB (the service default when unset), QUEEN_SOAK_PARTITIONS
 * (partition names per queue, 2000; 5 queues),
 * QUEEN_SOAK_MAX_SLOPE_MIB_MIN (1), MALLOC_ARENA_MAX (passed to the service:
 * tells glibc arena growth from a native leak), QUEEN_SOAK_TAG (a variant's
 * name: recorded in history only, so it does not replace the default run).
 * Results: bench/results/latest/soak-memory.{json,svg} and a line in
 * bench/results/history/soak-memory.jsonl (lib/report.ts).
 */

const MIB = 1024 * 1024;
const MAIN = fileURLToPath(new URL('../../src/main.js', import.meta.url));
const PROBE = fileURLToPath(new URL('./memProbe.js', import.meta.url));

/**
 * 70 minutes by default: longer than the longest window the traffic
 * configures (3600 s), so that the second half, whose slope is the verdict,
 * comes after the cache and everything that grows with it had their whole
 * windows to fill. A 10-minute run (the default before) measured that
 * start-up and failed on it (2.71 and 4.33 MiB/min), where 70 and 75
 * minutes of the same traffic levelled off (0.17 and 0.31 MiB/min;
 * docs/memory.md).
 */
const seconds = Number(process.env.QUEEN_SOAK_SECONDS ?? 4200);
const concurrency = Number(process.env.QUEEN_SOAK_CONCURRENCY ?? 8);
const cacheMb = process.env.QUEEN_SOAK_DEDUP_CACHE_MB;
const maxSlope = Number(process.env.QUEEN_SOAK_MAX_SLOPE_MIB_MIN ?? 1);
/** Partition names per queue the traffic reaches (new ones appear at 20/s until then); 5 queues. */
const partitionCap = Number(process.env.QUEEN_SOAK_PARTITIONS ?? 2000);
/**
 * The dedup window the traffic configures. Unset: 600-3600 s at random, so over
 * a 10-minute run every hash stays in the cache and the cache only grows. Set
 * it well below the run length (e.g. 90) to see the cache reach a steady state,
 * which is what makes "RSS minus the cache levels off" a test of the rest.
 */
const windowSeconds = process.env.QUEEN_SOAK_WINDOW_SECONDS === undefined ? undefined : Number(process.env.QUEEN_SOAK_WINDOW_SECONDS);

interface Sample {
  t: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

/** Least-squares slope of y over x. */
function slope(points: readonly [number, number][]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p[0], 0) / n;
  const my = points.reduce((s, p) => s + p[1], 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

async function main(): Promise<void> {
  const adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) throw new Error('DATABASE_URL is not set (run through scripts/with-deps.sh, as `make soak-memory` does)');
  const db = await createBenchDatabase(adminUrl, 'soak_memory');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const dir = join(tmpdir(), `queen-soak-${process.pid}`);
  await mkdir(dir, { recursive: true });
  const probeFile = join(dir, 'probe.jsonl');
  writeFileSync(probeFile, '');
  const child = spawn(process.execPath, ['--import', PROBE, MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: db.url,
      QUEEN_HTTP_PORT: String(port),
      QUEEN_HTTP_HOST: '127.0.0.1',
      QUEEN_LOG_LEVEL: 'warn',
      // The soak's subject is one process's memory (its probe samples the heap
      // of the process it is preloaded into): one broker, no workers.
      QUEEN_WORKERS: '1',
      QUEEN_SOAK_PROBE_FILE: probeFile,
      QUEEN_SOAK_PROBE_MS: '1000',
      ...(cacheMb ? { QUEEN_DEDUP_CACHE_MB: cacheMb } : {}),
      ...(process.env.MALLOC_ARENA_MAX ? { MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX } : {}),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  let dead = false;
  void exited.then(() => (dead = true));

  const counts = new Map<string, number>();
  const count = (k: string): void => void counts.set(k, (counts.get(k) ?? 0) + 1);
  const cacheSamples: [number, number][] = [];
  let requests = 0;
  let fiveHundreds = 0;
  const started = Date.now();
  try {
    for (let i = 0; ; i++) {
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- set by the child's exit listener while start-up awaited
      if (dead) throw new Error(`the service exited during start-up: ${stderr}`);
      if (
        await fetch(`${base}/health`)
          .then((r) => r.ok)
          .catch(() => false)
      )
        break;
      if (i > 600) throw new Error('the service did not become healthy within 60 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const deadline = Date.now() + seconds * 1000;
    const resent: string[] = [];

    const send = async (method: string, path: string, body?: string | Buffer): Promise<void> => {
      const res = await fetch(`${base}${path}`, {
        method,
        ...(body !== undefined ? { body, headers: { 'content-type': 'application/json' } } : {}),
      });
      await res.arrayBuffer();
      requests++;
      count(String(res.status));
      if (res.status >= 500) fiveHundreds++;
    };

    const worker = async (w: number): Promise<void> => {
      const r = rng(1000 + w);
      let seq = 0;
      while (Date.now() < deadline && !dead) {
        const x = r();
        const elapsed = (Date.now() - started) / 1000;
        // The partition space grows (new names all the time, as a churning producer set sends) up to the cap.
        const partitions = Math.min(partitionCap, 100 + Math.floor(elapsed * 20));
        const queue = `soak-${Math.floor(r() * 5)}`;
        try {
          if (x < 0.7) {
            const n = 1 + Math.floor(r() * 20);
            const items = Array.from({ length: n }, () => {
              let txn: string;
              if (resent.length > 0 && r() < 0.1) txn = resent[Math.floor(r() * resent.length)]!;
              else {
                txn = `w${w}-${seq++}`;
                if (resent.length < 10_000) resent.push(txn);
                else resent[Math.floor(r() * resent.length)] = txn;
              }
              return {
                queue,
                partition: `p-${Math.floor(r() * partitions)}`,
                transactionId: txn,
                payload: { at: Date.now(), w, s: 'x'.repeat(150 + Math.floor(r() * 100)) },
              };
            });
            await send('POST', '/api/v1/push', JSON.stringify({ items }));
          } else if (x < 0.75) {
            await send(
              'POST',
              '/api/v1/configure',
              JSON.stringify({ queue, options: { dedupWindowSeconds: windowSeconds ?? 600 + Math.floor(r() * 3000) } }),
            );
          } else if (x < 0.85) {
            await send('GET', `/api/v1/resources/queues/${queue}`);
          } else if (x < 0.95) {
            const bad = Math.floor(r() * 6);
            if (bad === 0) await send('POST', '/api/v1/push', '{"items": [');
            else if (bad === 1)
              await send('POST', '/api/v1/push', JSON.stringify({ items: [{ queue, partition: `u-\ud800-${seq++}`, payload: 1 }] }));
            else if (bad === 2)
              await send(
                'POST',
                '/api/v1/push',
                JSON.stringify({
                  items: [
                    { queue: 'no spaces', payload: 1 },
                    { queue, transactionID: 'typo', payload: 1 },
                  ],
                }),
              );
            else if (bad === 3) await send('GET', `/api/v1/resources/queues/${'x'.repeat(129 + Math.floor(r() * 3000))}`);
            else if (bad === 4) await send('POST', '/api/v1/configure', JSON.stringify({ queue, mode: null }));
            else await send('GET', `/api/v1/nope/${seq++}`);
          } else {
            await send('GET', r() < 0.5 ? '/health' : '/metrics');
          }
        } catch (err) {
          count(`error:${(err as Error).message}`);
          // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- set by the child's exit listener
          if (dead) return;
        }
      }
    };

    const scrape = setInterval(() => {
      void fetch(`${base}/metrics`)
        .then((r) => r.text())
        .then((text) => {
          const m = /^queen_dedup_resident_bytes(?:\{[^}]*\})? (\S+)$/m.exec(text);
          if (m) cacheSamples.push([Date.now(), Number(m[1])]);
        })
        .catch(() => undefined);
    }, 5000);
    const progress = setInterval(() => {
      const last = readProbe(probeFile).at(-1);
      process.stderr.write(
        `soak-memory: ${Math.round((Date.now() - started) / 1000)} s, ${requests} requests, rss ${last ? (last.rss / MIB).toFixed(0) : '?'} MiB\n`,
      );
    }, 30_000);
    try {
      await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
    } finally {
      clearInterval(scrape);
      clearInterval(progress);
    }
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- set by the child's exit listener while the soak awaited
    if (dead) throw new Error(`the service died during the soak: ${stderr}`);
  } finally {
    child.kill('SIGTERM');
    await exited;
    await db.drop().catch(() => undefined);
  }

  // ---- analysis -----------------------------------------------------------
  const samples = readProbe(probeFile);
  await rm(dir, { recursive: true, force: true });
  const t0 = samples[0]?.t ?? started;
  const min = (t: number): number => (t - t0) / 60_000;
  const cacheAt = (t: number): number => {
    let v = 0;
    for (const [ct, b] of cacheSamples) if (ct <= t) v = b;
    return v;
  };
  const rssMinusCache = samples.map((s) => [min(s.t), (s.rss - cacheAt(s.t)) / MIB] as [number, number]);
  const half = rssMinusCache.filter(([m]) => m >= min(samples.at(-1)!.t) / 2);
  const secondHalfSlope = slope(half);
  const rssSlope = slope(samples.filter((s) => min(s.t) >= min(samples.at(-1)!.t) / 2).map((s) => [min(s.t), s.rss / MIB]));
  const heapSlope = slope(samples.filter((s) => min(s.t) >= min(samples.at(-1)!.t) / 2).map((s) => [min(s.t), s.heapUsed / MIB]));
  const levelsOff = secondHalfSlope <= maxSlope;
  const first = samples[0]!;
  const last = samples.at(-1)!;
  const maxRss = Math.max(...samples.map((s) => s.rss));
  const budget = Number(cacheMb ?? 512);

  const startedAt = new Date(started).toISOString();
  const result = {
    name: 'soak-memory',
    date: new Date().toISOString(),
    startedAt,
    params: {
      seconds,
      concurrency,
      dedupWindowSeconds: windowSeconds ?? '600-3600 at random',
      dedupCacheMb: budget,
      maxSlopeMibPerMin: maxSlope,
      partitionsPerQueue: partitionCap,
      queues: 5,
    },
    results: {
      requests,
      requestsPerSecond: Math.round(requests / ((Date.now() - started) / 1000)),
      fiveHundreds,
      statuses: Object.fromEntries(counts),
      rssStartMiB: +(first.rss / MIB).toFixed(1),
      rssEndMiB: +(last.rss / MIB).toFixed(1),
      rssMaxMiB: +(maxRss / MIB).toFixed(1),
      heapUsedEndMiB: +(last.heapUsed / MIB).toFixed(1),
      dedupResidentEndMiB: +(cacheAt(last.t) / MIB).toFixed(1),
      rssMinusCacheEndMiB: +((last.rss - cacheAt(last.t)) / MIB).toFixed(1),
      secondHalfSlopeMiBPerMin: { rssMinusCache: +secondHalfSlope.toFixed(2), rss: +rssSlope.toFixed(2), heapUsed: +heapSlope.toFixed(2) },
      levelsOff,
      bound: `RSS <= dedup budget (${budget} MiB) + ${((maxRss - Math.max(0, ...cacheSamples.map((c) => c[1]))) / MIB).toFixed(0)} MiB observed`,
    },
    samples: { memory: samples, dedupResidentBytes: cacheSamples },
  };
  const meta: RunMeta = {
    mode: seconds >= 600 ? 'full' : 'quick',
    date: startedAt.slice(0, 10),
    startedAt,
    machine: await machineInfo(adminUrl, undefined),
    tag: process.env.QUEEN_SOAK_TAG || undefined,
  };
  const svg = lineChartSvg({
    name: 'soak-memory',
    title: `Service memory under ${concurrency} mixed HTTP clients (${requests} requests)`,
    xLabel: 'minutes',
    yLabel: 'MiB',
    series: [
      { name: 'RSS', points: samples.map((s) => [min(s.t), s.rss / MIB]) },
      { name: 'heap used', points: samples.map((s) => [min(s.t), s.heapUsed / MIB]) },
      { name: 'dedup cache resident', points: cacheSamples.map(([t, b]) => [min(t), b / MIB]) },
      { name: 'RSS - dedup cache', points: rssMinusCache },
    ],
  });
  // The soak's two pass criteria (it exits non-zero when either fails), as
  // the summary's rows; the rest of its numbers as info rows.
  const targets = [
    target('5xx answers', fiveHundreds, '<=', 0),
    target('memory outside the dedup cache, slope over the second half (MiB/min)', secondHalfSlope, '<=', maxSlope),
  ];
  const info: Info[] = [
    { name: 'requests (per second)', value: `${requests} (${result.results.requestsPerSecond}/s)` },
    {
      name: 'RSS start / end / max (MiB)',
      value: `${result.results.rssStartMiB} / ${result.results.rssEndMiB} / ${result.results.rssMaxMiB}`,
    },
    { name: 'dedup cache resident at the end (MiB)', value: `${result.results.dedupResidentEndMiB}`, baseline: `${budget} MiB budget` },
    { name: 'bound', value: result.results.bound },
  ];
  const durationSeconds = Math.round((Date.now() - started) / 100) / 10;
  const written = await writeResult(
    meta,
    'soak-memory',
    { ...result, suite: 'soak-memory', durationSeconds, targets, info, machine: meta.machine },
    [{ name: 'memory', svg }],
    { durationSeconds, params: result.params, results: result.results, targets, info },
  );
  process.stdout.write(`${JSON.stringify(result.results, null, 1)}\n${written.map((w) => `wrote ${w}`).join('\n')}\n`);
  if (fiveHundreds > 0) throw new Error(`${fiveHundreds} requests answered 5xx`);
  if (!levelsOff)
    throw new Error(
      `memory outside the dedup cache still grows at ${secondHalfSlope.toFixed(2)} MiB/min over the second half (limit ${maxSlope})`,
    );
}

function readProbe(file: string): Sample[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as Sample);
}

main().catch((err: unknown) => {
  process.stderr.write(`soak-memory failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
