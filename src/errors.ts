/**
 * One error hierarchy for the whole service.
 *
 * Every error the service raises on purpose is a QueenError. `retriable` says
 * whether repeating the same operation later can succeed (a restarting
 * database, a lost connection) — the ingress retries those and never commits
 * past them; everything else is a verdict about the input and is answered
 * (HTTP 4xx, dead-letter) instead of retried. `cause` keeps the original.
 */
export class QueenError extends Error {
  readonly retriable: boolean;
  override readonly cause?: unknown;

  constructor(message: string, options: { retriable?: boolean; cause?: unknown } = {}) {
    super(message);
    this.name = new.target.name;
    this.retriable = options.retriable ?? false;
    this.cause = options.cause;
  }
}

/** A value from the environment failed validation; start-up stops. */
export class ConfigError extends QueenError {}

/** The input itself is wrong (HTTP 400, dead-letter); repeating it cannot help. */
export class ValidationError extends QueenError {
  constructor(
    message: string,
    readonly field?: string,
  ) {
    super(message, { retriable: false });
  }
}

/** The body or an item exceeds a configured size limit (HTTP 413 for bodies). */
export class PayloadTooLargeError extends ValidationError {}

/** Missing or wrong credentials (HTTP 401). */
export class AuthError extends QueenError {}

/** A named thing does not exist (HTTP 404). */
export class NotFoundError extends QueenError {}

/** PostgreSQL answered with an error; classified by SQLSTATE (see engine/sqlstate.ts). */
export class DatabaseError extends QueenError {
  constructor(
    message: string,
    readonly sqlstate: string | undefined,
    options: { retriable: boolean; cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * A Schema Registry request failed; classified by its HTTP answer (see
 * ingress/schemaRegistry.ts, REGISTRY_ANSWERS). Retriable: the registry is
 * unreachable, refuses our credentials or answers 5xx, which says nothing
 * about the record, so its partition halts and retries. Not retriable: the
 * registry's own "not found" for a schema id, a verdict on that record.
 */
export class SchemaRegistryError extends QueenError {
  constructor(
    message: string,
    /** The HTTP status, or undefined when no answer came (connection refused, timeout, TLS). */
    readonly status: number | undefined,
    options: { retriable: boolean; cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * A bundle push failed before any of it was committed, for a reason that is
 * not retriable (a defect, or SQL refusing something in it). Its items may be
 * pushed again apart from each other: the fusion layer does that per request,
 * so one client's poison can only fail that client's own items.
 */
export class BundleNotWrittenError extends QueenError {
  constructor(cause: unknown) {
    super(`the bundle was not written: ${cause instanceof Error ? cause.message : String(cause)}`, { retriable: false, cause });
  }
}

/** The request conflicts with the current state (a lease no longer held, an ack that cannot settle): HTTP 409, nothing changed. */
export class ConflictError extends QueenError {
  constructor(
    message: string,
    /** Per-item answers that explain the conflict, when there are some. */
    readonly details?: unknown,
  ) {
    super(message, { retriable: false });
  }
}

/** A component was used outside its running state (see util/lifecycle.ts). */
export class LifecycleError extends QueenError {}

export function isRetriable(err: unknown): boolean {
  return err instanceof QueenError && err.retriable;
}
