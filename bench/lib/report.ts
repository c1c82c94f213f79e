import { appendFile, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { MachineInfo } from './machine.js';
import { fmt, fmtRatio } from './stats.js';
import { lineChartSvg } from './svg.js';
import type { SuiteResult } from './types.js';

/** <repo>/bench/results (this file runs from dist/bench/lib). */
export const RESULTS_DIR = fileURLToPath(new URL('../../../bench/results/', import.meta.url));

/**
 * The results layout (bench/README.md, "What a run writes"):
 *  - latest/<suite>[-quick].json (+ one .svg per curve): the newest run of each
 *    suite in each mode, with every raw sample. This is the current claim;
 *    each run overwrites its suite's files.
 *  - latest/summary[-quick].md: the table over every suite's latest file of
 *    that mode, each suite's rows headed by the date and commit they measured.
 *  - history/<suite>.jsonl: one line per run (commit, machine, params,
 *    results, targets, info; no raw samples), appended, never rewritten.
 * A run given a tag (--tag) is an experiment: it goes to history with its tag
 * and leaves latest/ alone.
 */
export const LATEST_DIR = join(RESULTS_DIR, 'latest');
export const HISTORY_DIR = join(RESULTS_DIR, 'history');

export interface RunMeta {
  mode: 'quick' | 'full';
  date: string;
  startedAt: string;
  machine: MachineInfo;
  /** An experiment's name: recorded in history, latest/ untouched. */
  tag?: string | undefined;
}

function latestBase(mode: RunMeta['mode'], suite: string): string {
  return `${suite}${mode === 'quick' ? '-quick' : ''}`;
}

/**
 * Whether `file` in latest/ is a curve a new run of `base` (latestBase)
 * replaces. Names alone are ambiguous: `kafka-dups-<curve>.svg` and
 * `kafka-dups-quick-<curve>.svg`, or `soak-retention-<curve>.svg` and
 * `soak-retention-defaults-<curve>.svg`, share a prefix. So a curve belongs to
 * the longest of the stored results' bases (`<base>.json` in latest/) that
 * prefixes it.
 */
export function isReplacedCurve(file: string, base: string, bases: readonly string[]): boolean {
  if (!file.endsWith('.svg')) return false;
  let owner: string | undefined;
  for (const b of [...bases, base]) if (file.startsWith(`${b}-`) && (owner === undefined || b.length > owner.length)) owner = b;
  return owner === base;
}

const finiteOrString = (_k: string, v: unknown): unknown => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v);

/** One history line: what a later reader needs to compare runs, without the raw samples. */
export interface HistoryLine {
  suite: string;
  mode: RunMeta['mode'];
  startedAt: string;
  durationSeconds: number;
  tag?: string;
  commit: string | null;
  uncommitted: string[];
  machine: MachineInfo;
  error?: string;
  params: Record<string, unknown>;
  results: Record<string, unknown>;
  targets: SuiteResult['targets'];
  info: NonNullable<SuiteResult['info']>;
  /** The result file this line was taken from, for runs recorded before the history existed. */
  source?: string;
}

/** Appends one line to history/<suite>.jsonl. */
export async function appendHistory(line: HistoryLine): Promise<string> {
  await mkdir(HISTORY_DIR, { recursive: true });
  const path = join(HISTORY_DIR, `${line.suite}.jsonl`);
  await appendFile(path, JSON.stringify(line, finiteOrString) + '\n');
  return path;
}

/**
 * Writes a finished result: latest/<name>[-quick].json and its curves (unless
 * the run has a tag), and its history line. Returns the paths written.
 */
export async function writeResult(
  meta: RunMeta,
  name: string,
  doc: Record<string, unknown>,
  svgs: { name: string; svg: string }[],
  line: Omit<HistoryLine, 'suite' | 'mode' | 'startedAt' | 'commit' | 'uncommitted' | 'machine' | 'tag'>,
): Promise<string[]> {
  const paths: string[] = [];
  if (meta.tag === undefined) {
    await mkdir(LATEST_DIR, { recursive: true });
    const base = latestBase(meta.mode, name);
    // A curve the suite no longer draws must not stay beside the new run's.
    const files = await readdir(LATEST_DIR);
    const bases = files.filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -'.json'.length));
    for (const f of files) if (isReplacedCurve(f, base, bases)) await rm(join(LATEST_DIR, f));
    const json = join(LATEST_DIR, `${base}.json`);
    await writeFile(json, JSON.stringify(doc, finiteOrString, 2) + '\n');
    paths.push(json);
    for (const c of svgs) {
      const svg = join(LATEST_DIR, `${base}-${c.name}.svg`);
      await writeFile(svg, c.svg);
      paths.push(svg);
    }
  }
  paths.push(
    await appendHistory({
      suite: name,
      mode: meta.mode,
      startedAt: meta.startedAt,
      ...(meta.tag !== undefined ? { tag: meta.tag } : {}),
      commit: meta.machine.code.commit ?? null,
      uncommitted: meta.machine.code.uncommitted,
      machine: meta.machine,
      ...line,
    }),
  );
  return paths;
}

/** Writes one suite's run (see writeResult); returns the paths written. */
export async function writeSuite(meta: RunMeta, r: SuiteResult, durationS: number, error?: string): Promise<string[]> {
  const durationSeconds = Math.round(durationS * 10) / 10;
  const doc = {
    suite: r.name,
    mode: meta.mode,
    date: meta.date,
    startedAt: meta.startedAt,
    durationSeconds,
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
  return writeResult(
    meta,
    r.name,
    doc,
    (r.curves ?? []).map((c) => ({ name: c.name, svg: lineChartSvg(c) })),
    { durationSeconds, ...(error ? { error } : {}), params: r.params, results: r.results, targets: r.targets, info: r.info ?? [] },
  );
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

export function rowsOf(r: Pick<SuiteResult, 'name' | 'targets' | 'info'>, error?: string): Row[] {
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

/** A result file's path as the repository names it (bench/results/...), for summaries and logs. */
export function resultPath(path: string): string {
  return path.replace(/^.*\/bench\/results\//, 'bench/results/');
}

/**
 * latest/summary[-quick].md: every suite's latest result of this mode, so the
 * summary stays whole after a partial run (--only). A tagged run prints its
 * table and writes nothing here. Returns the path, or undefined.
 */
export async function writeSummary(meta: RunMeta, extra: string[]): Promise<string | undefined> {
  if (meta.tag !== undefined) return undefined;
  const suffix = meta.mode === 'quick' ? '-quick' : '';
  const docs: StoredSuite[] = [];
  for (const f of (await readdir(LATEST_DIR)).sort()) {
    if (!f.endsWith(`${suffix}.json`) || (suffix === '' && f.endsWith('-quick.json'))) continue;
    docs.push(JSON.parse(await readFile(join(LATEST_DIR, f), 'utf8')) as StoredSuite);
  }
  const m = meta.machine;
  const sections = docs.map((d) => {
    const code = d.machine?.code;
    const head = `**${d.suite}**: ${d.startedAt}, ${code?.commit?.slice(0, 12) ?? 'unknown commit'}${code?.uncommitted.length ? ' (plus uncommitted changes)' : ''}, ${d.durationSeconds} s.`;
    // A result stored before results carried targets (moved into latest/ from
    // an older dated file) has no rows to show: say so, rather than print an
    // empty table under a commit and duration it does not have.
    if (d.targets === undefined && d.info === undefined && d.error === undefined)
      return [
        `**${d.suite}**: ${d.startedAt}, stored before results carried targets or a commit; its numbers are in \`latest/${d.suite}.json\`. Run the suite again for rows.`,
        '',
      ].join('\n');
    return [head, '', renderTable(rowsOf({ name: d.suite, targets: d.targets ?? [], info: d.info }, d.error)), ''].join('\n');
  });
  const rows = docs.flatMap((d) => rowsOf({ name: d.suite, targets: d.targets ?? [], info: d.info }, d.error));
  const met = rows.filter((r) => r.status === 'MET').length;
  const missed = rows.filter((r) => r.status === 'MISSED').length;
  const text = [
    `# Benchmark summary (${meta.mode}): the latest run of each suite`,
    '',
    `${met} target(s) met, ${missed} missed over ${docs.length} suite(s). Last written ${meta.startedAt} on ${m.cpus} x ${m.cpuModel}, ${(m.memBytes / 2 ** 30).toFixed(1)} GiB, Node ${m.node}; ${m.postgres ?? 'PostgreSQL unknown'}; Kafka ${m.kafka ?? 'not used'}.`,
    '',
    'Each suite below names the run it comes from; older runs are in `bench/results/history/<suite>.jsonl`.',
    '',
    ...sections,
    ...extra,
  ].join('\n');
  const path = join(LATEST_DIR, `summary${suffix}.md`);
  await writeFile(path, text + '\n');
  return path;
}

/** A suite's result file as stored in latest/. */
interface StoredSuite {
  suite: string;
  startedAt: string;
  durationSeconds: number;
  machine?: MachineInfo;
  error?: string;
  /** Absent in a soak's file. */
  targets?: SuiteResult['targets'];
  info?: SuiteResult['info'];
}
