/**
 * Long-poll waiters, keyed by queue name. Pure: no timers of its own beyond
 * the one a wait sets for its deadline, no I/O.
 *
 * A ticket is taken BEFORE the pop query runs and waited on after it came
 * back empty: a wake that lands in between marks the ticket, and the wait
 * returns at once. Without that order a push committing while the query ran
 * would be missed until the next wake (the lost wake-up).
 *
 * Ticket states: armed --wake()--> woken; armed --wait() times out/aborts--> done.
 * cancel() (or a finished wait) removes the ticket from the registry.
 */
export class Ticket {
  woken = false;
  private resolve: (() => void) | undefined;
  constructor(
    private readonly owner: PopWaiters,
    readonly queue: string,
  ) {}

  /** Resolves true when woken, false at the deadline or on abort. */
  wait(ms: number, signal?: AbortSignal): Promise<boolean> {
    if (this.woken) {
      this.cancel();
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      const finish = (woken: boolean): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.resolve = undefined;
        this.cancel();
        resolve(woken);
      };
      const onAbort = (): void => finish(false);
      const timer = setTimeout(() => finish(false), Math.max(0, ms));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.resolve = () => finish(true);
      if (signal?.aborted) finish(false);
    });
  }

  /** Inside wait(): its pop query came back empty and it now waits for a wake. */
  get parked(): boolean {
    return this.resolve !== undefined;
  }

  /** Called by the registry. */
  fire(): void {
    this.woken = true;
    this.resolve?.();
  }

  cancel(): void {
    this.owner.remove(this);
  }
}

export class PopWaiters {
  private readonly byQueue = new Map<string, Set<Ticket>>();

  ticket(queue: string): Ticket {
    const t = new Ticket(this, queue);
    let set = this.byQueue.get(queue);
    if (!set) this.byQueue.set(queue, (set = new Set()));
    set.add(t);
    return t;
  }

  remove(t: Ticket): void {
    const set = this.byQueue.get(t.queue);
    if (!set) return;
    set.delete(t);
    if (set.size === 0) this.byQueue.delete(t.queue);
  }

  /** Wakes every waiter of the queue; returns how many. */
  wake(queue: string): number {
    const set = this.byQueue.get(queue);
    if (!set) return 0;
    this.byQueue.delete(queue);
    for (const t of set) t.fire();
    return set.size;
  }

  has(queue: string): boolean {
    return this.byQueue.has(queue);
  }

  /** Wakes everyone (shutdown: pending long polls answer at once). */
  wakeAll(): void {
    for (const q of [...this.byQueue.keys()]) this.wake(q);
  }

  get size(): number {
    let n = 0;
    for (const s of this.byQueue.values()) n += s.size;
    return n;
  }

  /**
   * Tickets waiting for a wake (see Ticket.parked). `size` also counts
   * tickets whose pop query is still running, which a push committing now
   * may answer directly, without a wake.
   */
  get parked(): number {
    let n = 0;
    for (const s of this.byQueue.values()) for (const t of s) if (t.parked) n++;
    return n;
  }

  /** Tickets of one queue waiting for a wake (see parked). */
  parkedOn(queue: string): number {
    let n = 0;
    for (const t of this.byQueue.get(queue) ?? []) if (t.parked) n++;
    return n;
  }
}
