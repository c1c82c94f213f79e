import {
  AuthError,
  ConflictError,
  DatabaseError,
  LifecycleError,
  NotFoundError,
  PayloadTooLargeError,
  QueenError,
  ValidationError,
} from '../errors.js';

/**
 * The one table from errors to HTTP answers. Every route throws typed errors
 * and the server's error handler calls this; nothing else picks a status.
 *
 * Client mistakes are 4xx and never logged above debug. A retriable failure
 * (PostgreSQL unavailable, the push path stopping or overloaded) is 503 with
 * Retry-After, so a client may repeat the request; anything else is 500.
 */
export interface HttpErrorBody {
  /** Stable, machine-readable code (see docs/http-api.md). */
  error: string;
  message: string;
  /** The offending field, when the error names one ("options.dedupWindowSeconds"). */
  field?: string;
  retriable: boolean;
  /** Per-item answers behind a 409 (a rolled-back /transaction's acks). */
  details?: unknown;
}

export interface HttpErrorAnswer {
  status: number;
  body: HttpErrorBody;
  headers: Record<string, string>;
}

/** Raised by the push route when the fusion layer is over its byte budget. */
export class OverloadedError extends QueenError {
  constructor(message: string) {
    super(message, { retriable: true });
  }
}

/** Fastify's own request errors carry a 4xx statusCode and an FST_ code. */
interface FrameworkError {
  statusCode?: unknown;
  code?: unknown;
  message?: unknown;
}

const FRAMEWORK_CODES: Record<number, string> = {
  400: 'bad_request',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  413: 'payload_too_large',
  414: 'uri_too_long',
  415: 'unsupported_media_type',
  431: 'headers_too_large',
};

/**
 * Errors Node's HTTP parser raises before fastify sees a request (fastify's
 * clientErrorHandler): the same documented body, written straight to the
 * socket, which is then closed as Node would.
 */
export function clientErrorResponse(err: { code?: unknown }): string {
  const [status, reason, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request Timeout', 'the request was not received in time']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large', 'the request line and headers are over the size limit']
        : [400, 'Bad Request', 'the request is not valid HTTP'];
  const body = JSON.stringify(answer(status, FRAMEWORK_CODES[status]!, message).body);
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`;
}

export function toHttpError(err: unknown, retryAfterSeconds: number): HttpErrorAnswer {
  const unavailable = (message: string): HttpErrorAnswer => ({
    status: 503,
    body: { error: 'unavailable', message, retriable: true },
    headers: { 'retry-after': String(retryAfterSeconds) },
  });
  // Order matters: PayloadTooLargeError is a ValidationError.
  if (err instanceof PayloadTooLargeError) return answer(413, 'payload_too_large', err.message, err.field);
  if (err instanceof ValidationError) return answer(400, 'bad_request', err.message, err.field);
  if (err instanceof AuthError) {
    return { ...answer(401, 'unauthorized', err.message), headers: { 'www-authenticate': 'Bearer realm="queen"' } };
  }
  if (err instanceof NotFoundError) return answer(404, 'not_found', err.message);
  if (err instanceof ConflictError) {
    const a = answer(409, 'conflict', err.message);
    if (err.details !== undefined) a.body.details = err.details;
    return a;
  }
  if (err instanceof OverloadedError) return unavailable(err.message);
  // The push path refuses work while it is stopping: the next instance (or
  // this one, restarted) can take the same request.
  if (err instanceof LifecycleError) return unavailable('the service is shutting down');
  if (err instanceof DatabaseError || err instanceof QueenError) {
    if (err.retriable) return unavailable('PostgreSQL is unavailable; retry later');
    return answer(500, 'internal', 'internal error', undefined, false);
  }
  const fw = err as FrameworkError | null | undefined;
  if (typeof fw?.statusCode === 'number' && fw.statusCode >= 400 && fw.statusCode < 500) {
    const message = typeof fw.message === 'string' ? fw.message : 'bad request';
    return answer(fw.statusCode, FRAMEWORK_CODES[fw.statusCode] ?? 'bad_request', message);
  }
  return answer(500, 'internal', 'internal error', undefined, false);
}

function answer(status: number, error: string, message: string, field?: string, retriable = false): HttpErrorAnswer {
  return { status, body: { error, message, ...(field ? { field } : {}), retriable }, headers: {} };
}
