import type { FastifyInstance, FastifyReply } from 'fastify';
import { ConflictError, ValidationError } from '../../errors.js';
import { checkAckItem, checkGroupName, isUuid, QUEUE_MODE_GROUP, type AckItem, type AckOutcome } from '../../engine/acks.js';
import { checkPartitionName, checkQueueName } from '../../engine/limits.js';
import type { PoppedMessage, PopOutcome, PopRequest, SubscriptionMode } from '../../engine/pop.js';
import type { PushItem } from '../../engine/writer.js';
import type { ReadPath } from '../../read/readPath.js';
import { originWire } from '../originWire.js';
import { readItems, toWire, translateItem } from '../pushBody.js';
import { queryInt } from '../queryParams.js';

/** Limits of the consume API (docs/http-api.md). */
export const CONSUME_LIMITS = {
  maxBatch: 10_000,
  defaultTimeoutMs: 30_000,
  maxTimeoutMs: 300_000,
  maxLeaseSeconds: 7 * 24 * 3600,
  maxAckItems: 10_000,
} as const;

const POP_PARAMS = new Set([
  'consumerGroup',
  'batch',
  'wait',
  'timeout',
  'autoAck',
  'subscriptionMode',
  'subscriptionFrom',
  'leaseSeconds',
  'workerId',
  'partition',
]);

/**
 * The consume API: pop (long poll), ack, ack batch, transaction, lease
 * extend. Parameters are checked strictly: an unknown parameter or a bad value
 * is a 400 naming it, and nothing is changed.
 */
export function registerConsume(app: FastifyInstance, read: ReadPath, maxItemsPerPush: number): void {
  app.get<{ Params: { queue: string }; Querystring: Record<string, unknown> }>('/api/v1/pop/queue/:queue', async (req, reply) =>
    pop(read, reply, req.params.queue, undefined, req.query),
  );
  app.get<{ Params: { queue: string; partition: string }; Querystring: Record<string, unknown> }>(
    '/api/v1/pop/queue/:queue/partition/:partition',
    async (req, reply) => pop(read, reply, req.params.queue, req.params.partition, req.query),
  );

  app.post('/api/v1/ack', async (req) => {
    const item = checkAckItem(req.body, {}, 'body');
    const [o] = await read.ack([item]);
    return ackWire(item, o!);
  });

  app.post('/api/v1/ack/batch', async (req) => {
    const body = object(req.body, '{"acknowledgments": [...], "consumerGroup"?: ..., "leaseId"?: ...}');
    for (const k of Object.keys(body)) {
      if (!['acknowledgments', 'consumerGroup', 'leaseId'].includes(k))
        throw new ValidationError(`unknown field "${k}" (allowed: acknowledgments, consumerGroup, leaseId)`, k);
    }
    const list = body.acknowledgments;
    if (!Array.isArray(list) || list.length === 0)
      throw new ValidationError('acknowledgments must be a non-empty array', 'acknowledgments');
    if (list.length > CONSUME_LIMITS.maxAckItems)
      throw new ValidationError(
        `acknowledgments has ${list.length} entries, over the limit of ${CONSUME_LIMITS.maxAckItems}`,
        'acknowledgments',
      );
    const items = list.map((raw, i) =>
      checkAckItem(raw, { consumerGroup: body.consumerGroup, leaseId: body.leaseId }, `acknowledgments[${i}]`),
    );
    const outcomes = await read.ack(items);
    return { results: outcomes.map((o, i) => ({ index: i, ...ackWire(items[i]!, o) })) };
  });

  app.post('/api/v1/transaction', async (req) => {
    const body = object(req.body, '{"operations": [...], "requiredLeases"?: [...]}');
    for (const k of Object.keys(body)) {
      if (!['operations', 'requiredLeases'].includes(k))
        throw new ValidationError(`unknown field "${k}" (allowed: operations, requiredLeases)`, k);
    }
    const ops = body.operations;
    if (!Array.isArray(ops) || ops.length === 0) throw new ValidationError('operations must be a non-empty array', 'operations');
    const required = body.requiredLeases ?? [];
    if (!Array.isArray(required) || !required.every(isUuid))
      throw new ValidationError('requiredLeases must be an array of lease ids (UUIDs)', 'requiredLeases');
    const acks: AckItem[] = [];
    const pushes: PushItem[] = [];
    ops.forEach((op, i) => {
      const o = object(op, `operations[${i}]: {"type": "ack" | "push", ...}`);
      if (o.type === 'ack') {
        const { type: _t, ...rest } = o;
        acks.push(checkAckItem(rest, {}, `operations[${i}]`));
      } else if (o.type === 'push') {
        for (const k of Object.keys(o))
          if (k !== 'type' && k !== 'items') throw new ValidationError(`operations[${i}]: unknown field "${k}"`, `operations[${i}].${k}`);
        for (const raw of readItems({ items: o.items }, maxItemsPerPush)) {
          const t = translateItem(raw);
          if (!t.ok) throw new ValidationError(`operations[${i}]: ${t.result.error}`, `operations[${i}].items`);
          pushes.push(t.item);
        }
      } else {
        throw new ValidationError(`operations[${i}].type must be "ack" or "push", got ${JSON.stringify(o.type)}`, `operations[${i}].type`);
      }
    });
    const r = await read.transaction(pushes, acks, required);
    return {
      committed: true,
      pushes: r.pushes.map((p, i) => toWire(i, p)),
      acks: r.acks.map((o, i) => ({ index: i, ...ackWire(acks[i]!, o) })),
    };
  });

  app.post<{ Params: { leaseId: string } }>('/api/v1/lease/:leaseId/extend', async (req) => {
    const leaseId = req.params.leaseId;
    if (!isUuid(leaseId)) throw new ValidationError('leaseId must be a UUID', 'leaseId');
    const body = req.body === undefined ? {} : object(req.body, '{"seconds": N}');
    for (const k of Object.keys(body)) if (k !== 'seconds') throw new ValidationError(`unknown field "${k}" (allowed: seconds)`, k);
    const seconds = body.seconds ?? 60;
    if (typeof seconds !== 'number' || !Number.isInteger(seconds) || seconds < 1 || seconds > CONSUME_LIMITS.maxLeaseSeconds) {
      throw new ValidationError(`seconds must be an integer from 1 to ${CONSUME_LIMITS.maxLeaseSeconds}`, 'seconds');
    }
    const r = await read.extend(leaseId, seconds);
    if (!r) throw new ConflictError(`lease ${leaseId} is not held (it expired and was taken over, or was fully acked)`);
    return { leaseId: r.leaseId, leaseExpiresAt: r.leaseExpiresAt.toISOString() };
  });
}

async function pop(
  read: ReadPath,
  reply: FastifyReply,
  queue: string,
  partition: string | undefined,
  query: Record<string, unknown>,
): Promise<unknown> {
  for (const k of Object.keys(query))
    if (!POP_PARAMS.has(k)) throw new ValidationError(`unknown parameter "${k}" (allowed: ${[...POP_PARAMS].join(', ')})`, k);
  // ?partition= is the same as the /partition/:partition path, for names a
  // URL path cannot carry ("." and "..", which a URL parser resolves away).
  if (query.partition !== undefined) {
    if (partition !== undefined) throw new ValidationError('partition is given twice (path and query)', 'partition');
    partition = str(query.partition, 'partition', 1024);
  }
  const req: PopRequest = {
    queue: checkQueueName(queue),
    partition: partition === undefined ? undefined : checkPartitionName(partition),
    consumerGroup: query.consumerGroup === undefined ? QUEUE_MODE_GROUP : checkGroupName(query.consumerGroup),
    batch: int(query.batch, 'batch', 1, CONSUME_LIMITS.maxBatch, 1),
    leaseSeconds:
      query.leaseSeconds === undefined ? undefined : int(query.leaseSeconds, 'leaseSeconds', 1, CONSUME_LIMITS.maxLeaseSeconds, 0),
    subscriptionMode: mode(query.subscriptionMode),
    subscriptionFrom: undefined,
    workerId: query.workerId === undefined ? undefined : str(query.workerId, 'workerId', 256),
    autoAck: bool(query.autoAck, 'autoAck'),
  };
  if (req.subscriptionMode === 'from') {
    const raw = str(query.subscriptionFrom, 'subscriptionFrom', 64);
    const d = new Date(raw);
    if (!/^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(raw) || Number.isNaN(d.getTime())) {
      throw new ValidationError(`subscriptionFrom must be an ISO 8601 time, got ${JSON.stringify(raw)}`, 'subscriptionFrom');
    }
    req.subscriptionFrom = d;
  } else if (query.subscriptionFrom !== undefined) {
    throw new ValidationError('subscriptionFrom is only allowed with subscriptionMode=from', 'subscriptionFrom');
  }
  const wait = bool(query.wait, 'wait');
  const timeout = int(query.timeout, 'timeout', 0, CONSUME_LIMITS.maxTimeoutMs, CONSUME_LIMITS.defaultTimeoutMs);

  // A client that hangs up ends its long poll.
  const gone = new AbortController();
  const onClose = (): void => gone.abort();
  reply.raw.once('close', onClose);
  try {
    const r = await read.pop(req, wait ? timeout : 0, gone.signal);
    // An empty answer still says that retention removed offsets under the cursor.
    // eslint-disable-next-line @typescript-eslint/return-await -- a FastifyReply is a thenable: fastify wants the reply returned, not awaited
    if (r.messages.length === 0) return (r.skipped > 0 ? reply.header('x-queen-skipped', String(r.skipped)) : reply).code(204).send();
    return popWire(r);
  } finally {
    reply.raw.off('close', onClose);
  }
}

export function popWire(r: PopOutcome): unknown {
  return {
    leaseId: r.leaseId,
    leaseExpiresAt: r.leaseExpiresAt?.toISOString() ?? null,
    partition: r.partition,
    partitionId: r.partitionId,
    ...(r.skipped > 0 ? { skipped: r.skipped } : {}),
    ...(r.redelivered ? { redelivered: true } : {}),
    messages: r.messages.map(messageWire),
  };
}

/** A stored payload on the wire: JSON as `data`; anything else base64, with `dataEncoding: 'base64'`. */
export function payloadWire(payload: Buffer): { data: unknown; dataEncoding?: 'base64' } {
  try {
    return { data: JSON.parse(payload.toString('utf8')) };
  } catch {
    return { data: payload.toString('base64'), dataEncoding: 'base64' };
  }
}

/** A message on the wire: its payload as payloadWire gives it; `kafka` only for a message that came from a Kafka record. */
export function messageWire(m: PoppedMessage): Record<string, unknown> {
  const { data, dataEncoding } = payloadWire(m.payload);
  return {
    id: m.id,
    transactionId: m.transactionId,
    partition: m.partition,
    partitionId: m.partitionId,
    offset: m.offset,
    createdAt: m.createdAt.toISOString(),
    data,
    ...(dataEncoding ? { dataEncoding } : {}),
    traceContext: m.traceContext ?? null,
    ...(m.kafka ? { kafka: originWire(m.kafka) } : {}),
  };
}

function ackWire(item: AckItem, o: AckOutcome): Record<string, unknown> {
  return {
    result: o.result,
    status: item.status,
    ...(item.transactionId !== undefined ? { transactionId: item.transactionId } : {}),
    ...(item.id !== undefined ? { id: item.id } : {}),
    partitionId: o.partitionId,
    offset: o.offset,
    ...(o.attempts !== undefined ? { attempts: o.attempts } : {}),
  };
}

function object(v: unknown, shape: string): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new ValidationError(`body must be a JSON object: ${shape}`, 'body');
  return v as Record<string, unknown>;
}

function int(v: unknown, name: string, min: number, max: number, dflt: number): number {
  return v === undefined ? dflt : queryInt(v, name, min, max);
}

function bool(v: unknown, name: string): boolean {
  if (v === undefined) return false;
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  throw new ValidationError(`${name} must be true or false, got ${JSON.stringify(v)}`, name);
}

function str(v: unknown, name: string, max: number): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > max)
    throw new ValidationError(`${name} must be a non-empty string of at most ${max} characters`, name);
  return v;
}

function mode(v: unknown): SubscriptionMode {
  if (v === undefined) return 'all';
  if (v === 'all' || v === 'new' || v === 'from') return v;
  throw new ValidationError(`subscriptionMode must be all, new or from, got ${JSON.stringify(v)}`, 'subscriptionMode');
}
