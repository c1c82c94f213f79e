/**
 * The paced producer of the latency measurement, run in a worker thread so
 * that feeding it does not steal the event loop of the consumer being
 * measured (a real producer runs elsewhere): Kafka's Java producer in its
 * own process, fed every `tickMs` with the records due by then
 * (lib/javaPacedProducer.ts, which says why not kafkajs).
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { javaPacedProduce } from './javaPacedProducer.js';
import type { PacedProducerMessage, PacedProducerParams } from './pacedProducerTypes.js';

async function produce(o: PacedProducerParams, post: (m: PacedProducerMessage) => void): Promise<void> {
  const done = await javaPacedProduce(
    o,
    (startMs) => post({ kind: 'started', startMs }),
    (sent) => post({ kind: 'progress', sent }),
  );
  post({ kind: 'done', ...done });
}

// eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- workerData is whatever the parent passed, undefined in a worker started elsewhere
if (!isMainThread && parentPort && (workerData as { pacedProducer?: PacedProducerParams })?.pacedProducer) {
  const port = parentPort;
  produce((workerData as { pacedProducer: PacedProducerParams }).pacedProducer, (m) => port.postMessage(m)).catch((err: unknown) =>
    port.postMessage({ kind: 'error', message: err instanceof Error ? err.message : String(err) }),
  );
}
