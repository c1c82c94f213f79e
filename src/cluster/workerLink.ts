import type { FleetReadiness, FleetView, WorkerReadiness } from '../http/routes/ops.js';
import { isPrimaryMessage, type PrimaryMessage, type WorkerMessage } from './protocol.js';

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
 */
export class WorkerLink implements FleetView {
  private nextId = 0;
  private readonly waiting = new Map<number, { settle: (m: PrimaryMessage | undefined) => void; timer: NodeJS.Timeout }>();
  private local: (() => Promise<{ ready: boolean; reasons: string[] }>) | undefined;

  constructor(
    readonly slot: number,
    private readonly timeoutMs: number,
  ) {
    process.on('message', (m: unknown) => {
      if (!isPrimaryMessage(m)) return;
      if (m.type === 'queen:ready-ask') void this.answer(m.id);
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

  /** Tells the primary this worker's service runs. */
  started(): void {
    send({ type: 'queen:started' });
  }

  async metrics(): Promise<string> {
    const m = await this.ask('queen:fleet-metrics');
    if (m?.type !== 'queen:fleet-metrics-answer')
      throw new Error(`the primary did not answer a metrics request within ${this.timeoutMs} ms`);
    if (m.error !== undefined || m.text === undefined) throw new Error(`aggregating the workers' metrics failed: ${m.error ?? 'no text'}`);
    return m.text;
  }

  async readiness(): Promise<FleetReadiness> {
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
      if (!send({ type, id })) {
        this.waiting.delete(id);
        clearTimeout(timer);
        settle(undefined);
      }
    });
  }

  private async answer(id: number): Promise<void> {
    let answer: WorkerReadiness;
    if (!this.local) answer = { slot: this.slot, pid: process.pid, ready: false, reasons: ['starting'] };
    else {
      const own = await this.local().catch((err: unknown) => ({ ready: false, reasons: [(err as Error).message] }));
      answer = { slot: this.slot, pid: process.pid, ...own };
    }
    send({ type: 'queen:ready-answer', id, answer });
  }
}

/** false when the channel is gone (the primary died; node:cluster is ending this worker). */
function send(m: WorkerMessage): boolean {
  if (!process.send || !process.connected) return false;
  try {
    process.send(m, undefined, {}, () => undefined);
    return true;
  } catch {
    return false;
  }
}
