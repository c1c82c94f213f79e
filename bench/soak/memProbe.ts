import { appendFileSync } from 'node:fs';
import { getHeapStatistics } from 'node:v8';

/**
 * Loaded into the service under soak with `node --import` (the service itself
 * is unchanged): every QUEEN_SOAK_PROBE_MS it appends one JSON line of the
 * process's own memory figures to QUEEN_SOAK_PROBE_FILE. The driver reads
 * that file; RSS from inside the process equals /proc's, and the heap split
 * (used, total, external, array buffers) is only visible from inside.
 */
const file = process.env.QUEEN_SOAK_PROBE_FILE;
if (file) {
  const every = Number(process.env.QUEEN_SOAK_PROBE_MS ?? 1000);
  const sample = (): void => {
    const m = process.memoryUsage();
    const h = getHeapStatistics();
    appendFileSync(
      file,
      `${JSON.stringify({ t: Date.now(), rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers, heapLimit: h.heap_size_limit })}\n`,
    );
  };
  sample();
  setInterval(sample, every).unref();
}
