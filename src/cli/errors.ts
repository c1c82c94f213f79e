import type { QueenHttpError } from '../client/index.js';

/** The command line was wrong (exit code 2); the message says how to call it. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** The command ran and failed (exit code 1): a bad manifest, a refusal from the server, no server. */
export class CliError extends Error {
  override name = 'CliError';
}

export const EXIT = { ok: 0, error: 1, usage: 2 } as const;

/** What the server said in a refusal, and where: "message (HTTP 409 on POST /api/v1/...)". */
export function serverMessage(err: QueenHttpError): string {
  const b = err.body as { message?: unknown } | undefined;
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- the body of a non-JSON error answer is a string; an object without a message is shown as it is
  const msg = typeof b?.message === 'string' ? b.message : String(err.body ?? '');
  return `${msg} (HTTP ${err.status} on ${err.method} ${err.path})`;
}
