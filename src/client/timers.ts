import { QueenHttpError } from './errors.js';
import type { Transport } from './transport.js';

export interface TimerScheduled {
  status: 'scheduled' | 'rescheduled';
  /** The id the message will carry when the timer fires (kept across reschedules). */
  messageId: string;
  transactionId: string;
}

export interface PendingTimerInfo {
  status: 'pending';
  queue: string;
  key: string;
  partition: string;
  deliverAt: string;
  transactionId: string;
  messageId: string;
  payload: unknown;
  attempts: number;
  lastError: string | null;
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "30m", "10s", "250ms", "2h", "1d", "1h30m", or a number of milliseconds. */
export function parseDuration(d: string | number): number {
  if (typeof d === 'number') {
    if (!Number.isInteger(d) || d < 0) throw new TypeError(`timer delay must be a non-negative integer of ms, got ${d}`);
    return d;
  }
  const re = /(\d+)(ms|s|m|h|d)/y;
  let total = 0;
  let pos = 0;
  const s = d.trim();
  if (s === '') throw new TypeError('timer delay is empty');
  while (pos < s.length) {
    re.lastIndex = pos;
    const m = re.exec(s);
    if (!m) throw new TypeError(`timer delay "${d}" is not a duration like 30m, 10s, 250ms, 1h30m`);
    total += Number(m[1]) * UNITS[m[2]!]!;
    pos = re.lastIndex;
  }
  return total;
}

/**
 * A timer on a queue, built up fluently (docs/timers.md):
 *
 *   await client.timer('reminders').key('order-9137').partition('customer-42')
 *     .delay('30m').payload({ orderId: 9137 }).schedule()
 *
 * Each setter returns a new builder, so a partly built one can be reused.
 * `cancel()` answers 'absent' when the timer is no longer pending, which
 * includes "already delivered" — never read it as "not delivered".
 */
export class TimerRef {
  constructor(
    private readonly transport: Transport,
    readonly queue: string,
    private readonly fields: {
      key?: string;
      partition?: string;
      delayMs?: number;
      deliverAt?: string;
      payload?: unknown;
      hasPayload?: boolean;
      transactionId?: string;
    } = {},
  ) {}

  key(key: string): TimerRef {
    return this.with({ key });
  }
  partition(name: string): TimerRef {
    return this.with({ partition: name });
  }
  /** Fire this long after the broker receives the schedule. */
  delay(d: string | number): TimerRef {
    return this.with({ delayMs: parseDuration(d), deliverAt: undefined });
  }
  /** Fire at this time (in the past: at the broker's next sweep). */
  at(when: Date | string | number): TimerRef {
    const ms = when instanceof Date ? when.getTime() : typeof when === 'number' ? when : Date.parse(when);
    if (!Number.isFinite(ms)) throw new TypeError(`timer time "${String(when)}" is not a date`);
    return this.with({ deliverAt: new Date(ms).toISOString(), delayMs: undefined });
  }
  payload(data: unknown): TimerRef {
    return this.with({ payload: data, hasPayload: true });
  }
  transactionId(id: string): TimerRef {
    return this.with({ transactionId: id });
  }

  schedule(): Promise<TimerScheduled> {
    const f = this.fields;
    if (!f.key) throw new TypeError('timer: key(...) is required');
    if (f.delayMs === undefined && f.deliverAt === undefined) throw new TypeError('timer: delay(...) or at(...) is required');
    if (!f.hasPayload) throw new TypeError('timer: payload(...) is required');
    return this.transport.request('POST', 'api/v1/timers', {
      queue: this.queue,
      key: f.key,
      ...(f.partition !== undefined ? { partition: f.partition } : {}),
      ...(f.delayMs !== undefined ? { delayMs: f.delayMs } : { deliverAt: f.deliverAt }),
      payload: f.payload,
      ...(f.transactionId !== undefined ? { transactionId: f.transactionId } : {}),
    });
  }

  async cancel(): Promise<'cancelled' | 'absent'> {
    const r = await this.transport.request<{ status: 'cancelled' | 'absent' }>('DELETE', this.path());
    return r.status;
  }

  /** The pending timer, or null when it is absent (never scheduled, cancelled, or already fired). */
  async peek(): Promise<PendingTimerInfo | null> {
    try {
      return await this.transport.request<PendingTimerInfo>('GET', this.path());
    } catch (err) {
      if (err instanceof QueenHttpError && err.status === 404) return null;
      throw err;
    }
  }

  /** Pending timers of the queue in due order. */
  list(limit = 100): Promise<{ queue: string; timers: Omit<PendingTimerInfo, 'status' | 'payload' | 'lastError'>[] }> {
    return this.transport.request('GET', `api/v1/timers/${encodeURIComponent(this.queue)}?limit=${limit}`);
  }

  private path(): string {
    if (!this.fields.key) throw new TypeError('timer: key(...) is required');
    return `api/v1/timers/${encodeURIComponent(this.queue)}/${encodeURIComponent(this.fields.key)}`;
  }

  private with(patch: Partial<TimerRef['fields']>): TimerRef {
    return new TimerRef(this.transport, this.queue, { ...this.fields, ...patch });
  }
}
