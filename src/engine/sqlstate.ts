import { DatabaseError, QueenError } from '../errors.js';

/**
 * The one table that classifies PostgreSQL failures.
 *
 * Retriable means: the same statement, issued again on a healthy connection,
 * may succeed, and nothing of it was committed (a failed transaction commits
 * nothing). Keys are SQLSTATE classes (two characters) or full codes; a full
 * code wins over its class.
 */
export const SQLSTATE_RETRIABLE: ReadonlyMap<string, boolean> = new Map([
  ['08', true], // connection exception
  ['40001', true], // serialization_failure
  ['40P01', true], // deadlock_detected (must never happen under the lock order; retried defensively)
  ['53', true], // insufficient resources (too many connections, disk full, out of memory)
  ['55P03', true], // lock_not_available
  ['57P01', true], // admin_shutdown (server restarting)
  ['57P02', true], // crash_shutdown
  ['57P03', true], // cannot_connect_now (server starting up)
  ['57014', false], // query_canceled (a statement_timeout is a verdict on the query)
  ['58', true], // system error (I/O)
  ['22', false], // data exception
  ['23', false], // integrity constraint violation
  ['42', false], // syntax error or access rule violation
  ['P0', false], // PL/pgSQL raised
  ['XX', false], // internal error
]);

/** Node-level socket errors that mean the connection, not the query, failed. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN']);

export function classifySqlState(code: string | undefined): boolean {
  if (!code) return false;
  const exact = SQLSTATE_RETRIABLE.get(code);
  if (exact !== undefined) return exact;
  return SQLSTATE_RETRIABLE.get(code.slice(0, 2)) ?? false;
}

/** Wraps whatever pg threw into a DatabaseError with the right `retriable`. */
export function toDatabaseError(err: unknown, what: string): QueenError {
  if (err instanceof QueenError) return err;
  const e = err as { code?: string; message?: string } | null | undefined;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  const message = `${what}: ${e?.message ?? String(err)}`;
  if (code && NETWORK_CODES.has(code)) return new DatabaseError(message, undefined, { retriable: true, cause: err });
  // pg raises plain Errors without a code when the connection drops mid-query.
  if (!code && /Connection terminated|connection.*(closed|ended)|Client has encountered a connection error/i.test(message)) {
    return new DatabaseError(message, undefined, { retriable: true, cause: err });
  }
  const sqlstate = code && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
  return new DatabaseError(message, sqlstate, { retriable: classifySqlState(sqlstate), cause: err });
}
