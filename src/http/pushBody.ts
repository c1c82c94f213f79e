import { ValidationError } from '../errors.js';
import type { PushItem, PushResult } from '../engine/writer.js';
import { LIMITS } from '../engine/limits.js';

/**
 * The wire shape of POST /api/v1/push and its translation to PushItems.
 *
 * Request-level problems (not an object, no items array, too many items)
 * reject the whole request with 400. Item-level problems fail only that item:
 * the shape checks here (not an object, unknown field, no payload) and the
 * value checks in LogWriter.accept (queue name, partition, transactionId,
 * payload size) both end as a `failed` result at the item's index.
 */

/**
 * One push result on the wire. The API is camelCase; `message_id` and
 * `transaction_id` are the snake_case names of 0.1.x, still sent with the
 * same values for one more release so existing clients keep working
 * (deprecated: removed in 0.3.0; docs/http-api.md).
 */
export interface WireResult {
  index: number;
  messageId: string | null;
  transactionId: string | null;
  /** Deprecated since 0.2.0: messageId (sent until 0.3.0). */
  message_id: string | null;
  /** Deprecated since 0.2.0: transactionId (sent until 0.3.0). */
  transaction_id: string | null;
  queue: string;
  partition: string;
  status: PushResult['status'];
  /** The message's offset in its partition (the original's when duplicate). */
  offset: number | null;
  error?: string;
}

/** Fields an item may carry. Unknown ones fail the item: a misspelt
 * "transactionID" would otherwise silently turn deduplication off. */
const ITEM_FIELDS = new Set(['queue', 'partition', 'transactionId', 'payload', 'data', 'traceContext']);

export type Translated = { ok: true; item: PushItem } | { ok: false; result: Omit<WireResult, 'index'> };

/** Checks the request envelope and returns its items. */
export function readItems(body: unknown, maxItems: number): unknown[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new ValidationError('body must be a JSON object: {"items": [...]}', 'body');
  }
  for (const key of Object.keys(body)) {
    if (key !== 'items') throw new ValidationError(`unknown field "${key}" (the body has only "items")`, key);
  }
  const items = (body as { items?: unknown }).items;
  if (!Array.isArray(items)) throw new ValidationError('items must be an array', 'items');
  if (items.length === 0) throw new ValidationError('items must not be empty', 'items');
  if (items.length > maxItems)
    throw new ValidationError(`items has ${items.length} entries, over the limit of ${maxItems} per request`, 'items');
  return items;
}

/** One wire item to a PushItem, or the failure that answers it. */
export function translateItem(raw: unknown): Translated {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return fail(raw, 'item must be an object');
  const o = raw as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!ITEM_FIELDS.has(key)) return fail(raw, `unknown field "${key}" (allowed: ${[...ITEM_FIELDS].join(', ')})`);
  }
  const hasPayload = Object.hasOwn(o, 'payload');
  const hasData = Object.hasOwn(o, 'data');
  if (hasPayload && hasData) return fail(raw, 'give either payload or data (its alias), not both');
  if (!hasPayload && !hasData) return fail(raw, 'payload is required (any JSON value)');
  if (o.traceContext !== undefined && typeof o.traceContext !== 'string') return fail(raw, 'traceContext must be a string');
  let payload: Buffer;
  try {
    payload = Buffer.from(JSON.stringify(hasPayload ? o.payload : o.data), 'utf8');
  } catch (err) {
    // Only a pathological nesting depth gets here (a stack overflow).
    return fail(raw, `payload cannot be serialised: ${(err as Error).message}`);
  }
  return {
    ok: true,
    item: {
      // The writer validates these values and fails the item if they are wrong.
      queue: o.queue as string,
      partition: o.partition as string | undefined,
      transactionId: o.transactionId as string | undefined,
      payload,
      traceContext: o.traceContext,
    },
  };
}

export function toWire(index: number, r: PushResult): WireResult {
  return {
    index,
    messageId: r.id,
    transactionId: r.transactionId,
    message_id: r.id,
    transaction_id: r.transactionId,
    queue: r.queue,
    partition: r.partition,
    status: r.status,
    offset: r.offset,
    ...(r.error !== undefined ? { error: r.error } : {}),
  };
}

function fail(raw: unknown, error: string): Translated {
  const o = (raw !== null && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  return {
    ok: false,
    result: {
      messageId: null,
      transactionId: typeof o.transactionId === 'string' ? o.transactionId : null,
      message_id: null,
      transaction_id: typeof o.transactionId === 'string' ? o.transactionId : null,
      queue: typeof o.queue === 'string' ? o.queue : '',
      partition: typeof o.partition === 'string' ? o.partition : LIMITS.defaultPartition,
      status: 'failed',
      offset: null,
      error,
    },
  };
}
