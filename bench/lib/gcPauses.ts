import { PerformanceObserver, constants, type PerformanceEntry } from 'node:perf_hooks';

/** One garbage-collection pause of the main thread, on performance.now()'s timeline. */
export interface GcPause {
  startMs: number;
  durationMs: number;
  /** Mark-sweep-compact or an incremental-marking step (old generation), as opposed to a scavenge or a weak-callback pass. */
  major: boolean;
}

/**
 * Records the main thread's GC pauses between start and stop, so a suite
 * can say which of its timed intervals paid for them (entries arrive
 * asynchronously, so they are matched to intervals by their start time, not
 * by what was running when the observer was called).
 */
export class GcPauseRecorder {
  private readonly pauses: GcPause[] = [];
  private readonly observer = new PerformanceObserver((list) => this.take(list.getEntries()));

  start(): this {
    this.observer.observe({ entryTypes: ['gc'] });
    return this;
  }

  /** Stops observing; returns every pause seen, in start order. */
  stop(): GcPause[] {
    this.take(this.observer.takeRecords());
    this.observer.disconnect();
    return this.pauses.sort((a, b) => a.startMs - b.startMs);
  }

  private take(entries: readonly PerformanceEntry[]): void {
    for (const e of entries) {
      const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      this.pauses.push({
        startMs: e.startTime,
        durationMs: e.duration,
        major: kind === constants.NODE_PERFORMANCE_GC_MAJOR || kind === constants.NODE_PERFORMANCE_GC_INCREMENTAL,
      });
    }
  }
}

/** Sums pauses into the [t0, t1] windows of each label (one pause belongs to the window it started in). */
export function pausesByLabel(
  pauses: readonly GcPause[],
  windows: readonly { label: string; t0: number; t1: number }[],
): Map<string, { minorMs: number; majorMs: number; majors: number }> {
  const out = new Map<string, { minorMs: number; majorMs: number; majors: number }>();
  const sorted = [...windows].sort((a, b) => a.t0 - b.t0);
  let w = 0;
  for (const p of pauses) {
    while (w < sorted.length && sorted[w]!.t1 < p.startMs) w++;
    const win = sorted[w];
    if (win === undefined || p.startMs < win.t0) continue;
    const acc = out.get(win.label) ?? { minorMs: 0, majorMs: 0, majors: 0 };
    if (p.major) {
      acc.majorMs += p.durationMs;
      acc.majors++;
    } else acc.minorMs += p.durationMs;
    out.set(win.label, acc);
  }
  return out;
}
