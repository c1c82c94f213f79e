import type { FleetReadiness, FleetView, WorkerReadiness } from '../http/routes/ops.js';
import { isPrimaryMessage, STOPPING, type PrimaryMessage, type WorkerMessage } from './protocol.js';

/**
 * A worker's side of the IPC channel to the primary (docs/scaling.md).
 *
 * It is the worker's FleetView: a /metrics scrape or a readiness probe that
 * lands on this worker is forwarded to the primary, which answers for the
 * whole pod. It also answers the primary's readiness questions with this
 * worker's own verdict (`serve`).
 *
 * A question the primary does not answer in `timeoutMs` settles on its own:
 * readiness as not ready (a pod whose primary is stuck is not ready), metrics
 * as an error (the scrape fails: Prometheus records `up 0`, no invented
 * numbers). When the primary dies, node:cluster ends this worker at once.
 *
 * It also carries the pod's two-phase stop (docs/scaling.md, "Stopping"):
 * at the primary's `drain` it answers not ready from then on (its own
 * answers and the pod's, without asking), runs `drain` and reports
 * `drained`; at `leave` it runs `leave`. States: serving --drain--> draining
 * --drain settled--> drained --leave--> leaving (the process exits). A
 * repeated `drain` or `leave` is ignored.
 */
export class WorkerLink implements FleetView {
  private nextId = 0;
  private readonly waiting = new Map<number, { settle: (m: PrimaryMessage | undefined) => void; timer: NodeJS.Timeout }>();
  private local: (() => Promise<{ ready: boolean; reasons: string[] }>) | undefined;
  private stopHandlers: StopHandlers | undefined;
  private phase: 'serving' | 'draining' | 'drained' | 'leaving' = 'serving';

  /** `channel` is the worker's IPC channel to the primary; unit tests pass a stand-in. */
  constructor(
    readonly slot: number,
    private readonly timeoutMs: number,
    private readonly channel: WorkerChannel = processChannel,
  ) {
    channel.onMessage((m: unknown) => {
      if (!isPrimaryMessage(m)) return;
      if (m.type === 'queen:ready-ask') void this.answer(m.id);
      else if (m.type === 'queen:drain') void this.drain();
      else if (m.type === 'queen:leave') this.leave();
      else {
        const w = this.waiting.get(m.id);
        if (!w) return; // answered after its timeout
        this.waiting.delete(m.id);
        clearTimeout(w.timer);
        w.settle(m);
      }
    });
  }

  /** Answers the primary's readiness questions with `local` (this worker's own checks). */
  serve(local: () => Promise<{ ready: boolean; reasons: string[] }>): void {
    this.local = local;
  }

  /** What this worker does at the primary's `drain` and `leave` (set before the service starts: a stop may come during its start). */
  onStop(handlers: StopHandlers): void {
    this.stopHandlers = handlers;
  }

  /** True from the primary's `drain` on: this worker is part of the pod's stop and no longer ready. */
  get stopping(): boolean {
    return this.phase !== 'serving';
  }

  private async drain(): Promise<void> {
    if (this.phase !== 'serving' || !this.stopHandlers) return;
    this.phase = 'draining';
    // Reported whatever the drain's outcome: the worker can do no more in phase 1, and phase 2 must not wait for it.
    await this.stopHandlers.drain().catch(() => undefined);
    this.settled();
    this.channel.send({ type: 'queen:drained' });
  }

  /** A `leave` that came while the drain ran has moved the phase on already. */
  private settled(): void {
    if (this.phase === 'draining') this.phase = 'drained';
  }

  private leave(): void {
    if (this.phase === 'leaving' || !this.stopHandlers) return;
    this.phase = 'leaving';
    this.stopHandlers.leave();
  }

  /** Tells the primary this worker's service runs. */
  started(): void {
    this.channel.send({ type: 'queen:started' });
  }

  async metrics(): Promise<string> {
    const m = await this.ask('queen:fleet-metrics');
    if (m?.type !== 'queen:fleet-metrics-answer')
      throw new Error(`the primary did not answer a metrics request within ${this.timeoutMs} ms`);
    if (m.error !== undefined || m.text === undefined) throw new Error(`aggregating the workers' metrics failed: ${m.error ?? 'no text'}`);
    return m.text;
  }

  async readiness(): Promise<FleetReadiness> {
    if (this.stopping) return { ready: false, reasons: [STOPPING], workers: [] };
    const m = await this.ask('queen:fleet-ready');
    if (m?.type === 'queen:fleet-ready-answer') return m.verdict;
    const reason = `the primary did not answer within ${this.timeoutMs} ms`;
    return { ready: false, reasons: [reason], workers: [] };
  }

  private ask(type: 'queen:fleet-metrics' | 'queen:fleet-ready'): Promise<PrimaryMessage | undefined> {
    const id = this.nextId++;
    return new Promise((settle) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        settle(undefined);
      }, this.timeoutMs);
      this.waiting.set(id, { settle, timer });
      if (!this.channel.send({ type, id })) {
        this.waiting.delete(id);
        clearTimeout(timer);
        settle(undefined);
      }
    });
  }

  private async answer(id: number): Promise<void> {
    let answer: WorkerReadiness;
    if (this.stopping) answer = { slot: this.slot, pid: process.pid, ready: false, reasons: [STOPPING] };
    else if (!this.local) answer = { slot: this.slot, pid: process.pid, ready: false, reasons: ['starting'] };
    else {
      const own = await this.local().catch((err: unknown) => ({ ready: false, reasons: [(err as Error).message] }));
      answer = { slot: this.slot, pid: process.pid, ...own };
    }
    this.channel.send({ type: 'queen:ready-answer', id, answer });
  }
}

export interface StopHandlers {
  /** Phase 1: stop taking work, settle and commit what is in flight, stay in the group. Its end is reported as `drained`. */
  drain(): Promise<void>;
  /** Phase 2: leave the group, stop everything, exit. */
  leave(): void;
}

/** The worker's end of the IPC channel: every message from the primary, and a send that says whether it went out. */
export interface WorkerChannel {
  onMessage(listener: (m: unknown) => void): void;
  /** false when the channel is gone (the primary died; node:cluster is ending this worker). */
  send(m: WorkerMessage): boolean;
}

const processChannel: WorkerChannel = {
  onMessage: (listener) => process.on('message', listener),
  send: (m) => {
    if (!process.send || !process.connected) return false;
    try {
      process.send(m, undefined, {}, () => undefined);
      return true;
    } catch {
      return false;
    }
  },
};
