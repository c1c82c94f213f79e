import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * A full garbage collection before each timed interval, so every arm pays for
 * its own garbage and not for the garbage the previous arm left behind (the
 * engine's writer allocates several times more per message than the
 * baselines; without this, whichever arm runs after it is charged for part
 * of its collection). Uses global.gc when node runs with --expose-gc, else
 * enables it at run time.
 */
let gcFn: (() => void) | undefined | null = null;

function resolveGc(): (() => void) | undefined {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g) return g;
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return undefined;
  }
}

/** The runtime's gc(), or undefined when it cannot be exposed. */
export function gcFunction(): (() => void) | undefined {
  if (gcFn === null) gcFn = resolveGc();
  return gcFn;
}

export function gcAvailable(): boolean {
  if (gcFn === null) gcFn = resolveGc();
  return gcFn !== undefined;
}

/** Collects garbage and yields once to the event loop. */
export async function settle(): Promise<void> {
  if (gcFn === null) gcFn = resolveGc();
  gcFn?.();
  await new Promise((r) => setImmediate(r));
}
