import { QueenHttpError, QueenNetworkError } from './errors.js';

export interface RetryPolicy {
  /** Attempts after the first (0 = no retries). */
  retries: number;
  /** First backoff ceiling in ms; doubles per attempt. */
  baseDelayMs: number;
  /** Backoff ceiling in ms, also the cap on a server's Retry-After. */
  maxDelayMs: number;
}

export interface TransportOptions {
  url: string;
  token?: string | undefined;
  fetch: typeof fetch;
  retry: RetryPolicy;
  /** Per-attempt timeout in ms. */
  timeoutMs: number;
  /** Called before each retry (observability, tests). */
  onRetry?: ((info: { attempt: number; delayMs: number; reason: string }) => void) | undefined;
}

/** Statuses that mean "not now": the request was not acted on, or acting again is harmless. */
const RETRY_STATUSES = new Set([502, 503, 504]);

/**
 * JSON over HTTP with bounded retries.
 *
 * Retried: network errors, per-attempt timeouts and 502/503/504, with
 * exponential backoff and full jitter (a random delay up to the current
 * ceiling, so many clients recovering together do not retry in lockstep).
 * A Retry-After from the server is honoured up to maxDelayMs. Not retried:
 * any other status; a 4xx throws QueenHttpError at once.
 *
 * Retrying a push is only safe because every item carries a transactionId
 * (the client mints missing ones before the first attempt): a push that
 * committed but whose answer was lost is then answered `duplicate` with the
 * original id on the retry, instead of being written twice.
 */
export class Transport {
  private readonly base: URL;

  constructor(private readonly opts: TransportOptions) {
    // A trailing slash makes relative paths resolve under any path prefix.
    this.base = new URL(opts.url.endsWith('/') ? opts.url : `${opts.url}/`);
  }

  /**
   * `opts.timeoutMs` replaces the per-attempt timeout (a long poll waits
   * longer than an ordinary call); `opts.signal` aborts the call (no retry).
   */
  async request<T>(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: unknown,
    opts: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<T> {
    const url = new URL(path, this.base);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.opts.token) headers.authorization = `Bearer ${this.opts.token}`;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const { retries } = this.opts.retry;

    for (let attempt = 0; ; attempt++) {
      let res: Response;
      let parsed: unknown;
      try {
        const timeout = AbortSignal.timeout(opts.timeoutMs ?? this.opts.timeoutMs);
        res = await this.opts.fetch(url, {
          method,
          headers,
          body: payload,
          signal: opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout,
        });
        // Inside the try: a connection lost while the body streams is a network error too.
        parsed = await readBody(res);
      } catch (err) {
        if (opts.signal?.aborted) throw opts.signal.reason ?? err;
        if (attempt >= retries)
          throw new QueenNetworkError(`${method} ${url.pathname}: ${describe(err)} (after ${attempt + 1} attempts)`, err);
        await this.pause(attempt, undefined, describe(err));
        continue;
      }
      if (res.ok) return parsed as T;
      if (RETRY_STATUSES.has(res.status) && attempt < retries) {
        await this.pause(attempt, res.headers.get('retry-after'), `HTTP ${res.status}`);
        continue;
      }
      throw new QueenHttpError(res.status, parsed, method, url.pathname);
    }
  }

  private async pause(attempt: number, retryAfter: string | null | undefined, reason: string): Promise<void> {
    const { baseDelayMs, maxDelayMs } = this.opts.retry;
    const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** attempt);
    let delayMs = Math.random() * ceiling;
    const hinted = retryAfter ? Number(retryAfter) : NaN;
    if (Number.isFinite(hinted) && hinted >= 0) delayMs = Math.max(delayMs, Math.min(maxDelayMs, hinted * 1000));
    this.opts.onRetry?.({ attempt: attempt + 1, delayMs, reason });
    await new Promise((r) => setTimeout(r, delayMs));
  }
}

async function readBody(res: Response): Promise<unknown> {
  const text = await res.text();
  if (text === '') return undefined;
  if ((res.headers.get('content-type') ?? '').includes('json')) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

/** fetch says only "fetch failed"; the reason (ECONNREFUSED, a timeout ...) is in its cause. */
function describe(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } } | null | undefined;
  if (e?.name === 'TimeoutError') return 'timed out';
  const reason = e?.cause?.code ?? e?.cause?.message;
  return reason ? `${e!.message} (${reason})` : (e?.message ?? String(err));
}
