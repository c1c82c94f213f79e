/**
 * Segment blob format, version 1 (documented in docs/frame-format.md):
 *
 *   u8      version (= 1)
 *   u32 BE  frame count N
 *   N x 16  message ids (UUID bytes), frame order  <- the id directory
 *   N frames, each:
 *     u16 BE  transactionId length, then its UTF-8 bytes
 *     u16 BE  trace-context length, then its UTF-8 bytes (0 = none)
 *     u32 BE  payload length, then the payload bytes
 *
 * The id directory sits at a fixed position so SQL can answer a duplicate
 * with the original message's id (substring at 6 + 16 * i, 1-based) without
 * parsing frames.
 */
export const FRAME_FORMAT_VERSION = 1;
export const FRAME_HEADER_BYTES = 5;

export interface Frame {
  id: Buffer; // 16 bytes
  transactionId: Buffer; // UTF-8
  traceContext: Buffer | undefined; // UTF-8, optional
  payload: Buffer;
}

export function frameBytes(f: Frame): number {
  return 16 + 2 + f.transactionId.length + 2 + (f.traceContext?.length ?? 0) + 4 + f.payload.length;
}

export function packSegment(frames: readonly Frame[]): Buffer {
  let size = FRAME_HEADER_BYTES;
  for (const f of frames) size += frameBytes(f);
  const out = Buffer.allocUnsafe(size);
  out[0] = FRAME_FORMAT_VERSION;
  out.writeUInt32BE(frames.length, 1);
  let pos = FRAME_HEADER_BYTES;
  for (const f of frames) {
    f.id.copy(out, pos);
    pos += 16;
  }
  for (const f of frames) {
    out.writeUInt16BE(f.transactionId.length, pos);
    pos += 2;
    pos += f.transactionId.copy(out, pos);
    const trace = f.traceContext;
    out.writeUInt16BE(trace?.length ?? 0, pos);
    pos += 2;
    if (trace) pos += trace.copy(out, pos);
    out.writeUInt32BE(f.payload.length, pos);
    pos += 4;
    pos += f.payload.copy(out, pos);
  }
  return out;
}

export interface DecodedFrame {
  id: Buffer;
  transactionId: string;
  traceContext: string | undefined;
  payload: Buffer;
}

export function unpackSegment(blob: Buffer): DecodedFrame[] {
  if (blob.length < FRAME_HEADER_BYTES || blob[0] !== FRAME_FORMAT_VERSION) {
    throw new Error(`unknown segment format version ${blob[0]}`);
  }
  const n = blob.readUInt32BE(1);
  let pos = FRAME_HEADER_BYTES + 16 * n;
  const out: DecodedFrame[] = [];
  for (let i = 0; i < n; i++) {
    const id = blob.subarray(FRAME_HEADER_BYTES + 16 * i, FRAME_HEADER_BYTES + 16 * (i + 1));
    const tl = blob.readUInt16BE(pos);
    pos += 2;
    const transactionId = blob.toString('utf8', pos, pos + tl);
    pos += tl;
    const cl = blob.readUInt16BE(pos);
    pos += 2;
    const traceContext = cl ? blob.toString('utf8', pos, pos + cl) : undefined;
    pos += cl;
    const pl = blob.readUInt32BE(pos);
    pos += 4;
    out.push({ id, transactionId, traceContext, payload: blob.subarray(pos, pos + pl) });
    pos += pl;
  }
  if (pos !== blob.length) throw new Error(`segment blob has ${blob.length - pos} trailing bytes`);
  return out;
}
