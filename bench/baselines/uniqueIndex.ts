import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { HASH_BYTES, hashTransactionId } from '../../src/util/txnHash.js';
import { uuidv7Bytes } from '../../src/util/uuidv7.js';

/** bench/baselines/uniqueIndex.sql (this file runs from dist/bench/baselines). */
const SQL_FILE = fileURLToPath(new URL('../../../bench/baselines/uniqueIndex.sql', import.meta.url));

function sections(): Record<string, string> {
  const text = readFileSync(SQL_FILE, 'utf8');
  const out: Record<string, string> = {};
  let name: string | undefined;
  for (const line of text.split('\n')) {
    const m = /^-- @(\w+)\s*$/.exec(line);
    if (m) {
      name = m[1]!;
      out[name] = '';
    } else if (name) out[name] = (out[name] ?? '') + line + '\n';
  }
  return out;
}

const SQL = sections();

/** The baseline table's COPY target, in the column order bench/lib/synth.ts writes. */
export const BASELINE_COPY_SQL =
  'COPY bench_baseline.messages (partition_id, txn_hash, message_id, payload, created_at) FROM STDIN (FORMAT binary)';
export const BASELINE_RELATIONS = ['bench_baseline.messages'];

export async function createUniqueIndexBaseline(pool: pg.Pool): Promise<void> {
  await pool.query(SQL.ddl!);
}

export interface BaselineMessage {
  partitionId: number;
  transactionId: string;
  payload: Buffer;
}

/**
 * Pushes one batch in one statement (one transaction), like the engine's
 * bundle. The client does what the engine's writer does per message: hash the
 * transactionId (xxh3_128) and mint a UUIDv7 id. Returns the rows inserted.
 */
export async function pushBaseline(pool: pg.Pool, msgs: readonly BaselineMessage[]): Promise<number> {
  const n = msgs.length;
  const hashes = Buffer.allocUnsafe(n * HASH_BYTES);
  const ids = Buffer.allocUnsafe(n * 16);
  const pids: number[] = new Array(n);
  const lens: number[] = new Array(n);
  const payloads: Buffer[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const m = msgs[i]!;
    hashTransactionId(m.transactionId, hashes, i * HASH_BYTES);
    uuidv7Bytes(ids, i * 16);
    pids[i] = m.partitionId;
    lens[i] = m.payload.length;
    payloads[i] = m.payload;
  }
  const r = await pool.query({ name: 'bench_baseline_push', text: SQL.push!, values: [pids, hashes, ids, Buffer.concat(payloads), lens] });
  return r.rowCount ?? 0;
}
