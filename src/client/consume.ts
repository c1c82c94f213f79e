import { randomUUID } from 'node:crypto';
import type { Transport } from './transport.js';
import type { KafkaOrigin, PushInput, PushOutcome, WirePushResult } from './types.js';
import { pushIdentity } from './types.js';

/** Settles a message: completed, failed (counts an attempt; past retryLimit it is dead-lettered), retry, dlq. */
export type AckStatus = 'completed' | 'failed' | 'retry' | 'dlq';

/** What an ack did: settled, released for redelivery, dead-lettered, or why nothing changed. */
export type AckResult = 'acked' | 'released' | 'dead_lettered' | 'already_acked' | 'not_found' | 'lease_expired';

/** A popped message. `leaseId` is null when it was popped with autoAck. */
export interface Message {
  id: string;
  transactionId: string;
  queue: string;
  partition: string;
  partitionId: number;
  offset: number;
  createdAt: string;
  /** The payload: JSON as pushed; base64 text when `dataEncoding` is "base64" (a non-JSON Kafka value). */
  data: unknown;
  dataEncoding?: 'base64';
  traceContext: string | null;
  /** The Kafka record it came from (topic, partition, offset, timestamp, headers); absent for HTTP pushes. */
  kafka?: KafkaOrigin;
  leaseId: string | null;
  leaseExpiresAt: string | null;
  consumerGroup: string;
}

export interface PopOptions {
  /** Consumer group; default queue mode (one shared cursor). */
  group?: string;
  partition?: string;
  /** Messages at most (1..10000, default 1). */
  batch?: number;
  /** Long-poll: wait up to timeoutMs for messages (default true for consume, false for pop). */
  wait?: boolean;
  /** Long-poll limit in ms (default 30000). */
  timeoutMs?: number;
  autoAck?: boolean;
  subscriptionMode?: 'all' | 'new' | 'from';
  subscriptionFrom?: string | Date;
  leaseSeconds?: number;
  signal?: AbortSignal;
  /** Called when retention removed offsets under the group's cursor and the pop skipped them (the answer's `skipped`). */
  onSkipped?: (skipped: number, partition: string) => void;
}

export interface AckOutcome {
  index?: number;
  result: AckResult;
  status: AckStatus;
  transactionId?: string;
  partitionId: number | null;
  offset: number | null;
  attempts?: number;
}

interface WirePop {
  leaseId: string | null;
  leaseExpiresAt: string | null;
  partition: string;
  partitionId: number;
  skipped?: number;
  messages: Omit<Message, 'queue' | 'leaseId' | 'leaseExpiresAt' | 'consumerGroup'>[];
}

export const QUEUE_MODE_GROUP = '__QUEUE_MODE__';

/** One page of GET /api/v1/messages. */
export interface BrowsePage {
  queue: string;
  partition: string;
  partitionId: number;
  logStart: number;
  lastOffset: number;
  messages: Omit<Message, 'queue' | 'leaseId' | 'leaseExpiresAt' | 'consumerGroup'>[];
  /** The offset to continue from, or null at the end. */
  next: number | null;
}

/** GET /api/v1/pop/...: the messages (empty when nothing arrived in time). */
export async function popMessages(transport: Transport, queue: string, o: PopOptions = {}): Promise<Message[]> {
  const qs = new URLSearchParams();
  if (o.group !== undefined) qs.set('consumerGroup', o.group);
  if (o.batch !== undefined) qs.set('batch', String(o.batch));
  if (o.wait) qs.set('wait', 'true');
  if (o.timeoutMs !== undefined) qs.set('timeout', String(o.timeoutMs));
  if (o.autoAck) qs.set('autoAck', 'true');
  if (o.subscriptionMode !== undefined) qs.set('subscriptionMode', o.subscriptionMode);
  if (o.subscriptionFrom !== undefined)
    qs.set('subscriptionFrom', o.subscriptionFrom instanceof Date ? o.subscriptionFrom.toISOString() : o.subscriptionFrom);
  if (o.leaseSeconds !== undefined) qs.set('leaseSeconds', String(o.leaseSeconds));
  // A partition named "." or ".." cannot be a path segment (URL parsing
  // resolves it away, even percent-encoded): it goes as ?partition= instead.
  const dotPartition = o.partition === '.' || o.partition === '..';
  if (dotPartition) qs.set('partition', o.partition!);
  const path = `api/v1/pop/queue/${encodeURIComponent(queue)}${o.partition !== undefined && !dotPartition ? `/partition/${encodeURIComponent(o.partition)}` : ''}`;
  const q = qs.toString();
  const waitMs = o.wait ? (o.timeoutMs ?? 30_000) : 0;
  const r = await transport.request<WirePop | undefined>('GET', q ? `${path}?${q}` : path, undefined, {
    timeoutMs: waitMs + 30_000,
    ...(o.signal ? { signal: o.signal } : {}),
  });
  if (!r) return [];
  if (r.skipped && o.onSkipped) o.onSkipped(r.skipped, r.partition);
  const group = o.group ?? QUEUE_MODE_GROUP;
  return r.messages.map((m) => ({ ...m, queue, leaseId: r.leaseId, leaseExpiresAt: r.leaseExpiresAt, consumerGroup: group }));
}

/** One wire ack item for a popped message. */
export function ackItem(m: Message, status: AckStatus, error?: string): Record<string, unknown> {
  return {
    transactionId: m.transactionId,
    partitionId: m.partitionId,
    consumerGroup: m.consumerGroup,
    status,
    ...(m.leaseId ? { leaseId: m.leaseId } : {}),
    ...(error !== undefined ? { error } : {}),
  };
}

export async function ackMessages(
  transport: Transport,
  msgs: readonly Message[],
  status: AckStatus,
  error?: string,
): Promise<AckOutcome[]> {
  if (msgs.length === 0) return [];
  const r = await transport.request<{ results: AckOutcome[] }>('POST', 'api/v1/ack/batch', {
    acknowledgments: msgs.map((m) => ackItem(m, status, error)),
  });
  return r.results;
}

/**
 * Acks and pushes applied atomically in one PostgreSQL transaction:
 *
 *   await client.transaction().ack(msg).queue('next').push([{ data }]).commit()
 *
 * All or nothing: if an ack cannot settle (its lease expired and the message
 * went to another consumer, say), commit() throws QueenHttpError 409 and no
 * push of it was written. Push items without a transactionId get one here,
 * so retrying a commit whose answer was lost cannot write them twice.
 */
export class TransactionBuilder {
  private readonly ops: Record<string, unknown>[] = [];
  private readonly leases = new Set<string>();

  constructor(private readonly transport: Transport) {}

  ack(msg: Message | readonly Message[], status: AckStatus = 'completed', error?: string): this {
    for (const m of (Array.isArray(msg) ? msg : [msg]) as readonly Message[]) {
      this.ops.push({ type: 'ack', ...ackItem(m, status, error) });
      if (m.leaseId) this.leases.add(m.leaseId);
    }
    return this;
  }

  /** Push to a queue (and partition, default "Default") inside the transaction. */
  queue(name: string): {
    partition(p: string): { push(items: readonly PushInput[]): TransactionBuilder };
    push(items: readonly PushInput[]): TransactionBuilder;
  } {
    const push =
      (partition: string | undefined) =>
      (items: readonly PushInput[]): TransactionBuilder => {
        this.ops.push({
          type: 'push',
          items: items.map((it) => ({
            queue: name,
            ...(partition !== undefined ? { partition } : {}),
            transactionId: it.transactionId ?? randomUUID(),
            payload: it.data,
            ...(it.traceContext !== undefined ? { traceContext: it.traceContext } : {}),
          })),
        });
        return this;
      };
    return { partition: (p: string) => ({ push: push(p) }), push: push(undefined) };
  }

  async commit(): Promise<{ pushes: PushOutcome[]; acks: AckOutcome[] }> {
    const r = await this.transport.request<{ pushes: WirePushResult[]; acks: AckOutcome[] }>('POST', 'api/v1/transaction', {
      operations: this.ops,
      requiredLeases: [...this.leases],
    });
    return {
      pushes: r.pushes.map((p) => ({
        status: p.status,
        ...pushIdentity(p),
        offset: p.offset,
        queue: p.queue,
        partition: p.partition,
      })),
      acks: r.acks,
    };
  }
}

export interface ConsumeOptions {
  /** Stops the loop: no new pops; the batch in hand finishes and is acked. */
  signal?: AbortSignal;
  /** Lease length asked for each pop (default: the queue's). */
  leaseSeconds?: number;
  /** Long-poll limit per pop in ms (default 30000). */
  timeoutMs?: number;
  subscriptionMode?: 'all' | 'new' | 'from';
  subscriptionFrom?: string | Date;
  /** Called when a pop or ack fails (the loop backs off and goes on). */
  onError?: (err: unknown) => void;
}

/**
 * A consumer: client.queue('q').group('g').batch(100).concurrency(4).consume(handler, { signal }).
 * Immutable: each setter returns a new builder.
 */
export class Consumer {
  constructor(
    private readonly transport: Transport,
    private readonly queueName: string,
    private readonly settings: { group?: string; batch: number; concurrency: number; partition?: string },
  ) {}

  group(name: string): Consumer {
    return new Consumer(this.transport, this.queueName, { ...this.settings, group: name });
  }

  batch(n: number): Consumer {
    if (!Number.isInteger(n) || n < 1 || n > 10_000) throw new TypeError('batch must be an integer from 1 to 10000');
    return new Consumer(this.transport, this.queueName, { ...this.settings, batch: n });
  }

  concurrency(n: number): Consumer {
    if (!Number.isInteger(n) || n < 1 || n > 1_000) throw new TypeError('concurrency must be an integer from 1 to 1000');
    return new Consumer(this.transport, this.queueName, { ...this.settings, concurrency: n });
  }

  partition(p: string): Consumer {
    return new Consumer(this.transport, this.queueName, { ...this.settings, partition: p });
  }

  /**
   * Runs `concurrency` loops, each: long-poll a batch, run the handler on
   * each message in offset order, ack completed when it resolves or failed
   * (with the error text) when it throws, acking the batch in one call. While
   * a batch is in hand its lease is extended every third of its length, so a
   * slow handler does not lose it. Resolves once `signal` aborted and every
   * loop finished its batch.
   */
  async consume(handler: (msg: Message) => Promise<void> | void, opts: ConsumeOptions = {}): Promise<void> {
    const loops = Array.from({ length: this.settings.concurrency }, () => this.loop(handler, opts));
    await Promise.all(loops);
  }

  private async loop(handler: (msg: Message) => Promise<void> | void, opts: ConsumeOptions): Promise<void> {
    const signal = opts.signal;
    let backoff = 0;
    while (!signal?.aborted) {
      let msgs: Message[];
      try {
        msgs = await popMessages(this.transport, this.queueName, {
          ...(this.settings.group !== undefined ? { group: this.settings.group } : {}),
          ...(this.settings.partition !== undefined ? { partition: this.settings.partition } : {}),
          batch: this.settings.batch,
          wait: true,
          timeoutMs: opts.timeoutMs ?? 30_000,
          ...(opts.leaseSeconds !== undefined ? { leaseSeconds: opts.leaseSeconds } : {}),
          ...(opts.subscriptionMode !== undefined ? { subscriptionMode: opts.subscriptionMode } : {}),
          ...(opts.subscriptionFrom !== undefined ? { subscriptionFrom: opts.subscriptionFrom } : {}),
          ...(signal ? { signal } : {}),
        });
        backoff = 0;
      } catch (err) {
        if (signal?.aborted) return;
        opts.onError?.(err);
        backoff = Math.min(5_000, backoff * 2 || 100);
        await new Promise((r) => setTimeout(r, Math.random() * backoff));
        continue;
      }
      if (msgs.length === 0) continue;
      await this.runBatch(msgs, handler, opts);
    }
  }

  private async runBatch(msgs: Message[], handler: (msg: Message) => Promise<void> | void, opts: ConsumeOptions): Promise<void> {
    const leaseId = msgs[0]!.leaseId;
    let renew: NodeJS.Timeout | undefined;
    if (leaseId && msgs[0]!.leaseExpiresAt) {
      const length = Math.max(1_000, Date.parse(msgs[0]!.leaseExpiresAt) - Date.now());
      const seconds = Math.max(1, Math.ceil(length / 1000));
      renew = setInterval(
        () => {
          this.transport.request('POST', `api/v1/lease/${leaseId}/extend`, { seconds }).catch((err: unknown) => opts.onError?.(err));
        },
        Math.max(250, Math.floor(length / 3)),
      );
    }
    const items: Record<string, unknown>[] = [];
    try {
      for (const m of msgs) {
        try {
          await handler(m);
          items.push(ackItem(m, 'completed'));
        } catch (err) {
          items.push(ackItem(m, 'failed', err instanceof Error ? err.message : String(err)));
        }
      }
    } finally {
      clearInterval(renew);
    }
    if (!leaseId) return;
    try {
      await this.transport.request('POST', 'api/v1/ack/batch', { acknowledgments: items });
    } catch (err) {
      // The lease expires and the batch is redelivered: at-least-once.
      opts.onError?.(err);
    }
  }
}
