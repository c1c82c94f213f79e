import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { cpuSince, cpuSnapshot, type CpuDelta, type CpuSnapshot } from './cpu.js';
import type { PacedProducerMessage, PacedProducerParams } from './pacedProducerTypes.js';
import type { Progress } from './types.js';
import { endOffsets, kafkaClient, waitCommitted, withAdmin } from './kafka.js';
import { fmt, max, percentile } from './stats.js';

/**
 * record -> commit latency from commit observers: KafkaIngress's own
 * `onCommitted` hook (src/ingress/kafkaIngress.ts) for the ingest, and the
 * same contract implemented by the kafkajs baselines. For every record of a
 * chunk whose commit Kafka accepted: committedAtMs - the record's Kafka
 * timestamp (CreateTime, stamped by the producer at the send call). Both are
 * Date.now() on this machine; records produced before `measureFrom` are
 * warm-up and not counted.
 */
export class CommitLatencyProbe {
  readonly samples: number[] = [];
  /**
   * Per committed chunk of the window, where its oldest record waited (ms),
   * when the observer reports stage times (KafkaIngress and both kafkajs
   * baselines do): before eachBatch saw it, in its lane, for its verdicts,
   * for the commit acknowledgement.
   */
  readonly stages: { fetch: number[]; lane: number[]; verdicts: number[]; commit: number[] } = {
    fetch: [],
    lane: [],
    verdicts: [],
    commit: [],
  };
  measureFrom = Infinity;
  refused = 0;

  readonly observe = (chunk: {
    records: { timestamp: string }[];
    committed: boolean;
    committedAtMs: number;
    fetchedAtMs?: number;
    startedAtMs?: number;
    verdictsAtMs?: number;
  }): void => {
    if (!chunk.committed) {
      this.refused += chunk.records.length;
      return;
    }
    let oldest = Infinity;
    for (const r of chunk.records) {
      const sent = Number(r.timestamp);
      if (sent < oldest) oldest = sent;
      if (sent >= this.measureFrom) this.samples.push(chunk.committedAtMs - sent);
    }
    const { fetchedAtMs, startedAtMs, verdictsAtMs } = chunk;
    if (oldest >= this.measureFrom && fetchedAtMs !== undefined && startedAtMs !== undefined && verdictsAtMs !== undefined) {
      this.stages.fetch.push(fetchedAtMs - oldest);
      this.stages.lane.push(startedAtMs - fetchedAtMs);
      this.stages.verdicts.push(verdictsAtMs - startedAtMs);
      this.stages.commit.push(chunk.committedAtMs - verdictsAtMs);
    }
  };

  /** "fetch 10/38, lane 2/19, verdicts 8/30, commit 5/23 ms (p50/p99 of N chunks)", or undefined without stage times. */
  stageSummary(): string | undefined {
    const st = this.stages;
    if (st.fetch.length === 0) return undefined;
    const f = (xs: number[]): string => `${percentile(xs, 50).toFixed(0)}/${percentile(xs, 99).toFixed(0)}`;
    return `fetch ${f(st.fetch)}, lane ${f(st.lane)}, verdicts ${f(st.verdicts)}, commit ${f(st.commit)} ms (p50/p99 over ${st.fetch.length} chunks)`;
  }
}

export interface LatencyResult {
  samples: number[];
  p50: number;
  p99: number;
  max: number;
  achievedRate: number;
  /**
   * This process's event-loop delay while the measured records were produced
   * (ms): every record crosses several turns of this loop (fetch response,
   * lane, PG answer, commit answer), so its p99 is about a floor under the
   * records' p99. Garbage-collection pauses and a CPU the other processes
   * hold show up here.
   */
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  /** The machine's CPU over the same window (steal: what the hypervisor gave other guests). */
  cpu: CpuDelta;
}

/**
 * Produces at `rate` records/s for `seconds` from a worker thread
 * (lib/pacedProducer.ts: Kafka's Java producer), waits until the group has committed everything,
 * and returns the probe's percentiles. The consumer must already be running
 * (joined) when this is called.
 */
export async function pacedLatency(
  progress: Progress,
  probe: CommitLatencyProbe,
  o: {
    brokers: string[];
    topic: string;
    group: string;
    rate: number;
    seconds: number;
    warmupSeconds: number;
    keys: number;
    payloadBytes: number;
    tickMs: number;
    label: string;
    /** Called as the measured window opens and closes (with the CPU snapshots): a caller reads its own counters there. */
    onWindow?: (edge: 'open' | 'close') => void;
  },
): Promise<LatencyResult> {
  const params: PacedProducerParams = {
    brokers: o.brokers,
    topic: o.topic,
    rate: o.rate,
    seconds: o.seconds,
    keys: o.keys,
    payloadBytes: o.payloadBytes,
    tickMs: o.tickMs,
    label: o.label,
  };
  // The window of the measured records: from the end of warm-up to the producer's last send (closed in `finally`).
  const loop = monitorEventLoopDelay({ resolution: 5 });
  let windowStart: NodeJS.Timeout | undefined;
  let cpu0: CpuSnapshot | undefined;
  let cpu: CpuDelta | undefined;
  const openWindow = (): void => {
    loop.enable();
    cpu0 = cpuSnapshot();
    o.onWindow?.('open');
  };
  const closeWindow = (): void => {
    if (windowStart) clearTimeout(windowStart);
    loop.disable();
    if (cpu0 && !cpu) {
      cpu = cpuSince(cpu0);
      o.onWindow?.('close');
    }
  };
  const worker = new Worker(new URL('./pacedProducer.js', import.meta.url), { workerData: { pacedProducer: params } });
  let done: { sent: number; achievedRate: number };
  try {
    done = await new Promise((resolve, reject) => {
      worker.on('message', (m: PacedProducerMessage) => {
        if (m.kind === 'started') {
          probe.measureFrom = m.startMs + o.warmupSeconds * 1000;
          windowStart = setTimeout(openWindow, Math.max(0, probe.measureFrom - Date.now()));
        } else if (m.kind === 'progress')
          progress.note(`${o.label} latency: ${fmt(m.sent)} sent, ${probe.samples.length} committed samples`);
        else if (m.kind === 'done') resolve(m);
        else reject(new Error(`paced producer: ${m.message}`));
      });
      worker.on('error', reject);
      worker.on('exit', (code) => reject(new Error(`paced producer exited (${code}) before finishing`)));
    });
  } finally {
    closeWindow();
    await worker.terminate().catch(() => undefined);
  }
  const kafka = kafkaClient(o.brokers, 'queen-bench-latency');
  await withAdmin(kafka, async (a) => waitCommitted(a, o.group, o.topic, await endOffsets(a, o.topic), 120_000));
  const s = probe.samples;
  if (!cpu) throw new Error(`${o.label}: the producer finished before its warm-up did; nothing was measured`);
  const ms = (ns: number): number => ns / 1e6;
  return {
    samples: s,
    p50: percentile(s, 50),
    p99: percentile(s, 99),
    max: max(s),
    achievedRate: done.achievedRate,
    eventLoopDelayMs: { p50: ms(loop.percentile(50)), p99: ms(loop.percentile(99)), max: ms(loop.max) },
    cpu,
  };
}
