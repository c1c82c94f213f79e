import type { PushItem } from '../../src/engine/writer.js';

/** A push item with a small JSON payload: what the write-path tests push. */
export const pushItem = (queue: string, partition: string, transactionId: string): PushItem => ({
  queue,
  partition,
  transactionId,
  payload: Buffer.from('{}'),
});

/** `n` transactionIds `prefix-0` .. `prefix-(n-1)`. */
export const txnIds = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
