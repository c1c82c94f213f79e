import type { TestFn } from 'ava';
import { liveComponents } from '../../src/util/lifecycle.js';

/**
 * Registers the file's teardown, then fails the file when a component
 * (engine, consumer, server ...) is still running after it: a leaked component
 * is a defect, not noise. One hook, because ava runs after-hooks concurrently.
 */
export function teardownAndCheckLeaks<C>(test: TestFn<C>, teardown: (t: { context: C }) => Promise<void> | void = () => undefined): void {
  test.after.always('teardown, then no component leaked', async (t) => {
    await teardown(t);
    const live = liveComponents();
    if (live.length > 0) throw new Error(`components left running: ${live.join(', ')}`);
  });
}

/** Polls a condition until it holds or the deadline passes (no fixed sleeps). */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 30_000,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
