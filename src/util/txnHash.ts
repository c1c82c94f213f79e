import { xxh3 } from '@node-rs/xxhash';

/** Bytes in one transactionId hash: the identity both the broker and SQL compare. */
export const HASH_BYTES = 16;

const LOW_64 = 0xffff_ffff_ffff_ffffn;

/**
 * xxh3_128 of a transactionId's UTF-8 bytes, as a 128-bit integer. Computed
 * once per message, in the broker, never in SQL: the same 16 bytes go to
 * log_txns and to the broker cache, so a broker-local collision behaves
 * exactly like a SQL one.
 */
export function hashBytes(utf8: Buffer): bigint {
  return xxh3.xxh128(utf8);
}

/** Writes a 128-bit hash as 16 big-endian bytes (the stored form). */
export function writeHash(h: bigint, out: Buffer, at: number): void {
  out.writeBigUInt64BE(h >> 64n, at);
  out.writeBigUInt64BE(h & LOW_64, at + 8);
}

/**
 * xxh3_128 of a transactionId given as a string: the same value as
 * hashBytes of its UTF-8 bytes (the binding encodes the string as UTF-8
 * itself), without a Buffer per call, which made it twice as slow.
 */
export function hashString(transactionId: string): bigint {
  return xxh3.xxh128(transactionId);
}

/** The stored 16-byte form of a transactionId's hash. */
export function hashTransactionId(transactionId: string, out: Buffer = Buffer.allocUnsafe(HASH_BYTES), at = 0): Buffer {
  writeHash(hashString(transactionId), out, at);
  return out;
}
