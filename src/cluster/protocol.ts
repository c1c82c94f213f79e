import type { FleetReadiness, WorkerReadiness } from '../http/routes/ops.js';

/**
 * The messages between the primary and its workers over node:cluster's IPC
 * channel (docs/scaling.md). Every type starts with `queen:`, so they never
 * collide with prom-client's own `prom-client:*` messages on the same
 * channel. A question carries an id; its answer carries the same id.
 *
 * worker -> primary
 *   started                 the worker's service is running (it counts as up)
 *   fleet-metrics {id}      a /metrics scrape landed on this worker
 *   fleet-ready {id}        a readiness probe landed on this worker
 *   ready-answer {id, ...}  this worker's own readiness, asked by the primary
 * primary -> worker
 *   fleet-metrics-answer {id, text | error}
 *   fleet-ready-answer {id, verdict}
 *   ready-ask {id}          "are you ready?" (one per worker per probe)
 */
export type WorkerMessage =
  | { type: 'queen:started' }
  | { type: 'queen:fleet-metrics'; id: number }
  | { type: 'queen:fleet-ready'; id: number }
  | { type: 'queen:ready-answer'; id: number; answer: WorkerReadiness };

export type PrimaryMessage =
  | { type: 'queen:fleet-metrics-answer'; id: number; text?: string; error?: string }
  | { type: 'queen:fleet-ready-answer'; id: number; verdict: FleetReadiness }
  | { type: 'queen:ready-ask'; id: number };

function isQueen(m: unknown): boolean {
  return (
    typeof m === 'object' &&
    m !== null &&
    typeof (m as { type?: unknown }).type === 'string' &&
    (m as { type: string }).type.startsWith('queen:')
  );
}

/** In the primary: a message from a worker (anything else on the channel, e.g. prom-client's, is not). */
export function isWorkerMessage(m: unknown): m is WorkerMessage {
  return isQueen(m);
}

/** In a worker: a message from the primary. */
export function isPrimaryMessage(m: unknown): m is PrimaryMessage {
  return isQueen(m);
}
