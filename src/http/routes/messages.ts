import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { NotFoundError, ValidationError } from '../../errors.js';
import { checkGroupName } from '../../engine/acks.js';
import { findPartition, partitionById, readByTransactionId, readSpan } from '../../engine/browse.js';
import { listDeadLetters, type DeadLetter } from '../../engine/deadLetters.js';
import { checkQueueName } from '../../engine/limits.js';
import type { ReadPath } from '../../read/readPath.js';
import { toWire } from '../pushBody.js';
import { queryInt } from '../queryParams.js';
import { messageWire, payloadWire } from './consume.js';

const MAX_LIMIT = 1_000;

/**
 * Operators' reads: browse a partition's decoded messages, find one by
 * transactionId, list and requeue dead letters. Nothing here moves a cursor.
 */
export function registerMessages(app: FastifyInstance, pool: pg.Pool, read: ReadPath): void {
  app.get<{ Querystring: Record<string, unknown> }>('/api/v1/messages', async (req) => {
    const q = req.query;
    for (const k of Object.keys(q))
      if (!['queue', 'partition', 'from', 'limit'].includes(k))
        throw new ValidationError(`unknown parameter "${k}" (allowed: queue, partition, from, limit)`, k);
    const p = await findPartition(pool, q.queue as string, q.partition as string | undefined);
    const from = q.from === undefined ? p.logStart : queryInt(q.from, 'from', 0, Number.MAX_SAFE_INTEGER);
    const limit = q.limit === undefined ? 100 : queryInt(q.limit, 'limit', 1, MAX_LIMIT);
    const messages = await readSpan(pool, p, from, limit);
    const last = messages.at(-1)?.offset;
    return {
      queue: p.queue,
      partition: p.partition,
      partitionId: p.partitionId,
      logStart: p.logStart,
      lastOffset: p.lastOffset,
      messages: messages.map(messageWire),
      next: last === undefined ? null : last < p.lastOffset ? last + 1 : null,
    };
  });

  app.get<{ Params: { partitionId: string; transactionId: string } }>('/api/v1/messages/:partitionId/:transactionId', async (req) => {
    const pid = queryInt(req.params.partitionId, 'partitionId', 1, Number.MAX_SAFE_INTEGER);
    const p = await partitionById(pool, pid);
    const found = await readByTransactionId(pool, p, req.params.transactionId);
    if (found.length === 0) throw new NotFoundError(`no message with transactionId "${req.params.transactionId}" in partition ${pid}`);
    return { queue: p.queue, ...messageWire(found[0]!), ...(found.length > 1 ? { occurrences: found.map((m) => m.offset) } : {}) };
  });

  app.get<{ Querystring: Record<string, unknown> }>('/api/v1/dlq', async (req) => {
    const q = req.query;
    for (const k of Object.keys(q))
      if (!['queue', 'consumerGroup', 'after', 'limit'].includes(k))
        throw new ValidationError(`unknown parameter "${k}" (allowed: queue, consumerGroup, after, limit)`, k);
    const queue = checkQueueName(q.queue);
    const group = q.consumerGroup === undefined ? undefined : checkGroupName(q.consumerGroup);
    const after = q.after === undefined ? 0 : queryInt(q.after, 'after', 0, Number.MAX_SAFE_INTEGER);
    const limit = q.limit === undefined ? 100 : queryInt(q.limit, 'limit', 1, MAX_LIMIT);
    const rows = await listDeadLetters(pool, queue, group, after, limit);
    return { deadLetters: rows.map(deadLetterWire), next: rows.length === limit ? rows.at(-1)!.id : null };
  });

  app.post<{ Params: { id: string } }>('/api/v1/dlq/:id/requeue', async (req) => {
    const id = queryInt(req.params.id, 'id', 1, Number.MAX_SAFE_INTEGER);
    const r = await read.requeue(id);
    return { deadLetter: deadLetterWire(r.deadLetter), push: toWire(0, r.push) };
  });
}

function deadLetterWire(d: DeadLetter): Record<string, unknown> {
  const { data, dataEncoding } = d.payload ? payloadWire(d.payload) : { data: null, dataEncoding: undefined };
  return {
    id: d.id,
    queue: d.queue,
    partition: d.partition,
    partitionId: d.partitionId,
    consumerGroup: d.consumerGroup,
    offset: d.offset,
    messageId: d.messageId,
    transactionId: d.transactionId,
    data,
    ...(dataEncoding ? { dataEncoding } : {}),
    traceContext: d.traceContext,
    error: d.error,
    attempts: d.attempts,
    createdAt: d.createdAt.toISOString(),
    requeuedAt: d.requeuedAt?.toISOString() ?? null,
  };
}
