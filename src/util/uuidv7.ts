import { randomFillSync } from 'node:crypto';

/**
 * UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then a 12-bit counter in
 * rand_a that keeps ids minted in the same millisecond by this process
 * strictly increasing, then 62 random bits. Message ids sort by mint time.
 */
let lastMs = 0;
let counter = 0;
const rnd = Buffer.alloc(8);

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
  randomFillSync(rnd);
  out.writeUIntBE(ms, at, 6);
  out[at + 6] = 0x70 | ((counter >> 8) & 0x0f);
  out[at + 7] = counter & 0xff;
  out[at + 8] = 0x80 | (rnd[0]! & 0x3f);
  rnd.copy(out, at + 9, 1, 8);
  return out;
}

export function uuidToString(b: Buffer, at = 0): string {
  const h = b.toString('hex', at, at + 16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export const NIL_UUID = '00000000-0000-0000-0000-000000000000';
