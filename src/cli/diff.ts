import { QUEUE_OPTION_DEFAULTS, type QueueOptions } from '../engine/queueConfig.js';
import type { QueueManifest } from './manifest.js';

/**
 * What `apply` would do to one queue. apply sends mode "replace", so the
 * result is the defaults overlaid with the manifest's non-null values; that
 * is what the live options are compared with.
 */
export type Plan =
  | { action: 'create'; name: string; desired: QueueOptions }
  | { action: 'change'; name: string; desired: QueueOptions; changes: { key: keyof QueueOptions; from: unknown; to: unknown }[] }
  | { action: 'unchanged'; name: string; desired: QueueOptions };

export function desiredOptions(m: QueueManifest): QueueOptions {
  const out: QueueOptions = { ...QUEUE_OPTION_DEFAULTS };
  for (const [k, v] of Object.entries(m.config) as [keyof QueueOptions, number | null][]) {
    if (v !== null) out[k] = v;
  }
  return out;
}

export function plan(m: QueueManifest, live: QueueOptions | undefined): Plan {
  const desired = desiredOptions(m);
  if (!live) return { action: 'create', name: m.name, desired };
  const keys = new Set([...Object.keys(desired), ...Object.keys(live)]) as Set<keyof QueueOptions>;
  const changes = [...keys].filter((k) => live[k] !== desired[k]).map((k) => ({ key: k, from: live[k], to: desired[k] }));
  return changes.length === 0 ? { action: 'unchanged', name: m.name, desired } : { action: 'change', name: m.name, desired, changes };
}

/** Lines for --dry-run: "-"/"+" per changed option, like a diff. */
export function renderPlan(p: Plan): string[] {
  switch (p.action) {
    case 'create':
      return [`+ queue/${p.name} (would be created)`, ...Object.entries(p.desired).map(([k, v]) => `    + ${k}: ${String(v)}`)];
    case 'unchanged':
      return [`  queue/${p.name} (unchanged)`];
    case 'change':
      return [
        `~ queue/${p.name} (would be changed)`,
        ...p.changes.flatMap((c) => [`    - ${c.key}: ${String(c.from)}`, `    + ${c.key}: ${String(c.to)}`]),
      ];
  }
}
