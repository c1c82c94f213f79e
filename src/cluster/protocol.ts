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
 *   drained                 phase 1 of the pod's stop is done here: nothing
 *                           is fetched any more, every chunk in flight has
 *                           settled and what PostgreSQL verified is committed;
 *                           the consumer is still a group member
 * primary -> worker
 *   fleet-metrics-answer {id, text | error}
 *   fleet-ready-answer {id, verdict}
 *   ready-ask {id}          "are you ready?" (one per worker per probe)
 *   drain                   phase 1 of the pod's stop (docs/scaling.md,
 *                           "Stopping"): answer not ready, stop fetching,
 *                           settle and commit, stay in the group, say drained
 *   leave                   phase 2: leave the group, stop the rest, exit
 */
export type WorkerMessage =
  | { type: 'queen:started' }
  | { type: 'queen:fleet-metrics'; id: number }
  | { type: 'queen:fleet-ready'; id: number }
  | { type: 'queen:ready-answer'; id: number; answer: WorkerReadiness }
  | { type: 'queen:drained' };

export type PrimaryMessage =
  | { type: 'queen:fleet-metrics-answer'; id: number; text?: string; error?: string }
  | { type: 'queen:fleet-ready-answer'; id: number; verdict: FleetReadiness }
  | { type: 'queen:ready-ask'; id: number }
  | { type: 'queen:drain' }
  | { type: 'queen:leave' };

/**
 * How long phase 2 of the pod's stop may take, from the primary's `leave`:
 * leaving the group, closing HTTP and the pools, flushing traces. Past it
 * the primary SIGKILLs what is left; a worker gives itself 1 s less, so it
 * ends on its own, logged, first. The pod's stop therefore ends within
 * QUEEN_SHUTDOWN_TIMEOUT_MS (phase 1's bound) + this.
 */
export const LEAVE_TIMEOUT_MS = 5_000;

/** The readiness reason while the pod stops: answered at once (by the primary and by each worker), so traffic moves away while the workers drain. */
export const STOPPING = 'stopping: the pod is draining';

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
