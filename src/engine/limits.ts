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

/**
 * A lone UTF-16 surrogate: a high one not followed by a low one, or a low one
 * not preceded by a high one. Without the `u` flag the regex walks code units,
 * which is what makes it see them. Only the fallback: String.prototype.isWellFormed
 * exists on Node 20 (checked on 20.20.2, V8 11.3) and is used when present.
 */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const nativeWellFormed = (String.prototype as { isWellFormed?: (this: string) => boolean }).isWellFormed;

/**
 * Whether `s` is well-formed Unicode, i.e. survives UTF-8 unchanged. A lone
 * surrogate is encoded as U+FFFD, so two distinct strings would become one
 * identity (a merged transactionId, a partition row whose name differs from
 * the one asked for): identities with one are refused, never rewritten.
 */
export const isWellFormedUnicode: (s: string) => boolean = nativeWellFormed ? (s) => nativeWellFormed.call(s) : isWellFormedUnicodeFallback;

/** The fallback, exported so a test can hold it to the native check. */
export function isWellFormedUnicodeFallback(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

function checkWellFormed(value: string, field: string): void {
  if (!isWellFormedUnicode(value)) {
    throw new ValidationError(
      `${field} must be well-formed Unicode (it contains a lone UTF-16 surrogate, which UTF-8 cannot carry)`,
      field,
    );
  }
}

/**
 * Names already found valid. Whether a name is valid depends on the string
 * alone, so a name seen before skips the checks: every item carries a queue
 * and a partition, and a topic's records repeat a few of them (the regex and
 * UTF-8 checks cost ~0.1 µs an item of a Kafka drain's ~8 µs). Bounded: a
 * set that reaches MAX_MEMO_NAMES starts over, so a stream of distinct names
 * costs one check each, as without it, and at most ~MAX_MEMO_NAMES strings.
 */
class NameMemo {
  private names = new Set<string>();
  has(name: string): boolean {
    return this.names.has(name);
  }
  add(name: string): void {
    if (this.names.size >= MAX_MEMO_NAMES) this.names = new Set();
    this.names.add(name);
  }
}
const MAX_MEMO_NAMES = 4096;
const validQueueNames = new NameMemo();
const validPartitionNames = new NameMemo();

/**
 * Queue names travel as URL path segments (/api/v1/pop/queue/:queue, the
 * timers and resources routes), and a URL parser resolves a segment "." or
 * ".." (also percent-encoded) instead of sending it: a queue of that name
 * could be written but never read back. So those two are refused.
 */
export function checkQueueName(queue: unknown): string {
  if (typeof queue === 'string' && validQueueNames.has(queue)) return queue;
  if (typeof queue !== 'string' || !LIMITS.queueName.test(queue) || DOT_SEGMENT.test(queue)) {
    throw new ValidationError(QUEUE_NAME_RULE, 'queue');
  }
  validQueueNames.add(queue);
  return queue;
}

const DOT_SEGMENT = /^\.\.?$/;
const QUEUE_NAME_RULE = 'queue must be 1-128 characters of A-Z a-z 0-9 . _ -, and not "." or ".."';

/** "." and "..": names a URL path cannot carry (see checkQueueName). */
export function isDotSegment(name: string): boolean {
  return DOT_SEGMENT.test(name);
}

export function checkPartitionName(partition: unknown): string {
  if (partition === undefined || partition === null) return LIMITS.defaultPartition;
  if (typeof partition === 'string' && validPartitionNames.has(partition)) return partition;
  if (typeof partition !== 'string' || partition.length === 0)
    throw new ValidationError('partition must be a non-empty string', 'partition');
  if (Buffer.byteLength(partition, 'utf8') > LIMITS.partitionMaxBytes) {
    throw new ValidationError(`partition must be at most ${LIMITS.partitionMaxBytes} UTF-8 bytes`, 'partition');
  }
  if (CONTROL.test(partition)) throw new ValidationError('partition must not contain control characters', 'partition');
  checkWellFormed(partition, 'partition');
  validPartitionNames.add(partition);
  return partition;
}

/** W3C trace context kept in the frame: a string, at most traceContextMaxBytes, stored byte for byte. */
export function checkTraceContext(trace: unknown): Buffer | undefined {
  if (trace === undefined) return undefined;
  if (typeof trace !== 'string') throw new ValidationError('traceContext must be a string', 'traceContext');
  checkWellFormed(trace, 'traceContext');
  const bytes = Buffer.from(trace, 'utf8');
  if (bytes.length > LIMITS.traceContextMaxBytes)
    throw new ValidationError(`traceContext is over ${LIMITS.traceContextMaxBytes} bytes`, 'traceContext');
  return bytes;
}

export function checkTransactionId(txn: unknown): string | undefined {
  if (txn === undefined || txn === null) return undefined;
  if (typeof txn !== 'string' || txn.length === 0) throw new ValidationError('transactionId must be a non-empty string', 'transactionId');
  if (Buffer.byteLength(txn, 'utf8') > LIMITS.transactionIdMaxBytes) {
    throw new ValidationError(`transactionId must be at most ${LIMITS.transactionIdMaxBytes} UTF-8 bytes`, 'transactionId');
  }
  if (CONTROL.test(txn)) throw new ValidationError('transactionId must not contain control characters', 'transactionId');
  checkWellFormed(txn, 'transactionId');
  return txn;
}
