import cluster from 'node:cluster';
import type { FleetReadiness, WorkerReadiness } from '../http/routes/ops.js';
import type { Logger } from '../telemetry/logger.js';
import { ClusterMetrics } from '../telemetry/clusterMetrics.js';
import { backoffMs } from '../util/backoff.js';
import { Component } from '../util/lifecycle.js';
import { isWorkerMessage, STOPPING, type PrimaryMessage } from './protocol.js';

export interface WorkerFleetOptions {
  workers: number;
  logger: Logger;
  /** How long the primary waits for one worker's readiness answer (a silent worker is not ready). */
  readinessTimeoutMs: number;
  /** Longest wait before replacing a worker that keeps crashing (exponential backoff from 1 s). */
  restartBackoffMaxMs?: number;
  /** A worker that ran this long before it died starts the backoff over (its crash is not a loop). */
  stableAfterMs?: number;
  /** stop()'s phase 1 bound: how long it waits for every worker's `drained` before telling them to leave anyway. */
  drainTimeoutMs: number;
  /** stop()'s phase 2 bound: how long it waits for every worker to exit after `leave` before SIGKILLing the rest. */
  leaveTimeoutMs: number;
  /** node:cluster (the default); unit tests pass a stand-in whose workers are not processes. */
  cluster?: FleetCluster;
}

/** What the fleet uses of a node:cluster worker. */
export interface FleetWorker {
  readonly process: { readonly pid?: number | undefined; kill(signal: NodeJS.Signals): boolean };
  isConnected(): boolean;
  send(m: PrimaryMessage, sendHandle: undefined, callback: (err: Error | null) => void): boolean;
}

/** What the fleet uses of node:cluster in the primary. */
export interface FleetCluster {
  readonly isPrimary: boolean;
  fork(env: Record<string, string>): FleetWorker;
  onMessage(listener: (worker: FleetWorker, m: unknown) => void): void;
  onExit(listener: (worker: FleetWorker, code: number | null, signal: string | null) => void): void;
}

const nodeCluster: FleetCluster = {
  get isPrimary() {
    return cluster.isPrimary;
  },
  fork: (env) => cluster.fork(env),
  onMessage: (listener) => cluster.on('message', listener),
  onExit: (listener) => cluster.on('exit', listener),
};

/**
 * One worker position. States: forked (no `startedAt`) -> started -> exited
 * -> (backoff) -> forked ...; during stop(): started -> drain sent ->
 * drained -> leave sent -> exited (a worker still starting gets its drain
 * once it has started).
 */
interface Slot {
  readonly slot: number;
  worker: FleetWorker | undefined;
  forkedAt: number;
  /** When the worker said its service runs; undefined while it starts. */
  startedAt: number | undefined;
  /** Consecutive crashes that came sooner than stableAfterMs after their fork. */
  crashes: number;
  replaceTimer: NodeJS.Timeout | undefined;
  /** stop() sent this worker `drain`. */
  drainSent: boolean;
  /** This worker reported `drained` (phase 1 done here). */
  drained: boolean;
}

/**
 * The primary process of a pod with QUEEN_WORKERS > 1 (docs/scaling.md). It
 * runs no broker itself: it forks one worker per slot (each a whole broker,
 * its own Kafka consumer in the group, fusion, writer, pool and cache share),
 * replaces a worker that dies, and answers for the pod what no single worker
 * can: /metrics summed over the workers and readiness over all of them.
 *
 * Fleet states (besides the Component lifecycle):
 *   coming-up --every slot started once--> up
 *   coming-up --a worker exits--> failed (`up` rejects; main exits 1, as a
 *                                 single process whose start-up failed)
 *   up --a worker exits--> up, its slot replaced after a backoff: none after
 *        a worker that ran stableAfterMs, then 1 s, 2 s, ... up to
 *        restartBackoffMaxMs while it keeps dying young (a crash loop does
 *        not spin)
 *   any --stop()--> draining (phase 1): no slot is replaced any more;
 *        readiness answers not ready; every started worker is told `drain`
 *        (one still starting, once it has started): it stops fetching,
 *        settles its chunks, commits what PostgreSQL verified and stays in
 *        the group, then reports `drained`
 *   draining --every worker left drained or exited, or drainTimeoutMs-->
 *        leaving (phase 2): every started worker is told `leave` (one that
 *        never started gets SIGTERM, its own single-process stop); each
 *        leaves the group, stops and exits
 *   leaving --every worker exited--> stopped (`clean` when all exited 0)
 *   leaving --leaveTimeoutMs--> SIGKILL to the rest, stopped, not clean
 *   any --killAll()--> every worker SIGKILLed (the primary's forced stop)
 *
 * Two phases because the first worker to leave the group starts a
 * rebalance, which refuses the offset commits of a worker still settling
 * its last chunks (their generation is gone): draining all before any
 * leaves makes every verified record committed (docs/scaling.md,
 * "Stopping").
 *
 * Nothing is lost or doubled when a worker dies: it committed Kafka offsets
 * only behind PostgreSQL's answers, so its partitions are redelivered to the
 * survivors (after the group's session timeout) or its replacement, and a
 * re-pushed record answers duplicate.
 */
export class WorkerFleet extends Component {
  private readonly slots: Slot[];
  private readonly log: Logger;
  private readonly metrics = new ClusterMetrics();
  /** Woken by every exit and every `drained` (stop()'s waits). */
  private readonly waiters = new Set<() => void>();
  private nextAsk = 0;
  private readonly asks = new Map<number, (a: WorkerReadiness) => void>();
  private readonly cluster: FleetCluster;
  /** stop() began: phase 1, then (with `leaving`) phase 2. */
  private draining = false;
  /** stop()'s phase 2 began: no worker is told `drain` any more. */
  private leaving = false;
  private isUp = false;
  private cleanExits = true;
  private resolveUp!: () => void;
  private rejectUp!: (err: Error) => void;
  /** Resolves when every slot's worker has started once; rejects when one exits before that. */
  readonly up: Promise<void>;

  constructor(private readonly opts: WorkerFleetOptions) {
    super('WorkerFleet');
    this.cluster = opts.cluster ?? nodeCluster;
    if (!this.cluster.isPrimary) throw new Error('WorkerFleet runs in the primary process only');
    this.log = opts.logger;
    this.slots = Array.from({ length: opts.workers }, (_, slot) => ({
      slot,
      worker: undefined,
      forkedAt: 0,
      startedAt: undefined,
      crashes: 0,
      replaceTimer: undefined,
      drainSent: false,
      drained: false,
    }));
    this.up = new Promise((resolve, reject) => {
      this.resolveUp = resolve;
      this.rejectUp = reject;
    });
    this.up.catch(() => undefined);
  }

  /** false when a worker did not end its stop cleanly (exit 0, before leaveTimeoutMs): the primary's exit code. */
  get clean(): boolean {
    return this.cleanExits;
  }

  protected async onStart(): Promise<void> {
    this.cluster.onMessage((worker, m) => this.onMessage(worker, m));
    this.cluster.onExit((worker, code, signal) => this.onExit(worker, code, signal));
    for (const s of this.slots) this.fork(s);
  }

  protected async onStop(): Promise<void> {
    this.draining = true;
    this.rejectUp(new Error('stopped before every worker started'));
    for (const s of this.slots) {
      clearTimeout(s.replaceTimer);
      s.replaceTimer = undefined;
    }
    const alive = () => this.slots.filter((s) => s.worker !== undefined);
    // Phase 1. A worker still starting gets its drain when it reports started (onMessage).
    for (const s of alive()) if (s.startedAt !== undefined) this.sendDrain(s);
    this.log.info({ workers: alive().length }, 'stopping: the workers drain (phase 1)');
    const drained = await this.until(() => alive().every((s) => s.drained), this.opts.drainTimeoutMs);
    if (drained) this.log.info('every worker drained; they leave the group now (phase 2)');
    else
      this.log.warn(
        {
          timeoutMs: this.opts.drainTimeoutMs,
          waitingFor: alive()
            .filter((s) => !s.drained)
            .map((s) => s.slot),
        },
        'not every worker drained in time; all leave the group now (phase 2)',
      );
    // Phase 2. A worker that reports started from now on was SIGTERMed here and gets no drain.
    this.leaving = true;
    for (const s of alive()) {
      if (s.startedAt !== undefined) reply(s.worker!, { type: 'queen:leave' });
      else s.worker!.process.kill('SIGTERM');
    }
    if (await this.until(() => alive().length === 0, this.opts.leaveTimeoutMs)) return;
    this.cleanExits = false;
    this.log.error(
      { timeoutMs: this.opts.leaveTimeoutMs, slots: alive().map((s) => s.slot) },
      'workers did not exit in time after leave; killing them',
    );
    this.killAll();
    // SIGKILL cannot be refused; the bound only keeps a lost exit event from hanging the stop.
    await this.until(() => alive().length === 0, 2_000);
  }

  private sendDrain(s: Slot): void {
    s.drainSent = true;
    reply(s.worker!, { type: 'queen:drain' });
  }

  /** Waits until `done()` holds (re-checked at every exit and `drained`) or `ms` passed; false on the timeout. */
  private async until(done: () => boolean, ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!done()) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.waiters.add(wake);
      });
    }
    return true;
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Last resort after the shutdown timeout: SIGKILL whatever worker is left. */
  killAll(): void {
    for (const s of this.slots) s.worker?.process.kill('SIGKILL');
  }

  private fork(s: Slot): void {
    s.replaceTimer = undefined;
    s.startedAt = undefined;
    // A fresh worker has been told nothing of a stop (forks happen only before one, but the slot says so itself).
    s.drainSent = false;
    s.drained = false;
    s.forkedAt = Date.now();
    s.worker = this.cluster.fork({ QUEEN_WORKER_SLOT: String(s.slot) });
    this.log.info({ slot: s.slot, workerPid: s.worker.process.pid }, 'worker forked');
  }

  private slotOf(worker: FleetWorker): Slot | undefined {
    return this.slots.find((s) => s.worker === worker);
  }

  private onExit(worker: FleetWorker, code: number | null, signal: string | null): void {
    const s = this.slotOf(worker);
    if (!s) return;
    s.worker = undefined;
    this.wake();
    const pid = worker.process.pid;
    if (this.draining) {
      // Never replaced: the pod is stopping.
      if (code !== 0) this.cleanExits = false;
      this.log.info({ slot: s.slot, workerPid: pid, code, signal, drained: s.drained }, 'worker stopped');
      return;
    }
    if (!this.isUp) {
      // Logged once, by main, where the failed start is handled.
      this.rejectUp(new Error(`worker ${s.slot} (pid ${pid}) exited during start-up (code ${code}, signal ${signal})`));
      return;
    }
    const lived = Date.now() - s.forkedAt;
    if (lived >= (this.opts.stableAfterMs ?? 30_000)) s.crashes = 0;
    const delayMs = s.crashes === 0 ? 0 : backoffMs(s.crashes - 1, 1_000, this.opts.restartBackoffMaxMs ?? 30_000);
    s.crashes++;
    this.log.warn({ slot: s.slot, workerPid: pid, code, signal, livedMs: lived, delayMs }, 'worker exited; replacing it');
    s.replaceTimer = setTimeout(() => {
      if (!this.draining) this.fork(s);
    }, delayMs);
  }

  private onMessage(worker: FleetWorker, m: unknown): void {
    if (!isWorkerMessage(m)) return;
    const s = this.slotOf(worker);
    switch (m.type) {
      case 'queen:started':
        if (!s) return;
        s.startedAt = Date.now();
        this.log.info({ slot: s.slot, workerPid: worker.process.pid }, 'worker started');
        // Started while the pod drains: it joins phase 1 now.
        if (this.draining && !this.leaving && !s.drainSent) this.sendDrain(s);
        if (!this.isUp && this.slots.every((x) => x.startedAt !== undefined)) {
          this.isUp = true;
          this.resolveUp();
        }
        return;
      case 'queen:fleet-metrics':
        this.metrics.render().then(
          (text) => reply(worker, { type: 'queen:fleet-metrics-answer', id: m.id, text }),
          (err: unknown) => reply(worker, { type: 'queen:fleet-metrics-answer', id: m.id, error: (err as Error).message }),
        );
        return;
      case 'queen:fleet-ready':
        void this.readiness().then((verdict) => reply(worker, { type: 'queen:fleet-ready-answer', id: m.id, verdict }));
        return;
      case 'queen:drained':
        if (!s) return;
        s.drained = true;
        this.log.info({ slot: s.slot, workerPid: worker.process.pid }, 'worker drained');
        this.wake();
        return;
      case 'queen:ready-answer':
        this.asks.get(m.id)?.(m.answer);
        this.asks.delete(m.id);
        return;
    }
  }

  /**
   * The pod is ready when every slot holds a started worker that answers
   * ready in time: a slot being replaced, a worker still starting, one whose
   * event loop does not answer and one whose own checks fail (PostgreSQL, a
   * stuck or halted consumer) each make it not ready, with the reason.
   */
  async readiness(): Promise<FleetReadiness> {
    if (this.draining) return { ready: false, reasons: [STOPPING], workers: [] };
    const workers = await Promise.all(
      this.slots.map(async (s): Promise<WorkerReadiness> => {
        const pid = s.worker?.process.pid ?? 0;
        if (!s.worker?.isConnected()) return { slot: s.slot, pid, ready: false, reasons: ['not running (being replaced)'] };
        if (s.startedAt === undefined) return { slot: s.slot, pid, ready: false, reasons: ['starting'] };
        return this.ask(s.slot, s.worker);
      }),
    );
    const reasons = workers.filter((w) => !w.ready).map((w) => `worker ${w.slot} (pid ${w.pid}): ${w.reasons.join('; ')}`);
    return { ready: reasons.length === 0, reasons, workers };
  }

  private ask(slot: number, worker: FleetWorker): Promise<WorkerReadiness> {
    const id = this.nextAsk++;
    const pid = worker.process.pid ?? 0;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.asks.delete(id);
        resolve({ slot, pid, ready: false, reasons: [`did not answer within ${this.opts.readinessTimeoutMs} ms`] });
      }, this.opts.readinessTimeoutMs);
      this.asks.set(id, (a) => {
        clearTimeout(timer);
        resolve(a);
      });
      reply(worker, { type: 'queen:ready-ask', id });
    });
  }
}

function reply(worker: FleetWorker, m: PrimaryMessage): void {
  if (!worker.isConnected()) return;
  try {
    worker.send(m, undefined, () => undefined);
  } catch {
    // The worker is gone; its exit event does the bookkeeping.
  }
}
