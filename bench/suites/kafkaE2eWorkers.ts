import type { Admin } from 'kafkajs';
import type pg from 'pg';
import { addCpu, fmtShares, listenerPid, watchBroker } from '../lib/cpu.js';
import { settle } from '../lib/gc.js';
import { createTopic, kafkaClient, uniqueName } from '../lib/kafka.js';
import { CommitLatencyProbe, pacedLatency } from '../lib/latency.js';
import { promSum } from '../lib/promText.js';
import { cpuPerRecord, drainTimed, ServicePod, type PodDrain } from '../lib/servicePod.js';
import { fmt, median } from '../lib/stats.js';
import { target, type Info, type SuiteContext, type Target } from '../lib/types.js';

/**
 * kafka-e2e's service-pod rows (docs/scaling.md, "To measure"): the real
 * service (`node dist/src/main.js`, lib/servicePod.ts) with QUEEN_WORKERS=1
 * and =2 draining the suite's produced topic, each with a fresh group and
 * queue, the two arms back to back in every repetition (1 2, 2 1, ...), with
 * the same pod-wide QUEEN_PG_POOL_SIZE and QUEEN_DEDUP_CACHE_MB. Then the
 * one-worker pod paced at 20 k records/s on a topic of its own, for its CPU
 * per record under a live producer.
 */

export interface WorkerRowsParams {
  records: number;
  reps: number;
  poolSize: number;
  cacheMb: number;
  topicPartitions: number;
  keys: number;
  payloadBytes: number;
  tickMs: number;
  latencySeconds: number;
  latencyWarmupSeconds: number;
  drainTimeoutMs: number;
}

export const PACED_RATE = 20_000;

export interface WorkerRows {
  targets: Target[];
  info: Info[];
  notes: string[];
  results: Record<string, unknown>;
  samples: Record<string, unknown>;
}

const MB = 1024 * 1024;

export async function measureWorkerRows(
  ctx: SuiteContext,
  p: WorkerRowsParams,
  io: {
    admin: Admin;
    brokers: string[];
    databaseUrl: string;
    pool: pg.Pool;
    topic: string;
    ends: Map<number, number>;
    /** Topics and groups made here, for the suite's cleanup. */
    topics: string[];
    groups: string[];
    step: () => number;
    totalSteps: number;
  },
): Promise<WorkerRows> {
  const [host, port] = io.brokers[0]!.split(':');
  const brokerPid = listenerPid(host!, Number(port));
  watchBroker(brokerPid);
  try {
    const drains = new Map<number, PodDrain[]>([
      [1, []],
      [2, []],
    ]);
    const pairs: number[] = [];
    const checks: string[] = [];
    for (let r = 0; r < p.reps; r++) {
      const order = r % 2 === 0 ? [1, 2] : [2, 1];
      const got = new Map<number, number>();
      for (const workers of order) {
        ctx.progress.step(
          io.step(),
          io.totalSteps,
          `rep ${r + 1}/${p.reps}: service pod, QUEEN_WORKERS=${workers}, draining ${fmt(p.records)} records`,
        );
        const group = uniqueName(`bench-pod${workers}`);
        io.groups.push(group);
        const queue = `e2e_pod${workers}_r${r}`;
        await settle();
        const pod = await ServicePod.start(
          {
            databaseUrl: io.databaseUrl,
            brokers: io.brokers,
            topic: io.topic,
            queue,
            group,
            workers,
            poolSize: p.poolSize,
            cacheMb: p.cacheMb,
            gate: true,
          },
          io.admin,
        );
        let d: PodDrain;
        try {
          d = await drainTimed(pod, io.admin, io.ends, p.drainTimeoutMs);
        } finally {
          await pod.stop();
        }
        if (d.timedOut)
          throw new Error(`service pod (${workers} workers) did not drain ${fmt(p.records)} records within ${p.drainTimeoutMs} ms`);
        const c = await io.pool.query(
          'SELECT coalesce(sum(lp.last_offset + 1), 0)::bigint AS n FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id WHERE q.name = $1',
          [queue],
        );
        checks.push(
          `pod ${workers}w rep ${r + 1}: ${c.rows[0].n} messages stored, ${d.committedAtJoin} committed before every worker was a member`,
        );
        drains.get(workers)!.push(d);
        got.set(workers, d.recordsPerS);
        const u = cpuPerRecord(d.cpu, d.records);
        ctx.progress.note(
          `${workers} worker(s): ${fmt(d.recordsPerS)} records/s; CPU per record Node ${u.node.toFixed(1)} / PostgreSQL ${u.postgres.toFixed(1)} / Kafka ${u.kafka.toFixed(1)} µs; RSS peak ${(d.rssPeak.total / MB).toFixed(0)} MB`,
        );
      }
      pairs.push(got.get(2)! / got.get(1)!);
    }

    // Paced: the one-worker pod on an empty topic (no gate needed: nothing to
    // drain before every worker joined), then the Java producer at 20 k/s.
    ctx.progress.step(
      io.step(),
      io.totalSteps,
      `service pod, QUEEN_WORKERS=1, paced at ${fmt(PACED_RATE)} records/s: ${p.latencyWarmupSeconds} s warm-up + ${p.latencySeconds} s measured`,
    );
    const pacedTopic = uniqueName('bench-pod-paced');
    io.topics.push(pacedTopic);
    await createTopic(kafkaClient(io.brokers), pacedTopic, p.topicPartitions);
    const pacedGroup = uniqueName('bench-pod-paced');
    io.groups.push(pacedGroup);
    const pod = await ServicePod.start(
      {
        databaseUrl: io.databaseUrl,
        brokers: io.brokers,
        topic: pacedTopic,
        queue: 'e2e_pod_paced',
        group: pacedGroup,
        workers: 1,
        poolSize: p.poolSize,
        cacheMb: p.cacheMb,
        gate: false,
      },
      io.admin,
    );
    // Records the pod verified inside the measured window: its own counter, read as the window opens and closes.
    const counted: Promise<number | undefined>[] = [];
    const verified = (): Promise<number | undefined> =>
      pod.scrape().then(
        (s) => promSum(s, 'queen_ingress_records_total'),
        () => undefined,
      );
    let paced;
    try {
      paced = await pacedLatency(ctx.progress, new CommitLatencyProbe(), {
        brokers: io.brokers,
        topic: pacedTopic,
        group: pacedGroup,
        rate: PACED_RATE,
        seconds: p.latencyWarmupSeconds + p.latencySeconds,
        warmupSeconds: p.latencyWarmupSeconds,
        keys: p.keys,
        payloadBytes: p.payloadBytes,
        tickMs: p.tickMs,
        label: 'pod-paced',
        onWindow: () => void counted.push(verified()),
      });
    } finally {
      await pod.stop();
    }
    const [v0, v1] = await Promise.all(counted);
    const pacedRecords = v0 !== undefined && v1 !== undefined ? v1 - v0 : NaN;
    const pacedNodeUs = (paced.cpu.podMs * 1000) / pacedRecords;

    const w1 = drains.get(1)!;
    const w2 = drains.get(2)!;
    const rate = (ds: PodDrain[]): number => median(ds.map((d) => d.recordsPerS));
    const perRecord = (ds: PodDrain[]): { node: number; postgres: number; kafka: number } => {
      const xs = ds.map((d) => cpuPerRecord(d.cpu, d.records));
      return { node: median(xs.map((x) => x.node)), postgres: median(xs.map((x) => x.postgres)), kafka: median(xs.map((x) => x.kafka)) };
    };
    const u1 = perRecord(w1);
    const u2 = perRecord(w2);
    const us = (u: { node: number; postgres: number; kafka: number }): string =>
      `${u.node.toFixed(1)} / ${u.postgres.toFixed(1)} / ${u.kafka.toFixed(1)} µs`;
    const rssMb = (ds: PodDrain[]): number => median(ds.map((d) => d.rssPeak.total / MB));
    const rssSplit = (d: PodDrain): string =>
      Object.values(d.rssPeak.byPid)
        .map((b) => (b / MB).toFixed(0))
        .join(' + ');
    const kafkaWhat =
      brokerPid !== undefined ? `the broker (pid ${brokerPid})` : 'every java process on the host (the broker was not found by its port)';
    const cfg = `QUEEN_PG_POOL_SIZE=${p.poolSize} and QUEEN_DEDUP_CACHE_MB=${p.cacheMb} for the whole pod in both arms (2 workers: ${Math.max(1, Math.floor(p.poolSize / 2))} connections and ${p.cacheMb / 2} MB of cache each)`;
    return {
      targets: [
        target('workers 2 / workers 1: backlog drain (records/s)', median(pairs), '>=', 1.3, {
          ratio: true,
          value: `${fmt(rate(w2))} rec/s`,
          baseline: `${fmt(rate(w1))} rec/s`,
        }),
        target('CPU per record, backlog drain (µs)', u1.node, '<=', 6, {
          unit: 'µs',
          value: `${u1.node.toFixed(1)} µs (service pod, 1 worker: its Node CPU / records)`,
        }),
        target(`CPU per record, paced ${PACED_RATE / 1000} k rec/s (µs)`, pacedNodeUs, '<=', 15, {
          unit: 'µs',
          value: `${pacedNodeUs.toFixed(1)} µs (service pod, 1 worker, ${fmt(pacedRecords)} records at ${fmt(paced.achievedRate)} rec/s)`,
        }),
      ],
      info: [
        {
          name: 'workers 2 / workers 1: CPU per record, Node / PostgreSQL / Kafka (µs)',
          value: us(u2),
          baseline: us(u1),
          ratio: u2.node / u1.node,
        },
        {
          name: 'workers 2: RSS of the pod (MB)',
          value: `${rssMb(w2).toFixed(0)} MB (peak while draining; primary + workers: ${rssSplit(w2[0]!)} in rep 1)`,
          baseline: `1 worker: ${rssMb(w1).toFixed(0)} MB`,
        },
        {
          name: 'service pod drain rec/s per repetition: workers 1 / workers 2',
          value: w1.map((d, i) => `${fmt(d.recordsPerS)} / ${fmt(w2[i]!.recordsPerS)}`).join(', '),
        },
        { name: 'CPU while draining: service pod, 1 worker', value: fmtShares(addCpu(w1.map((d) => d.cpu)), true) },
        { name: 'CPU while draining: service pod, 2 workers', value: fmtShares(addCpu(w2.map((d) => d.cpu)), true) },
        { name: `CPU while paced at ${fmt(PACED_RATE)} rec/s: service pod, 1 worker`, value: fmtShares(paced.cpu, true) },
      ],
      notes: [
        ...checks,
        `service pod rows: node dist/src/main.js with ${cfg}, the service's other defaults; timed from the moment every worker is a group member (queen_kafka_consumer_up 1 in the pod's /metrics) to the group's committed offsets reaching every partition's end; a gate member holds the group until every worker asked to join, so none drains alone first (lib/servicePod.ts). CPU: Node = the pod's primary and workers (/proc/<pid>/stat of each pid in queen_worker_info), PostgreSQL = the run's database's backends, Kafka = ${kafkaWhat}. RSS sums the pod's processes (pages they share counted in each).`,
        `CPU per record, paced: the pod's Node CPU over the records it verified (queen_ingress_records_total) in the measured window (${p.latencySeconds} s after ${p.latencyWarmupSeconds} s warm-up), Kafka's Java producer in its own process.`,
      ],
      results: {
        pod: {
          recordsPerS: { workers1: rate(w1), workers2: rate(w2) },
          workers2OverWorkers1: median(pairs),
          cpuPerRecordUs: { workers1: u1, workers2: u2, paced1: pacedNodeUs },
          rssPeakMb: { workers1: rssMb(w1), workers2: rssMb(w2) },
          paced: { rate: PACED_RATE, achievedRate: paced.achievedRate, records: pacedRecords },
          poolSize: p.poolSize,
          cacheMb: p.cacheMb,
          brokerPid: brokerPid ?? null,
        },
      },
      samples: { pod: { drains: Object.fromEntries(drains), pairs, pacedCpu: paced.cpu } },
    };
  } finally {
    watchBroker(undefined);
  }
}
