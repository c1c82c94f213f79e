import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { freePort } from './freePort.js';
import { fileURLToPath } from 'node:url';
import type { Admin, Consumer } from 'kafkajs';
import { cpuSince, cpuSnapshot, watchPod, type CpuDelta } from './cpu.js';
import { groupProgress, kafkaClient } from './kafka.js';
import { parsePromText, promSum, type PromSample } from './promText.js';
import { sleep } from './stats.js';

/**
 * The real service as a pod: `node dist/src/main.js` spawned with
 * QUEEN_WORKERS=N (docs/scaling.md), consuming one topic into one queue with
 * its own consumer group, against the bench's PostgreSQL and Kafka. The
 * in-process ingest (lib/stack.ts) cannot fork workers; this can, and it
 * measures the process an operator runs, primary included.
 *
 * Timing starts when every worker is a member of the group
 * (`queen_kafka_consumer_up` is 1 in the pod's /metrics: the minimum over
 * the workers), as the in-process ingest's starts when its consumer joined.
 * With records already in the topic that is not enough on its own: the first
 * worker to join would drain alone until the second one's join rebalances
 * the group, and at bench sizes it could finish before that. So a gate holds
 * the group (holdGroup): every worker's JoinGroup waits in the broker until
 * all of them have asked, and then they are assigned together.
 */

/** dist/bench/lib -> dist/src/main.js: the built service. */
const MAIN = fileURLToPath(new URL('../../src/main.js', import.meta.url));

/** Pods still running: SIGKILLed if the bench process exits without stopping them (Ctrl-C, a crash). */
const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

export interface ServicePodOptions {
  databaseUrl: string;
  brokers: string[];
  topic: string;
  queue: string;
  group: string;
  workers: number;
  /** QUEEN_PG_POOL_SIZE, for the whole pod (each worker gets floor(pool / N)). */
  poolSize: number;
  /** QUEEN_DEDUP_CACHE_MB, for the whole pod (each worker gets 1/N). */
  cacheMb: number;
  /**
   * Hold the group until every worker has asked to join (holdGroup). Needs
   * records in the topic (the holder must be inside a batch); a paced run
   * whose topic is empty at the start needs no gate.
   */
  gate: boolean;
  /** Until every worker is a member; default 180 s. */
  startTimeoutMs?: number;
}

/**
 * A member of the group that takes no part in the next rebalance: it joins
 * first, stays inside its first batch, and keeps heartbeating from there
 * without rejoining. A join by anyone else then waits in the broker (the
 * group prepares a rebalance until every member rejoined, up to the
 * holder's rebalance timeout). `release()` stops its heartbeats: the broker
 * expires it after its session timeout (6 s, the broker's minimum) and
 * completes the join with every member that asked meanwhile, all in one
 * generation. A kafkajs consumer cannot leave while inside a batch, and
 * leaving by returning from it first rejoins (tried: the waiting member was
 * assigned half the partitions and then all of them), hence the expiry.
 * `end()` lets it go after the measurement; it commits nothing.
 */
export interface GroupGate {
  release(): void;
  end(): Promise<void>;
}

export async function holdGroup(brokers: string[], group: string, topic: string, timeoutMs = 60_000): Promise<GroupGate> {
  const consumer: Consumer = kafkaClient(brokers, 'queen-bench-gate').consumer({
    groupId: group,
    sessionTimeout: 6_000,
    rebalanceTimeout: 120_000,
    heartbeatInterval: 1_000,
  });
  let holding = true;
  let ended = false;
  let entered!: () => void;
  const inside = new Promise<void>((resolve) => (entered = resolve));
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async (batch) => {
        entered();
        while (!ended) {
          // REBALANCE_IN_PROGRESS while the others wait: still a heartbeat for the broker.
          if (holding) await batch.heartbeat().catch(() => undefined);
          await sleep(200);
        }
      },
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      inside,
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`the group gate got no batch of ${topic} within ${timeoutMs} ms (is it empty?)`)),
          timeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  } catch (err) {
    ended = true;
    await consumer.disconnect().catch(() => undefined);
    throw err;
  }
  return {
    release() {
      holding = false;
    },
    async end() {
      ended = true;
      await consumer.disconnect().catch(() => undefined);
    },
  };
}

/** Resident set of one process (VmRSS), bytes; 0 when it is gone. */
function rssOf(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

export class ServicePod {
  /** performance.now() when every worker was seen a member of the group. */
  joinedAt = NaN;
  /** Worker pids from `queen_worker_info` (with one worker: the process itself). */
  workerPids: number[] = [];
  private output = '';
  private readonly exited: Promise<void>;
  private exitedAs: string | undefined;
  private gate: GroupGate | undefined;
  private unwatch: () => void = () => undefined;

  private constructor(
    readonly opts: ServicePodOptions,
    readonly port: number,
    readonly child: ChildProcess,
  ) {
    const keep = (d: Buffer): void => void (this.output = (this.output + d.toString()).slice(-4000));
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    this.exited = new Promise((resolve) =>
      child.on('exit', (code, signal) => {
        running.delete(child);
        this.exitedAs = signal ?? String(code);
        resolve();
      }),
    );
  }

  /**
   * Spawns the pod and resolves once every worker is a member of the group
   * (joinedAt), its pids known and watched by lib/cpu.ts (`podMs`).
   */
  static async start(o: ServicePodOptions, admin: Admin): Promise<ServicePod> {
    const gate = o.gate ? await holdGroup(o.brokers, o.group, o.topic) : undefined;
    let pod: ServicePod | undefined;
    try {
      const port = await freePort();
      const child = spawn(process.execPath, [MAIN], {
        env: {
          PATH: process.env.PATH ?? '',
          // The Makefile's young-generation setting (and whatever else the bench runs with), as the image sets it.
          ...(process.env.NODE_OPTIONS ? { NODE_OPTIONS: process.env.NODE_OPTIONS } : {}),
          DATABASE_URL: o.databaseUrl,
          KAFKA_BROKERS: o.brokers.join(','),
          KAFKA_CLIENT_ID: 'queen-bench-pod',
          QUEEN_WORKERS: String(o.workers),
          QUEEN_PG_POOL_SIZE: String(o.poolSize),
          QUEEN_DEDUP_CACHE_MB: String(o.cacheMb),
          QUEEN_INGRESS_TOPICS: `${o.topic}:${o.queue}`,
          QUEEN_INGRESS_GROUP: o.group,
          QUEEN_HTTP_PORT: String(port),
          QUEEN_HTTP_HOST: '127.0.0.1',
          QUEEN_LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      running.add(child);
      pod = new ServicePod(o, port, child);
      pod.gate = gate;
      const deadline = performance.now() + (o.startTimeoutMs ?? 180_000);
      const waitUntil = async (what: string, ok: () => Promise<boolean>): Promise<void> => {
        for (;;) {
          pod!.alive();
          if (await ok().catch(() => false)) return;
          if (performance.now() > deadline) throw new Error(`service pod (${o.workers} workers): ${what} not seen in time; ${pod!.tail()}`);
          await sleep(25);
        }
      };
      if (gate) {
        // Every worker's JoinGroup is waiting in the broker (the holder is the one member more).
        await waitUntil('every worker asking to join', async () => {
          const d = await admin.describeGroups([o.group]);
          return (d.groups[0]?.members.length ?? 0) >= o.workers + 1;
        });
        gate.release();
      }
      let samples: PromSample[] = [];
      await waitUntil('every worker a group member', async () => {
        samples = await pod!.scrape();
        return promSum(samples, 'queen_workers') === o.workers && promSum(samples, 'queen_kafka_consumer_up') === 1;
      });
      pod.joinedAt = performance.now();
      pod.workerPids = samples.filter((s) => s.name === 'queen_worker_info').map((s) => Number(s.labels.pid));
      pod.unwatch = watchPod(() => pod!.pids);
      return pod;
    } catch (err) {
      if (pod) await pod.stop();
      else await gate?.end();
      throw err;
    }
  }

  /** The primary (with one worker, the broker itself) and every worker. */
  get pids(): number[] {
    return [...new Set([this.child.pid!, ...this.workerPids])];
  }

  /** Throws if the pod exited. */
  alive(): void {
    if (this.exitedAs !== undefined) throw new Error(`service pod exited (${this.exitedAs}); ${this.tail()}`);
  }

  tail(): string {
    return `its last output: ${this.output.trim().split('\n').slice(-5).join(' | ')}`;
  }

  /** The pod's /metrics (summed over its workers). */
  async scrape(): Promise<PromSample[]> {
    const r = await fetch(`http://127.0.0.1:${this.port}/metrics`, { signal: AbortSignal.timeout(10_000) });
    const text = await r.text();
    if (!r.ok) throw new Error(`/metrics answered ${r.status}: ${text.slice(0, 200)}`);
    return parsePromText(text);
  }

  /** Resident set of every process of the pod, bytes (pages the primary and workers share counted in each). */
  rss(): { total: number; byPid: Record<string, number> } {
    const byPid: Record<string, number> = {};
    let total = 0;
    for (const pid of this.pids) total += byPid[String(pid)] = rssOf(pid);
    return { total, byPid };
  }

  /** SIGTERM (the pod drains), SIGKILL if it is still up 10 s past its shutdown timeout; then the gate goes. */
  async stop(): Promise<void> {
    this.unwatch();
    if (this.exitedAs === undefined) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 25_000);
      await this.exited;
      clearTimeout(timer);
    }
    await this.gate?.end();
  }
}

export interface PodDrain {
  /** Records committed between joinedAt and the caught-up (or timed-out) moment. */
  records: number;
  /** Committed before joinedAt (0 with the gate: nobody was assigned before). */
  committedAtJoin: number;
  seconds: number;
  recordsPerS: number;
  timedOut: boolean;
  /** CPU over the drain; `podMs` is the pod's primary and workers. */
  cpu: CpuDelta;
  /** The largest pod RSS seen while draining (sampled at every poll), bytes, and its split by pid. */
  rssPeak: { total: number; byPid: Record<string, number> };
}

/**
 * Times the pod draining `topic` (ends: its high watermarks): from joinedAt
 * until the group's committed offsets reach every partition's end, polled
 * every 25 ms, or `timeoutMs` (then timedOut, with the records committed so
 * far over the time waited).
 */
export async function drainTimed(pod: ServicePod, admin: Admin, ends: Map<number, number>, timeoutMs: number): Promise<PodDrain> {
  const c0 = cpuSnapshot();
  const t0 = pod.joinedAt;
  const { group, topic } = pod.opts;
  const at0 = await groupProgress(admin, group, topic, ends);
  let peak = pod.rss();
  for (;;) {
    pod.alive();
    const g = await groupProgress(admin, group, topic, ends);
    const now = performance.now();
    const r = pod.rss();
    if (r.total > peak.total) peak = r;
    const timedOut = !g.done && now - t0 > timeoutMs;
    if (g.done || timedOut) {
      const seconds = (now - t0) / 1000;
      const records = g.committed - at0.committed;
      return {
        records,
        committedAtJoin: at0.committed,
        seconds,
        recordsPerS: records / seconds,
        timedOut,
        cpu: cpuSince(c0),
        rssPeak: peak,
      };
    }
    await sleep(25);
  }
}

/**
 * QUEEN_BENCH_PART=workers: kafka-e2e and kafka-dups run only their
 * service-pod rows (workers 1 against 2, and kafka-e2e's CPU per record), to
 * check those alone; with QUEEN_BENCH_RECORDS / QUEEN_BENCH_STORED they run
 * at other sizes. Meant with --tag, so latest/ keeps the whole suites' runs.
 */
export function workerRowsOnly(): boolean {
  return process.env.QUEEN_BENCH_PART === 'workers';
}

export function sizeOverride(name: 'QUEEN_BENCH_RECORDS' | 'QUEEN_BENCH_STORED', dflt: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number, got "${v}"`);
  return n;
}

/** Node / PostgreSQL / Kafka CPU µs per record of a drain (Kafka: the broker's pid when found, else every java process). */
export function cpuPerRecord(cpu: CpuDelta, records: number): { node: number; postgres: number; kafka: number } {
  const us = (ms: number): number => (ms * 1000) / records;
  return { node: us(cpu.podMs), postgres: us(cpu.postgresMs), kafka: us(Number.isFinite(cpu.brokerMs) ? cpu.brokerMs : cpu.kafkaMs) };
}
