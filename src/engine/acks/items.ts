import { ValidationError } from '../../errors.js';

/**
 * What an ack request says, checked: the item shape of POST /ack, /ack/batch
 * and /transaction, its statuses and the answers it can get. Pure.
 */

export const ACK_STATUSES = ['completed', 'failed', 'retry', 'dlq'] as const;
export type AckStatus = (typeof ACK_STATUSES)[number];

export interface AckItem {
  consumerGroup: string;
  status: AckStatus;
  partitionId?: number | undefined;
  transactionId?: string | undefined;
  id?: string | undefined;
  leaseId?: string | undefined;
  error?: string | undefined;
}

/** acked / released (failed or retry: will be redelivered) / dead_lettered, or why nothing changed. */
export type AckResult = 'acked' | 'released' | 'dead_lettered' | 'already_acked' | 'not_found' | 'lease_expired';

export interface AckOutcome {
  result: AckResult;
  partitionId: number | null;
  offset: number | null;
  /** Failed acks counted for this message so far (failed only). */
  attempts?: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: unknown): s is string => typeof s === 'string' && UUID.test(s);
export const uuidBytes = (s: string): Buffer => Buffer.from(s.replace(/-/g, ''), 'hex');
/** Longest error text kept with a dead letter. */
const MAX_ERROR_CHARS = 4096;

/** Checks one wire ack item; throws ValidationError naming the field. */
export function checkAckItem(raw: unknown, defaults: { consumerGroup?: unknown; leaseId?: unknown }, at: string): AckItem {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ValidationError(`${at} must be an object`, at);
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!['transactionId', 'partitionId', 'id', 'leaseId', 'consumerGroup', 'status', 'error'].includes(k)) {
      throw new ValidationError(`${at}: unknown field "${k}"`, `${at}.${k}`);
    }
  }
  const status = o.status ?? 'completed';
  if (typeof status !== 'string' || !(ACK_STATUSES as readonly string[]).includes(status)) {
    throw new ValidationError(`${at}.status must be one of ${ACK_STATUSES.join(', ')}, got ${JSON.stringify(o.status)}`, `${at}.status`);
  }
  const group = o.consumerGroup ?? defaults.consumerGroup ?? QUEUE_MODE_GROUP;
  checkGroupName(group, `${at}.consumerGroup`);
  const leaseId = o.leaseId ?? defaults.leaseId;
  if (leaseId !== undefined && leaseId !== null && !isUuid(leaseId))
    throw new ValidationError(`${at}.leaseId must be a UUID`, `${at}.leaseId`);
  const pid = o.partitionId;
  if (pid !== undefined && pid !== null && !(typeof pid === 'number' && Number.isSafeInteger(pid) && pid > 0)) {
    throw new ValidationError(`${at}.partitionId must be a positive integer`, `${at}.partitionId`);
  }
  const hasTxn = o.transactionId !== undefined && o.transactionId !== null;
  const hasId = o.id !== undefined && o.id !== null;
  if (hasTxn === hasId) throw new ValidationError(`${at}: give either transactionId or id`, at);
  if (hasTxn && (typeof o.transactionId !== 'string' || o.transactionId.length === 0))
    throw new ValidationError(`${at}.transactionId must be a non-empty string`, `${at}.transactionId`);
  if (hasId && !isUuid(o.id)) throw new ValidationError(`${at}.id must be a message id (UUID)`, `${at}.id`);
  if ((pid === undefined || pid === null) && (leaseId === undefined || leaseId === null)) {
    throw new ValidationError(`${at}: give partitionId or leaseId (which partition the message is in)`, `${at}.partitionId`);
  }
  if (o.error !== undefined && o.error !== null && typeof o.error !== 'string')
    throw new ValidationError(`${at}.error must be a string`, `${at}.error`);
  return {
    consumerGroup: group as string,
    status: status as AckStatus,
    partitionId: (pid as number | undefined) ?? undefined,
    transactionId: hasTxn ? (o.transactionId as string) : undefined,
    id: hasId ? (o.id as string) : undefined,
    leaseId: (leaseId as string | undefined) ?? undefined,
    error: typeof o.error === 'string' ? o.error.slice(0, MAX_ERROR_CHARS) : undefined,
  };
}

/** Queue mode: the group used when none is given (as in Queen). */
export const QUEUE_MODE_GROUP = '__QUEUE_MODE__';

export function checkGroupName(g: unknown, field = 'consumerGroup'): string {
  if (typeof g !== 'string' || !/^[A-Za-z0-9._:-]{1,128}$/.test(g))
    throw new ValidationError(`${field} must be 1-128 characters of A-Z a-z 0-9 . _ : -`, field);
  return g;
}
