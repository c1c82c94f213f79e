/**
 * The paced producer of the latency measurement, run in a worker thread so
 * that encoding produce requests does not steal the event loop of the
 * consumer being measured (a real producer runs elsewhere). Every `tickMs` it
 * sends the records due by then, each with the send call's Date.now() as its
 * Kafka timestamp (CreateTime), the time the latency is measured from.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { Message } from 'kafkajs';
import { kafkaClient } from './kafka.js';
import { nowMs, sleep } from './stats.js';
import { MessageFactory } from './synth.js';

export interface PacedProducerParams {
  brokers: string[];
  topic: string;
  rate: number;
  seconds: number;
  keys: number;
  payloadBytes: number;
  tickMs: number;
  label: string;
}

export type PacedProducerMessage =
  | { kind: 'started'; startMs: number }
  | { kind: 'progress'; sent: number }
  | { kind: 'done'; sent: number; achievedRate: number }
  | { kind: 'error'; message: string };

const MAX_PER_SEND = 2000;

async function produce(o: PacedProducerParams, post: (m: PacedProducerMessage) => void): Promise<void> {
  const kafka = kafkaClient(o.brokers, 'queen-bench-paced');
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  let sent = 0;
  try {
    const f = new MessageFactory(`lat-${o.label}`, o.payloadBytes);
    const start = nowMs();
    post({ kind: 'started', startMs: Date.now() });
    const end = start + o.seconds * 1000;
    let lastNote = start;
    for (;;) {
      const now = nowMs();
      if (now >= end) break;
      // At most MAX_PER_SEND records per request (a late tick must not build
      // a request over the broker's message size limit); the rest next loop.
      const due = Math.min(MAX_PER_SEND, Math.floor(((now - start) / 1000) * o.rate) - sent);
      if (due > 0) {
        const stamp = String(Date.now());
        const batch: Message[] = [];
        for (let i = 0; i < due; i++, sent++)
          batch.push({
            key: `key-${String(sent % o.keys).padStart(2, '0')}`,
            value: f.payload(sent % o.keys, sent),
            timestamp: stamp,
            headers: { transactionId: `lat-${o.label}-${sent}` },
          });
        await producer.send({ topic: o.topic, acks: -1, messages: batch });
        if (due === MAX_PER_SEND) continue;
      }
      if (now - lastNote > 5000) {
        lastNote = now;
        post({ kind: 'progress', sent });
      }
      await sleep(o.tickMs);
    }
    post({ kind: 'done', sent, achievedRate: sent / ((nowMs() - start) / 1000) });
  } finally {
    await producer.disconnect().catch(() => undefined);
  }
}

// eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- workerData is whatever the parent passed, undefined in a worker started elsewhere
if (!isMainThread && parentPort && (workerData as { pacedProducer?: PacedProducerParams })?.pacedProducer) {
  const port = parentPort;
  produce((workerData as { pacedProducer: PacedProducerParams }).pacedProducer, (m) => port.postMessage(m)).catch((err: unknown) =>
    port.postMessage({ kind: 'error', message: err instanceof Error ? err.message : String(err) }),
  );
}
