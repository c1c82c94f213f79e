import { stringify } from 'yaml';

export type OutputFormat = 'table' | 'json' | 'yaml';

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
