import { xxh3 } from '@node-rs/xxhash';

/** Bytes in one transactionId hash: the identity both the broker and SQL compare. */
export const HASH_BYTES = 16;

/**
 * xxh3_128 of a transactionId's UTF-8 bytes, as 16 big-endian bytes. Computed
 * once per message, here, and never in SQL: the same 16 bytes go to log_txns
 * and to the broker cache, so a broker-local collision behaves exactly like a
 * SQL one.
 */
export function hashTransactionId(transactionId: string, out: Buffer = Buffer.allocUnsafe(HASH_BYTES), at = 0): Buffer {
  const h = xxh3.xxh128(Buffer.from(transactionId, 'utf8'));
  out.writeBigUInt64BE(h >> 64n, at);
  out.writeBigUInt64BE(h & 0xffff_ffff_ffff_ffffn, at + 8);
  return out;
}
