import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { MachineInfo } from './machine.js';
import { fmt, fmtRatio } from './stats.js';
import { lineChartSvg } from './svg.js';
import type { SuiteResult } from './types.js';

/** <repo>/bench/results (this file runs from dist/bench/lib). */
export const RESULTS_DIR = fileURLToPath(new URL('../../../bench/results/', import.meta.url));

export interface RunMeta {
  mode: 'quick' | 'full';
  date: string;
  startedAt: string;
  machine: MachineInfo;
}

function fileBase(meta: RunMeta, suite: string): string {
  return `${meta.date}-${suite}${meta.mode === 'quick' ? '-quick' : ''}`;
}

/** Writes <date>-<suite>[-quick].json and one .svg per curve; returns the paths written. */
export async function writeSuite(meta: RunMeta, r: SuiteResult, durationS: number, error?: string): Promise<string[]> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const base = fileBase(meta, r.name);
  const paths: string[] = [];
  const doc = {
    suite: r.name,
    mode: meta.mode,
    date: meta.date,
    startedAt: meta.startedAt,
    durationSeconds: Math.round(durationS * 10) / 10,
    machine: meta.machine,
    ...(error ? { error } : {}),
    params: r.params,
    targets: r.targets,
    info: r.info ?? [],
    notes: r.notes ?? [],
    results: r.results,
    curves: r.curves ?? [],
    samples: r.samples,
  };
  const json = RESULTS_DIR + base + '.json';
  await writeFile(json, JSON.stringify(doc, (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v), 2) + '\n');
  paths.push(json);
  for (const c of r.curves ?? []) {
    const svg = RESULTS_DIR + `${base}-${c.name}.svg`;
    await writeFile(svg, lineChartSvg(c));
    paths.push(svg);
  }
  return paths;
}

export interface Row {
  suite: string;
  metric: string;
  measured: string;
  baseline: string;
  ratio: string;
  target: string;
  status: string;
}

export function rowsOf(r: SuiteResult, error?: string): Row[] {
  const rows: Row[] = [];
  if (error)
    rows.push({ suite: r.name, metric: 'suite run', measured: 'ERROR', baseline: '-', ratio: '-', target: 'completes', status: 'MISSED' });
  for (const t of r.targets) {
    const goal = `${t.op} ${t.ratio ? fmtRatio(t.target) : fmt(t.target)}${!t.ratio && t.unit ? ' ' + t.unit : ''}`;
    rows.push({
      suite: r.name,
      metric: t.name,
      measured: t.value ?? `${fmt(t.measured)}${t.unit ? ' ' + t.unit : ''}`,
      baseline: t.baseline ?? '-',
      ratio: t.ratio ? fmtRatio(t.measured) : '-',
      target: goal,
      status: t.met ? 'MET' : 'MISSED',
    });
  }
  for (const i of r.info ?? []) {
    rows.push({
      suite: r.name,
      metric: i.name,
      measured: i.value,
      baseline: i.baseline ?? '-',
      ratio: i.ratio === undefined ? '-' : fmtRatio(i.ratio),
      target: '-',
      status: 'info',
    });
  }
  return rows;
}

/** A Markdown table (also readable as plain text). A '|' inside a cell would split it: shown as '/'. */
export function renderTable(input: Row[]): string {
  const rows = input.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v.replace(/\|/g, '/')])) as unknown as Row);
  const head: Row = {
    suite: 'suite',
    metric: 'metric',
    measured: 'measured',
    baseline: 'baseline',
    ratio: 'ratio',
    target: 'target',
    status: 'status',
  };
  const cols = Object.keys(head) as (keyof Row)[];
  const width = Object.fromEntries(cols.map((c) => [c, Math.max(...[head, ...rows].map((r) => r[c].length))])) as Record<keyof Row, number>;
  const line = (r: Row): string => '| ' + cols.map((c) => r[c].padEnd(width[c])).join(' | ') + ' |';
  const sep = '|' + cols.map((c) => '-'.repeat(width[c] + 2)).join('|') + '|';
  return [line(head), sep, ...rows.map(line)].join('\n');
}

/** A run of every suite writes <date>-summary[-quick].md; a partial run (--only) <date>-summary[-quick]-partial.md. */
export async function writeSummary(meta: RunMeta, table: string, extra: string[], partial = false): Promise<string> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const path = RESULTS_DIR + fileBase(meta, 'summary') + (partial ? '-partial' : '') + '.md';
  const m = meta.machine;
  const text = [
    `# Benchmark summary (${meta.mode}), ${meta.startedAt}`,
    '',
    `Machine: ${m.cpus} x ${m.cpuModel}, ${(m.memBytes / 2 ** 30).toFixed(1)} GiB, Node ${m.node}; ${m.postgres ?? 'PostgreSQL unknown'}; Kafka ${m.kafka ?? 'not used'}.`,
    '',
    `Code: ${m.code.commit ?? 'unknown commit'}${m.code.uncommitted.length ? ` plus uncommitted changes to ${m.code.uncommitted.join(', ')}` : ''}.`,
    '',
    table,
    '',
    ...extra,
  ].join('\n');
  await writeFile(path, text + '\n');
  return path;
}
