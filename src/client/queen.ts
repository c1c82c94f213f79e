import { randomUUID } from 'node:crypto';
import { TimerRef } from './timers.js';
import { Transport, type RetryPolicy } from './transport.js';
import {
  ackMessages,
  Consumer,
  popMessages,
  TransactionBuilder,
  type AckOutcome,
  type AckStatus,
  type BrowsePage,
  type Message,
  type PopOptions,
} from './consume.js';
import type { ConfigureMode, ConfigureResult, PushInput, PushOutcome, QueueInfo, QueueOptionsPatch, WirePushResult } from './types.js';
import type { DeadLetterList, QueueList, RequeueResult, ServerVersion } from './types.js';
import { pushIdentity } from './types.js';

export const DEFAULT_PARTITION = 'Default';

export interface QueenOptions {
  /** The broker's base URL, e.g. http://127.0.0.1:6632. */
  url: string;
  /** Bearer token, when the broker requires one. */
  token?: string | undefined;
  /** Retries after the first attempt for network errors and 502/503/504 (default 5). */
  retries?: number | undefined;
  /** First backoff ceiling in ms (default 100); doubles per attempt up to maxDelayMs (default 5000). */
  baseDelayMs?: number | undefined;
  maxDelayMs?: number | undefined;
  /** Per-attempt timeout in ms (default 30000). */
  timeoutMs?: number | undefined;
  /** A fetch implementation (default: the global fetch). */
  fetch?: typeof fetch | undefined;
  onRetry?: ((info: { attempt: number; delayMs: number; reason: string }) => void) | undefined;
}

/**
 * Client for the queen-ingress HTTP API.
 *
 *   const client = new Queen({ url: 'http://127.0.0.1:6632' })
 *   const [r] = await client.queue('payments').partition('customer-42')
 *     .push([{ transactionId: 'order-9137-paid', data: { orderId: 9137 } }])
 *
 * Stateless apart from its settings: safe to share across the process.
 */
export class Queen {
  private readonly transport: Transport;

  constructor(opts: QueenOptions) {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- plain JavaScript callers may pass no options at all
    if (!opts?.url) throw new TypeError('Queen: url is required');
    const retry: RetryPolicy = {
      retries: nonNegative(opts.retries, 5, 'retries'),
      baseDelayMs: nonNegative(opts.baseDelayMs, 100, 'baseDelayMs'),
      maxDelayMs: nonNegative(opts.maxDelayMs, 5_000, 'maxDelayMs'),
    };
    this.transport = new Transport({
      url: opts.url,
      token: opts.token,
      fetch: opts.fetch ?? globalThis.fetch,
      retry,
      timeoutMs: positive(opts.timeoutMs, 30_000, 'timeoutMs'),
      onRetry: opts.onRetry,
    });
  }

  queue(name: string): QueueRef {
    return new QueueRef(this.transport, name);
  }

  /** A timer on a queue: `client.timer('q').key('k').delay('30m').payload(x).schedule()` (docs/timers.md). */
  timer(queue: string): TimerRef {
    return new TimerRef(this.transport, queue);
  }

  /** Acks popped messages (one batch call); one outcome per message, in order. */
  async ack(msg: Message | readonly Message[], status: AckStatus = 'completed', opts: { error?: string } = {}): Promise<AckOutcome[]> {
    return ackMessages(this.transport, Array.isArray(msg) ? msg : [msg as Message], status, opts.error);
  }

  /** Acks and pushes in one PostgreSQL transaction (see TransactionBuilder). */
  transaction(): TransactionBuilder {
    return new TransactionBuilder(this.transport);
  }

  /** One page of queues by name: those after `after`, at most `limit` (server default and cap: 1000). */
  listQueues(opts: { after?: string; limit?: number } = {}): Promise<QueueList> {
    const q = new URLSearchParams();
    if (opts.after !== undefined) q.set('after', opts.after);
    if (opts.limit !== undefined) q.set('limit', String(opts.limit));
    const query = q.toString();
    return this.transport.request('GET', `api/v1/resources/queues${query ? `?${query}` : ''}`);
  }

  /** The build the broker runs (GET /api/v1/version). */
  version(): Promise<ServerVersion> {
    return this.transport.request('GET', 'api/v1/version');
  }

  /**
   * One page of a queue's dead letters by id (GET /api/v1/dlq): those after
   * id `after`, at most `limit` (server default 100, cap 1000), of one
   * consumer group or of all.
   */
  deadLetters(queue: string, opts: { group?: string; after?: number; limit?: number } = {}): Promise<DeadLetterList> {
    const q = new URLSearchParams({ queue });
    if (opts.group !== undefined) q.set('consumerGroup', opts.group);
    if (opts.after !== undefined) q.set('after', String(opts.after));
    if (opts.limit !== undefined) q.set('limit', String(opts.limit));
    return this.transport.request('GET', `api/v1/dlq?${q.toString()}`);
  }

  /**
   * Pushes a copy of a dead letter to its partition (transactionId
   * "<original>#requeue-<id>") and marks it requeued, in one transaction.
   * QueenHttpError 409 when it was requeued already (also what a retry after
   * a lost answer gets: a requeue is never done twice), 404 when unknown.
   */
  async requeue(id: number): Promise<RequeueResult> {
    const r = await this.transport.request<{ deadLetter: RequeueResult['deadLetter']; push: WirePushResult }>(
      'POST',
      `api/v1/dlq/${encodeURIComponent(String(id))}/requeue`,
    );
    return { deadLetter: r.deadLetter, push: pushOutcome(r.push) };
  }
}

/** A queue: push to its "Default" partition, pick a partition, configure it, read it. */
export class QueueRef {
  constructor(
    private readonly transport: Transport,
    readonly name: string,
  ) {}

  partition(name: string): PartitionRef {
    return new PartitionRef(this.transport, this.name, name);
  }

  push(items: readonly PushInput[]): Promise<PushOutcome[]> {
    return this.partition(DEFAULT_PARTITION).push(items);
  }

  /**
   * POST /api/v1/configure. Merge (the default): omitted keys keep their
   * value, null restores the default. Replace: defaults plus these options.
   */
  configure(options: QueueOptionsPatch, opts: { mode?: ConfigureMode } = {}): Promise<ConfigureResult> {
    return this.transport.request('POST', 'api/v1/configure', { queue: this.name, options, ...(opts.mode ? { mode: opts.mode } : {}) });
  }

  /** Pops (leased unless autoAck); [] when nothing arrived in time. */
  pop(opts: PopOptions = {}): Promise<Message[]> {
    return popMessages(this.transport, this.name, opts);
  }

  /** Reads a partition's messages from an offset without a cursor (operators; GET /api/v1/messages). */
  browse(opts: { partition?: string; from?: number; limit?: number } = {}): Promise<BrowsePage> {
    const qs = new URLSearchParams({ queue: this.name });
    if (opts.partition !== undefined) qs.set('partition', opts.partition);
    if (opts.from !== undefined) qs.set('from', String(opts.from));
    if (opts.limit !== undefined) qs.set('limit', String(opts.limit));
    return this.transport.request('GET', `api/v1/messages?${qs.toString()}`);
  }

  /** A consumer of this queue for a consumer group (see Consumer.consume). */
  group(name: string): Consumer {
    return new Consumer(this.transport, this.name, { group: name, batch: 1, concurrency: 1 });
  }

  /** A queue-mode consumer (no group: one shared cursor). */
  batch(n: number): Consumer {
    return new Consumer(this.transport, this.name, { batch: 1, concurrency: 1 }).batch(n);
  }

  concurrency(n: number): Consumer {
    return new Consumer(this.transport, this.name, { batch: 1, concurrency: 1 }).concurrency(n);
  }

  /** The queue's effective options; throws QueenHttpError 404 when it does not exist. */
  get(): Promise<QueueInfo> {
    return this.transport.request('GET', `api/v1/resources/queues/${encodeURIComponent(this.name)}`);
  }
}

export class PartitionRef {
  constructor(
    private readonly transport: Transport,
    readonly queue: string,
    readonly name: string,
  ) {}

  /**
   * Pushes items; one outcome per item, in order. Items without a
   * transactionId get a random UUID here, before the first attempt, so a
   * retry after a lost answer is deduplicated instead of written twice (so
   * `duplicate` can then mean "your own earlier attempt"). That protection
   * holds only while the queue's dedup window is above 0.
   */
  async push(items: readonly PushInput[]): Promise<PushOutcome[]> {
    if (!Array.isArray(items)) throw new TypeError('push: items must be an array');
    if (items.length === 0) return [];
    // Plain JavaScript callers may put null or undefined in the array: the guards below must not throw on it.
    const wire = (items as readonly (PushInput | null | undefined)[]).map((it) => ({
      queue: this.queue,
      partition: this.name,
      transactionId: it?.transactionId ?? randomUUID(),
      payload: it?.data,
      ...(it?.traceContext !== undefined ? { traceContext: it.traceContext } : {}),
    }));
    const results = await this.transport.request<WirePushResult[]>('POST', 'api/v1/push', { items: wire });
    return results.map(pushOutcome);
  }
}

function pushOutcome(r: WirePushResult): PushOutcome {
  return {
    status: r.status,
    ...pushIdentity(r),
    offset: r.offset,
    queue: r.queue,
    partition: r.partition,
    ...(r.error !== undefined ? { error: r.error } : {}),
  };
}

function positive(v: number | undefined, dflt: number, name: string): number {
  if (v === undefined) return dflt;
  if (!Number.isFinite(v) || v <= 0) throw new TypeError(`Queen: ${name} must be a positive number`);
  return v;
}

function nonNegative(v: number | undefined, dflt: number, name: string): number {
  if (v === undefined) return dflt;
  if (!Number.isFinite(v) || v < 0) throw new TypeError(`Queen: ${name} must be a non-negative number`);
  return v;
}
