import { spawn, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { PacedProducerParams } from './pacedProducerTypes.js';
import { endOffsets, kafkaClient } from './kafka.js';
import { nowMs, sleep } from './stats.js';
import { MessageFactory } from './synth.js';

const KAFKA_SH = fileURLToPath(new URL('../../../deploy/local/kafka/kafka.sh', import.meta.url));

/**
 * The producer's nice value (QUEEN_BENCH_PRODUCER_NICE, default 10; 0 runs
 * it at the bench's own priority). Upstream producers run on other machines;
 * here the load generator shares 2 cores with the consumer it measures, the
 * broker and PostgreSQL, and at normal priority every line it parsed was CPU
 * the measured consumer waited for (the A/B is in
 * docs/history/2026-12-03-kafka-e2e-half-load-target-on-this-machine.md). Records are stamped by the
 * producer's send(), so a producer that runs later does not age them; its
 * sender thread running later does, which is charged to the measured
 * latency, not hidden from it.
 */
export function producerNice(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.QUEEN_BENCH_PRODUCER_NICE;
  if (raw === undefined || raw === '') return 10;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 19)
    throw new Error(`QUEEN_BENCH_PRODUCER_NICE must be an integer 0..19, got ${JSON.stringify(raw)}`);
  return n;
}

/**
 * The paced producer of the latency measurement as an upstream Java service
 * would run it: Kafka's own producer (org.apache.kafka.tools.ConsoleProducer
 * from the broker's jars, producer defaults of Kafka 4: linger.ms 5,
 * acks all, idempotence on) in its own process. The worker thread of
 * lib/pacedProducer.ts only writes the due records as lines to its stdin
 * every `tickMs` (on the consumer's thread, building those lines took 7 % of
 * its time).
 *
 * Why not kafkajs: on this 2-core machine its producer (in a worker thread)
 * took about 0.66 of a core at 70 k rec/s (~9.5 µs per record), could not
 * reach the 80 k rec/s "half load" of the kafka-e2e suite (65.8 k achieved
 * behind the ingest, 70 k behind the consume-only baseline) and pushed even
 * that baseline's p99 to 87 ms: the measurement was of the load generator.
 * This producer, with the lines fed from a worker thread, takes about 0.4 of
 * a core at 80 k rec/s and reaches the rate.
 *
 * Each record's Kafka timestamp (CreateTime) is set by KafkaProducer.send()
 * when the console reader hands it the line: the latency is measured from
 * there, as before. Before pacing starts one readiness record is sent and
 * awaited (JVM start-up must not become a burst inside the measurement);
 * it is produced before `startMs`, hence never measured.
 */
export async function javaPacedProduce(
  o: PacedProducerParams,
  onStarted: (startMs: number) => void,
  onProgress: (sent: number) => void,
): Promise<{ sent: number; achievedRate: number }> {
  const classpath = execFileSync('bash', [KAFKA_SH, 'classpath'], { encoding: 'utf8' }).trim().split('\n').pop()!;
  const javaArgs = [
    '-Xmx256m',
    '-XX:+UseSerialGC',
    '-cp',
    classpath,
    'org.apache.kafka.tools.ConsoleProducer',
    '--bootstrap-server',
    o.brokers.join(','),
    '--topic',
    o.topic,
    '--reader-property',
    'parse.key=true',
    '--reader-property',
    'parse.headers=true',
    '--command-property',
    'linger.ms=5',
    '--command-property',
    'acks=all',
  ];
  const nice = producerNice();
  const child =
    nice === 0
      ? spawn('java', javaArgs, { stdio: ['pipe', 'ignore', 'pipe'] })
      : spawn('nice', ['-n', String(nice), 'java', ...javaArgs], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  let exitCode: number | null | undefined;
  const exited = once(child, 'exit').then(([code]) => (exitCode = code as number | null));
  const failed = (): Error => new Error(`Java producer exited (${exitCode}): ${stderr}`);
  const write = async (s: string): Promise<void> => {
    if (exitCode !== undefined) throw failed();
    if (!child.stdin.write(s)) await Promise.race([once(child.stdin, 'drain'), exited]);
  };
  const admin = kafkaClient(o.brokers, 'queen-bench-paced-java').admin();
  await admin.connect();
  const total = async (): Promise<number> => [...(await endOffsets(admin, o.topic)).values()].reduce((x, y) => x + y, 0);
  try {
    const base = await total();
    await write(`transactionId:lat-${o.label}-ready\tkey-00\t{"ready":true}\n`);
    const readyBy = nowMs() + 60_000;
    while ((await total()) <= base) {
      if (exitCode !== undefined) throw failed();
      if (nowMs() > readyBy) throw new Error('Java producer sent nothing within 60 s');
      await sleep(50);
    }
    const f = new MessageFactory(`lat-${o.label}`, o.payloadBytes);
    let sent = 0;
    const start = nowMs();
    onStarted(Date.now());
    const end = start + o.seconds * 1000;
    let lastNote = start;
    for (;;) {
      const now = nowMs();
      if (now >= end) break;
      const due = Math.floor(((now - start) / 1000) * o.rate) - sent;
      if (due > 0) {
        let lines = '';
        for (let i = 0; i < due; i++, sent++)
          lines += `transactionId:lat-${o.label}-${sent}\tkey-${String(sent % o.keys).padStart(2, '0')}\t${f.payload(sent % o.keys, sent).toString('latin1')}\n`;
        await write(lines);
      }
      if (now - lastNote > 5000) {
        lastNote = now;
        onProgress(sent);
      }
      await sleep(o.tickMs);
    }
    child.stdin.end();
    await exited;
    if (exitCode !== 0) throw failed();
    // Achieved = what reached the topic over the time it took to get there
    // (a producer that fell behind shows here, not only in the latencies).
    const landedBy = nowMs() + 60_000;
    while ((await total()) < base + 1 + sent) {
      if (nowMs() > landedBy) throw new Error(`Java producer: ${sent} records written, fewer reached ${o.topic}`);
      await sleep(25);
    }
    return { sent, achievedRate: sent / ((nowMs() - start) / 1000) };
  } finally {
    await admin.disconnect().catch(() => undefined);
    if (exitCode === undefined) {
      child.kill('SIGKILL');
      await exited;
    }
  }
}
