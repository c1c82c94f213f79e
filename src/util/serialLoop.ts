/**
 * One async job run in the background, never overlapping itself: after each
 * run, `next` (given the run's outcome) says how many ms to wait before the
 * following one. `runNow()` runs the job at once, queued behind a run in
 * progress, so tests and the loop share one serial order.
 *
 * States: halted (initial) --start()--> looping --halt()--> halted.
 * halt() cancels the pending wait and resolves once the run in progress (if
 * any) has finished; runNow() still works while halted (the owner guards it).
 */
export class SerialLoop<T> {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private halted = true;

  constructor(
    private readonly job: () => Promise<T>,
    private readonly next: (outcome: { ok: true; value: T } | { ok: false; error: unknown }) => number,
  ) {}

  get stopping(): boolean {
    return this.halted;
  }

  start(delayMs = 0): void {
    this.halted = false;
    this.schedule(delayMs);
  }

  runNow(): Promise<T> {
    const p = this.running.catch(() => undefined).then(() => this.job());
    this.running = p;
    return p;
  }

  async halt(): Promise<void> {
    this.halted = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running.catch(() => undefined);
  }

  private schedule(delayMs: number): void {
    if (this.halted) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.halted) return;
      this.runNow().then(
        (value) => this.schedule(this.next({ ok: true, value })),
        (error: unknown) => this.schedule(this.next({ ok: false, error })),
      );
    }, delayMs);
    // A pending wait never keeps the process alive; stop() is what ends the loop.
    this.timer.unref();
  }
}
