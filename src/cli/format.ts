import { stringify } from 'yaml';
import { UsageError } from './errors.js';
import { evalJsonPath, parseJsonPath, type JsonPathTemplate } from './jsonpath.js';

/**
 * `-o`: how a command prints what it got, as kubectl's -o does.
 *
 *   table (default)   columns, or a status line for commands that do one thing
 *   wide              the table with more columns
 *   name              kind/name per object, one a line (for xargs and scripts)
 *   json, yaml        the API's answer as it is
 *   jsonpath=TEMPLATE that answer through a template (jsonpath.ts)
 */
export type OutputFormat = { kind: 'table' | 'wide' | 'name' | 'json' | 'yaml' } | { kind: 'jsonpath'; template: JsonPathTemplate };

export const OUTPUT_FORMATS = ['table', 'wide', 'name', 'json', 'yaml', 'jsonpath='] as const;

export const TABLE: OutputFormat = { kind: 'table' };

/** Parses -o; a format outside `allowed` (default: every one) is a usage error naming the command. */
export function parseOutput(value: string | undefined, command: string, allowed: readonly string[] = OUTPUT_FORMATS): OutputFormat {
  // "-o=json", as kubectl takes it (node's parseArgs keeps the "=" of a short option's value).
  const v = (value ?? 'table').replace(/^=/, '');
  const names = allowed.map((a) => a.replace(/=$/, '=TEMPLATE')).join(', ');
  if (v.startsWith('jsonpath=') || v === 'jsonpath') {
    if (!allowed.includes('jsonpath=')) throw new UsageError(`${command}: -o must be ${names}, got "${v}"`);
    const source = v.slice('jsonpath='.length);
    if (source === '') throw new UsageError('-o jsonpath needs a template, e.g. -o jsonpath={.queues[*].queue}');
    return { kind: 'jsonpath', template: parseJsonPath(source) };
  }
  if (!allowed.includes(v)) throw new UsageError(`${command}: -o must be ${names}, got "${v}"`);
  return { kind: v as 'table' | 'wide' | 'name' | 'json' | 'yaml' };
}

/** True for the formats that print the API's value (json, yaml, jsonpath). */
export function isStructured(f: OutputFormat): boolean {
  return f.kind === 'json' || f.kind === 'yaml' || f.kind === 'jsonpath';
}

/** What a command shows, in every format; render() picks one. */
export interface View {
  /** What json, yaml and jsonpath print: the API's answer as it is. */
  value: unknown;
  /** kind/name of each object, for -o name. */
  names: readonly string[];
  /** The default text: a table, or a status line. */
  text: string;
  /** -o wide; the default text when a command has no more to show. */
  wide?: string;
}

export function render(view: View, f: OutputFormat): string {
  switch (f.kind) {
    case 'table':
      return view.text;
    case 'wide':
      return view.wide ?? view.text;
    case 'name':
      return view.names.map((n) => `${n}\n`).join('');
    case 'json':
    case 'yaml':
      return structured(view.value, f.kind);
    case 'jsonpath':
      return evalJsonPath(f.template, view.value);
  }
}

/** Left-aligned columns separated by two spaces, like kubectl's tables. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

export function structured(value: unknown, format: 'json' | 'yaml'): string {
  return format === 'json' ? JSON.stringify(value, null, 2) + '\n' : stringify(value);
}
