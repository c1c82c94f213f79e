import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createBenchDatabase } from '../lib/db.js';
import {
  createTopic,
  deleteTopicsAndGroups,
  endOffsets,
  kafkaClient,
  produceAll,
  uniqueName,
  withAdmin,
  waitCommitted,
} from '../lib/kafka.js';
import { fmt, median } from '../lib/stats.js';
import { MessageFactory } from '../lib/synth.js';
import { target, type Suite, type SuiteContext, type SuiteResult } from '../lib/types.js';

const MAIN = fileURLToPath(new URL('../../src/main.js', import.meta.url));
type Mode = 'off' | 'on';

/**
 * What tracing costs the Kafka ingest: the real service process (`node
 * dist/src/main.js`, so the instrumentations patch kafkajs, pg and node:http
 * as in production) consumes the same topic with its own group, tracing off
 * (no OTLP endpoint: no SDK, every span call the API's no-op) and on (OTLP to
 * a local sink that accepts and discards, 1 % head sampling), alternating
 * off/on, on/off, ... Throughput is timed from the service logging
 * "consuming" to the group's committed offsets reaching the end of the topic.
 */
export const tracingCost: Suite = {
  name: 'tracing-cost',
  needsKafka: true,
  async run(ctx: SuiteContext): Promise<SuiteResult> {
    const p = ctx.quick
      ? { records: 50_000, partitions: 8, keys: 32, payloadBytes: 100, reps: 1, sampleRatio: 0.01 }
      : { records: 300_000, partitions: 8, keys: 32, payloadBytes: 100, reps: 3, sampleRatio: 0.01 };
    const brokers = ctx.brokers!;
    const kafka = kafkaClient(brokers);
    const topic = uniqueName('bench-trace');
    const groups: string[] = [];
    const db = await createBenchDatabase(ctx.adminUrl, 'tracing_cost');
    let exportedBytes = 0;
    let exports = 0;
    const sink = createServer((req, res) => {
      req.on('data', (d: Buffer) => (exportedBytes += d.length));
      req.on('end', () => {
        exports++;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
    const sinkUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
    const steps = 1 + p.reps * 2;
    let step = 0;
    try {
      ctx.progress.step(++step, steps, `producing ${fmt(p.records)} records to ${topic}`);
      await createTopic(kafka, topic, p.partitions);
      const f = new MessageFactory('trace', p.payloadBytes);
      await produceAll(
        kafka,
        topic,
        Array.from({ length: p.records }, (_, i) => ({
          key: `key-${i % p.keys}`,
          value: f.payload(i % p.keys, i),
          headers: { transactionId: `trace-${i}` },
        })),
        5000,
        2,
      );
      const ends = await withAdmin(kafka, (a) => endOffsets(a, topic));
      const rates: Record<Mode, number[]> = { off: [], on: [] };
      for (let r = 0; r < p.reps; r++) {
        const order: Mode[] = r % 2 === 0 ? ['off', 'on'] : ['on', 'off'];
        for (const mode of order) {
          ctx.progress.step(++step, steps, `rep ${r + 1}/${p.reps}: tracing ${mode}, service consuming ${fmt(p.records)} records`);
          const group = uniqueName(`bench-trace-${mode}`);
          groups.push(group);
          const env: Record<string, string> = {
            PATH: process.env.PATH ?? '',
            DATABASE_URL: db.url,
            KAFKA_BROKERS: brokers.join(','),
            QUEEN_INGRESS_TOPICS: `${topic}:trace_r${r}_${mode}`,
            QUEEN_INGRESS_GROUP: group,
            QUEEN_HTTP_PORT: '0',
            QUEEN_HTTP_HOST: '127.0.0.1',
            QUEEN_LOG_LEVEL: 'info',
            QUEEN_DEDUP_CACHE_MB: '512',
            // Tracing's cost on one broker, timed from its "consuming", as the
            // earlier results were: the worker count is not this suite's subject.
            QUEEN_WORKERS: '1',
            ...(mode === 'on' ? { OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl, OTEL_TRACES_SAMPLER_ARG: String(p.sampleRatio) } : {}),
          };
          rates[mode].push(await timedIngest(env, kafka, group, topic, ends, p.records));
        }
      }
      const off = median(rates.off);
      const on = median(rates.on);
      return {
        name: 'tracing-cost',
        params: p,
        results: { offRecordsPerSecond: off, onRecordsPerSecond: on, ratio: on / off, exportRequests: exports, exportedBytes },
        samples: rates,
        targets: [
          target('ingest with tracing on (1 % sampled) vs off', on / off, '>=', 0.95, {
            ratio: true,
            value: `${fmt(on)} rec/s`,
            baseline: `${fmt(off)} rec/s`,
          }),
        ],
        notes: [`${exports} OTLP export requests, ${fmt(exportedBytes)} bytes, while tracing was on`],
      };
    } finally {
      await deleteTopicsAndGroups(kafka, [topic], groups).catch(() => undefined);
      await new Promise<void>((resolve) => sink.close(() => resolve()));
      await db.drop();
    }
  },
};

/** Starts the service, times it from "consuming" to the group being caught up, stops it (SIGTERM). Records/s. */
async function timedIngest(
  env: Record<string, string>,
  kafka: ReturnType<typeof kafkaClient>,
  group: string,
  topic: string,
  ends: Map<number, number>,
  records: number,
): Promise<number> {
  const child = spawn(process.execPath, [MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  try {
    const consumingAt = await new Promise<number>((resolve, reject) => {
      let buf = '';
      child.stdout.on('data', (d: Buffer) => {
        buf += d.toString();
        if (buf.includes('"msg":"consuming"')) resolve(performance.now());
        if (buf.length > 1 << 20) buf = buf.slice(-4096);
      });
      void exited.then((code) => reject(new Error(`service exited (${code}) before consuming: ${stderr.slice(-2000)}`)));
    });
    const doneAt = await withAdmin(kafka, (a) => waitCommitted(a, group, topic, ends, 600_000));
    return records / ((doneAt - consumingAt) / 1000);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}
