import { randomFillSync } from 'node:crypto';

/**
 * UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then a 12-bit counter in
 * rand_a that keeps ids minted in the same millisecond by this process
 * strictly increasing, then 62 random bits. Message ids sort by mint time.
 */
let lastMs = 0;
let counter = 0;
// Random bytes come from a pool refilled 4 KiB at a time: one getrandom call
// per 512 ids instead of one per id (it was half the broker's CPU per message).
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let poolAt = POOL_BYTES;

export function uuidv7Bytes(out: Buffer = Buffer.allocUnsafe(16), at = 0): Buffer {
  let ms = Date.now();
  if (ms <= lastMs) {
    counter++;
    if (counter > 0xfff) {
      // Counter exhausted within one millisecond: borrow the next one.
      lastMs++;
      counter = 0;
    }
    ms = lastMs;
  } else {
    lastMs = ms;
    counter = 0;
  }
  if (poolAt + 8 > POOL_BYTES) {
    randomFillSync(pool);
    poolAt = 0;
  }
  out.writeUIntBE(ms, at, 6);
  out[at + 6] = 0x70 | ((counter >> 8) & 0x0f);
  out[at + 7] = counter & 0xff;
  out[at + 8] = 0x80 | (pool[poolAt]! & 0x3f);
  // Seven bytes by hand: Buffer#copy crosses into C++ for each call, which
  // cost more than the copy itself (~0.2 µs per id in the ingress profile).
  for (let k = 1; k < 8; k++) out[at + 8 + k] = pool[poolAt + k]!;
  poolAt += 8;
  return out;
}

// uuidToString's lookup table (byte -> two lowercase hex digits) and its
// one scratch buffer, dashes in place (single-threaded and synchronous).
const HEX_DIGITS = new Uint8Array(512);
for (let i = 0; i < 256; i++) {
  const d = i.toString(16).padStart(2, '0');
  HEX_DIGITS[i * 2] = d.charCodeAt(0);
  HEX_DIGITS[i * 2 + 1] = d.charCodeAt(1);
}
const UUID_TEXT = Buffer.alloc(36, 0x2d);
/** Where byte i's two digits go in the 8-4-4-4-12 text. */
const UUID_DIGIT_AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/**
 * The 16 bytes at `at` as lowercase 8-4-4-4-12 text. Written through a
 * table into one scratch buffer and decoded once: one string per id, where
 * a hex string, five slices and a template made six (~290 -> ~170 ns per
 * id, micro-benchmark; every queued push result and every popped message
 * has an id).
 */
export function uuidToString(b: Buffer, at = 0): string {
  if (at < 0 || at + 16 > b.length) throw new RangeError(`uuidToString: 16 bytes at ${at} exceed a buffer of ${b.length}`);
  for (let i = 0; i < 16; i++) {
    const v = b[at + i]! * 2;
    const p = UUID_DIGIT_AT[i]!;
    UUID_TEXT[p] = HEX_DIGITS[v]!;
    UUID_TEXT[p + 1] = HEX_DIGITS[v + 1]!;
  }
  return UUID_TEXT.toString('latin1');
}

export const NIL_UUID = '00000000-0000-0000-0000-000000000000';
