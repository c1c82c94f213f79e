import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';

// ARCHITECTURE.md's module table, checked: which module of src/ may import
// which, and no import cycle between the files of src/ or of bench/. It
// reads the TypeScript sources (this file runs from dist/test/unit).

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * What each module may import: `value` for any import, `types` for type-only
 * imports (an upper module is handed a lower component's instance and names
 * only its type). A module of src/ missing here fails the test: place it in
 * ARCHITECTURE.md's table and here.
 */
const ALLOWED: Record<string, { value: string[]; types?: string[] }> = {
  errors: { value: [] },
  util: { value: ['errors'] },
  telemetry: { value: [] },
  config: { value: ['errors', 'util'] },
  engine: { value: ['errors', 'util', 'telemetry'] },
  dedup: { value: ['util'] },
  compaction: { value: ['engine', 'util', 'telemetry'] },
  fusion: { value: ['engine', 'errors', 'util', 'telemetry'], types: ['dedup'] },
  read: { value: ['engine', 'errors', 'util', 'telemetry'] },
  ingress: { value: ['engine', 'config', 'errors', 'util', 'telemetry'], types: ['fusion'] },
  http: { value: ['engine', 'errors', 'util', 'telemetry'], types: ['read'] },
  retention: { value: ['engine', 'config', 'errors', 'util', 'telemetry'] },
  timers: { value: ['engine', 'util', 'telemetry'] },
  pipeline: { value: ['config', 'compaction', 'dedup', 'engine', 'fusion', 'util', 'telemetry'] },
  service: {
    value: [
      'config',
      'engine',
      'http',
      'ingress',
      'pipeline',
      'read',
      'retention',
      'telemetry',
      'timers',
      'util',
      'errors',
      'fusion',
      'dedup',
    ],
  },
  cluster: { value: ['config', 'http', 'telemetry', 'util', 'errors'] },
  main: { value: ['cluster', 'service', 'config', 'telemetry', 'errors'] },
  client: { value: [] },
  cli: { value: ['client', 'errors', 'engine'] },
};

interface Import {
  from: string;
  to: string;
  typeOnly: boolean;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

// Static imports and re-exports (with their `type` keyword or an all-`type`
// name list), and dynamic import() of a relative path.
const IMPORT = /(?:^|\n)\s*(?:import|export)\s+(type\s+)?([^'"]*?)\s*from\s*['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g;

function importsOf(file: string): Import[] {
  const text = readFileSync(file, 'utf8');
  const out: Import[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[3] ?? m[4]!;
    const names = m[2] ?? '';
    const typeOnly = m[1] !== undefined || /^\{\s*(?:type\s+[^,}]+,?\s*)+\}$/.test(names);
    out.push({ from: file, to: resolve(dirname(file), spec.replace(/\.js$/, '.ts')), typeOnly });
  }
  return out;
}

/** The module of a file under src/: its folder, or its name for a top-level file. */
function moduleOf(file: string): string {
  const parts = relative(join(ROOT, 'src'), file).split(sep);
  return parts.length === 1 ? parts[0]!.replace(/\.ts$/, '') : parts[0]!;
}

/** The first cycle found among the files' imports, as a path of files, or undefined. */
function findCycle(files: string[], edges: Import[]): string[] | undefined {
  const next = new Map<string, string[]>();
  for (const e of edges) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (f: string): string[] | undefined => {
    if (state.get(f) === 'done') return undefined;
    if (state.get(f) === 'open') return [...stack.slice(stack.indexOf(f)), f];
    state.set(f, 'open');
    stack.push(f);
    for (const t of next.get(f) ?? []) {
      const c = visit(t);
      if (c) return c;
    }
    stack.pop();
    state.set(f, 'done');
    return undefined;
  };
  for (const f of files) {
    const c = visit(f);
    if (c) return c.map((x) => relative(ROOT, x));
  }
  return undefined;
}

test('every module of src/ imports only what ARCHITECTURE.md says it may', (t) => {
  const files = tsFiles(join(ROOT, 'src'));
  t.true(files.length > 50, 'the sources were found');
  const wrong: string[] = [];
  for (const f of files) {
    const from = moduleOf(f);
    const allowed = ALLOWED[from];
    if (!allowed) {
      wrong.push(`${from}: a module ARCHITECTURE.md does not place (${relative(ROOT, f)})`);
      continue;
    }
    for (const i of importsOf(f)) {
      const to = moduleOf(i.to);
      if (to === from) continue;
      const ok = allowed.value.includes(to) || (i.typeOnly && (allowed.types ?? []).includes(to));
      if (!ok) wrong.push(`${relative(ROOT, f)} imports ${i.typeOnly ? 'types of ' : ''}${relative(ROOT, i.to)} (${from} -> ${to})`);
    }
  }
  t.deepEqual(wrong, []);
});

test('no import cycle between the files of src/ or of bench/ (type imports included)', (t) => {
  for (const dir of ['src', 'bench']) {
    const files = tsFiles(join(ROOT, dir));
    const edges = files.flatMap(importsOf).filter((e) => e.to.startsWith(join(ROOT, dir) + sep));
    t.is(findCycle(files, edges)?.join(' -> '), undefined, `${dir}/`);
  }
});

test('the checks see a violation and a cycle when there is one', (t) => {
  const a = join(ROOT, 'bench', 'a.ts');
  const b = join(ROOT, 'bench', 'b.ts');
  t.deepEqual(
    findCycle(
      [a, b],
      [
        { from: a, to: b, typeOnly: true },
        { from: b, to: a, typeOnly: false },
      ],
    ),
    ['bench/a.ts', 'bench/b.ts', 'bench/a.ts'],
  );
  t.is(findCycle([a, b], [{ from: a, to: b, typeOnly: false }]), undefined);
  t.is(moduleOf(join(ROOT, 'src', 'dedup', 'cache.ts')), 'dedup');
  t.is(moduleOf(join(ROOT, 'src', 'config.ts')), 'config');
});
