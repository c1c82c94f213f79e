/**
 * Errors the client raises. A 4xx is a verdict on the request and is never
 * retried; 503 and network failures are retried and surface only once the
 * retry budget is spent.
 */

/** The server answered with a non-2xx status. `body` is the parsed JSON error body when there is one. */
export class QueenHttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly method: string,
    readonly path: string,
  ) {
    super(`${method} ${path}: HTTP ${status}${describe(body)}`);
    this.name = 'QueenHttpError';
  }

  /** The server's stable error code ("bad_request", "not_found", ...), when it sent one. */
  get code(): string | undefined {
    const b = this.body as { error?: unknown } | undefined;
    return typeof b?.error === 'string' ? b.error : undefined;
  }

  /** The field the server named as wrong ("options.dedupWindowSeconds"), when it named one. */
  get field(): string | undefined {
    const b = this.body as { field?: unknown } | undefined;
    return typeof b?.field === 'string' ? b.field : undefined;
  }
}

/** The server could not be reached (or the attempt timed out) on every attempt. */
export class QueenNetworkError extends Error {
  constructor(
    message: string,
    override readonly cause: unknown,
  ) {
    super(message);
    this.name = 'QueenNetworkError';
  }
}

function describe(body: unknown): string {
  const b = body as { message?: unknown } | undefined;
  if (typeof b?.message === 'string') return `: ${b.message}`;
  if (typeof body === 'string' && body) return `: ${body.slice(0, 200)}`;
  return '';
}
