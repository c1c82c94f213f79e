/**
 * What the paced producer's worker (pacedProducer.ts) is given and posts
 * back. Its own file so that the worker, the Java producer it drives
 * (javaPacedProducer.ts) and the latency harness (latency.ts) share it
 * without importing each other.
 */
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
