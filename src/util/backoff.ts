/**
 * Exponential backoff with full jitter, capped. `attempt` counts from 0.
 */
export function backoffMs(attempt: number, baseMs = 100, capMs = 5_000): number {
  const exp = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 20));
  return Math.floor(exp / 2 + (Math.random() * exp) / 2);
}

/** Resolves after ms, or at once when the signal aborts (never rejects). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
