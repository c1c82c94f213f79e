/**
 * The shapes every suite returns and the harness writes. A suite measures;
 * the harness (bench/run.ts) only records, plots and prints.
 */

export type Op = '>=' | '<=';

/** One pass/fail line of the printed table. Misses are reported, never hidden. */
export interface Target {
  name: string;
  /** The compared quantity: a ratio when `ratio` is true, else an absolute value. */
  measured: number;
  target: number;
  op: Op;
  met: boolean;
  /** True when `measured` is a ratio of `value` to `baseline` (side by side, same run). */
  ratio?: boolean;
  /** The measured side, human-readable (e.g. "41.2k msg/s"). */
  value?: string;
  /** The baseline side, human-readable. */
  baseline?: string;
  unit?: string;
}

/** A number worth printing that is not a target (sizes, probe counts, ...). */
export interface Info {
  name: string;
  value: string;
  baseline?: string;
  ratio?: number;
}

export interface Series {
  name: string;
  points: [number, number][];
}

export interface Curve {
  /** File-name part: <date>-<suite>-<name>.svg */
  name: string;
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
}

export interface SuiteResult {
  name: string;
  params: Record<string, unknown>;
  /** Medians and derived numbers. */
  results: Record<string, unknown>;
  /** Raw samples (every repetition), for re-analysis. */
  samples: Record<string, unknown>;
  curves?: Curve[];
  targets: Target[];
  info?: Info[];
  /** Free-text observations (what dominated, what was skipped). */
  notes?: string[];
}

export interface Progress {
  /** Announce step i of n (1-based) and what is being measured. */
  step(i: number, n: number, what: string): void;
  /** A line inside the current step (sub-progress). */
  note(what: string): void;
}

export interface SuiteContext {
  quick: boolean;
  progress: Progress;
  /** DATABASE_URL: a maintenance database with CREATEDB rights. */
  adminUrl: string;
  /** KAFKA_BROKERS, split; undefined when not set. */
  brokers: string[] | undefined;
}

export interface Suite {
  name: string;
  needsKafka?: boolean;
  run(ctx: SuiteContext): Promise<SuiteResult>;
}

export function target(
  name: string,
  measured: number,
  op: Op,
  goal: number,
  extra: Omit<Target, 'name' | 'measured' | 'op' | 'target' | 'met'> = {},
): Target {
  const met = Number.isFinite(measured) && (op === '>=' ? measured >= goal : measured <= goal);
  return { name, measured, target: goal, op, met, ...extra };
}
