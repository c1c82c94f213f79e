import { ValidationError } from '../errors.js';

/**
 * Per-item input limits. Violations fail that item only; the valid items of
 * the same call are written.
 */
export const LIMITS = {
  queueName: /^[A-Za-z0-9._-]{1,128}$/,
  /** UTF-8 bytes; control characters (U+0000..U+001F, U+007F) are refused: \x1f separates key parts. */
  partitionMaxBytes: 256,
  transactionIdMaxBytes: 512,
  traceContextMaxBytes: 1024,
  defaultPartition: 'Default',
} as const;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

export function checkQueueName(queue: unknown): string {
  if (typeof queue !== 'string' || !LIMITS.queueName.test(queue)) {
    throw new ValidationError('queue must be 1-128 characters of A-Z a-z 0-9 . _ -', 'queue');
  }
  return queue;
}

export function checkPartitionName(partition: unknown): string {
  if (partition === undefined || partition === null) return LIMITS.defaultPartition;
  if (typeof partition !== 'string' || partition.length === 0) throw new ValidationError('partition must be a non-empty string', 'partition');
  if (Buffer.byteLength(partition, 'utf8') > LIMITS.partitionMaxBytes) {
    throw new ValidationError(`partition must be at most ${LIMITS.partitionMaxBytes} UTF-8 bytes`, 'partition');
  }
  if (CONTROL.test(partition)) throw new ValidationError('partition must not contain control characters', 'partition');
  return partition;
}

export function checkTransactionId(txn: unknown): string | undefined {
  if (txn === undefined || txn === null) return undefined;
  if (typeof txn !== 'string' || txn.length === 0) throw new ValidationError('transactionId must be a non-empty string', 'transactionId');
  if (Buffer.byteLength(txn, 'utf8') > LIMITS.transactionIdMaxBytes) {
    throw new ValidationError(`transactionId must be at most ${LIMITS.transactionIdMaxBytes} UTF-8 bytes`, 'transactionId');
  }
  if (CONTROL.test(txn)) throw new ValidationError('transactionId must not contain control characters', 'transactionId');
  return txn;
}
