import { UsageError } from './errors.js';

/**
 * `-o jsonpath=TEMPLATE`: the subset of kubectl's JSONPath templates that
 * people actually type, evaluated on the same value -o json prints.
 *
 *   text outside braces        printed as it is
 *   {.a.b} {['a']} {$.a}       a field; $ is the root, a leading . or @ the current node
 *   {.a[0]} {.a[-1]} {.a[1:3]} index, from the end, slice
 *   {.a[*]} {.a.*} {..name}    every element or value; recursive descent
 *   {.a[?(@.x=="y")]}          filter: ==, !=, <, <=, >, >= against a literal, or [?(@.x)] (present)
 *   {range .a[*]}...{end}      the body once per result, with it as the current node
 *   {"\n"} {'\t'}              a string literal (\n \t \r \\ \" \' escapes)
 *
 * The results of one expression are joined by a space; strings print bare,
 * everything else as JSON. A key that is not there prints nothing, as with
 * kubectl's default --allow-missing-template-keys=true. Anything else (a
 * union, a function, a script) is a usage error naming the offset, rather
 * than a silent wrong answer.
 */

type Step =
  | { kind: 'field'; name: string }
  | { kind: 'wildcard' }
  | { kind: 'index'; index: number }
  | { kind: 'slice'; start: number | undefined; end: number | undefined }
  | { kind: 'descend'; step: Step }
  | { kind: 'filter'; path: Path; op: Op | undefined; literal: unknown };

type Op = '==' | '!=' | '<' | '<=' | '>' | '>=';

interface Path {
  fromRoot: boolean;
  steps: Step[];
}

type Node = { kind: 'text'; text: string } | { kind: 'path'; path: Path } | { kind: 'range'; path: Path; body: Node[] };

export interface JsonPathTemplate {
  readonly source: string;
  readonly nodes: Node[];
}

function fail(source: string, at: number, why: string): never {
  throw new UsageError(`-o jsonpath: ${why} at offset ${at} of "${source}"`);
}

/** Parses a template; a syntax error is a UsageError. */
export function parseJsonPath(source: string): JsonPathTemplate {
  const stack: { path: Path | undefined; body: Node[]; at: number }[] = [{ path: undefined, body: [], at: 0 }];
  let i = 0;
  while (i < source.length) {
    const open = source.indexOf('{', i);
    const textEnd = open === -1 ? source.length : open;
    if (textEnd > i) stack.at(-1)!.body.push({ kind: 'text', text: source.slice(i, textEnd) });
    if (open === -1) break;
    const close = closingBrace(source, open);
    const inner = source.slice(open + 1, close).trim();
    if (inner === 'end') {
      const done = stack.pop()!;
      if (stack.length === 0 || !done.path) fail(source, open, '{end} without {range}');
      stack.at(-1)!.body.push({ kind: 'range', path: done.path, body: done.body });
    } else if (/^range\s/.test(inner)) {
      stack.push({ path: parsePath(source, inner.slice(5).trim(), open + 1), body: [], at: open });
    } else if (/^["']/.test(inner)) {
      stack.at(-1)!.body.push({ kind: 'text', text: stringLiteral(source, inner, open + 1) });
    } else {
      stack.at(-1)!.body.push({ kind: 'path', path: parsePath(source, inner, open + 1) });
    }
    i = close + 1;
  }
  if (stack.length > 1) fail(source, stack.at(-1)!.at, '{range} without {end}');
  return { source, nodes: stack[0]!.body };
}

/** The "}" closing the "{" at `open`, skipping braces inside quoted strings. */
function closingBrace(source: string, open: number): number {
  let quote: string | undefined;
  for (let j = open + 1; j < source.length; j++) {
    const c = source[j]!;
    if (quote) {
      if (c === '\\') j++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '}') return j;
  }
  return fail(source, open, 'unclosed "{"');
}

const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', '"': '"', "'": "'" };

function stringLiteral(source: string, text: string, at: number): string {
  const q = text[0]!;
  if (text.length < 2 || text.at(-1) !== q) fail(source, at, 'unterminated string');
  return text.slice(1, -1).replace(/\\(.)/g, (_, c: string) => ESCAPES[c] ?? fail(source, at, `unknown escape "\\${c}"`));
}

function parsePath(source: string, text: string, at: number): Path {
  let i = 0;
  let fromRoot = false;
  if (text.startsWith('$')) {
    fromRoot = true;
    i = 1;
  } else if (text.startsWith('@')) i = 1;
  else if (!text.startsWith('.') && !text.startsWith('[')) fail(source, at, `a path starts with ".", "$" or "@", got "${text}"`);
  const steps: Step[] = [];
  const name = /^[A-Za-z0-9_-]+/;
  while (i < text.length) {
    if (text.startsWith('..', i)) {
      i += 2;
      if (text[i] === '*') {
        steps.push({ kind: 'descend', step: { kind: 'wildcard' } });
        i++;
        continue;
      }
      const m = name.exec(text.slice(i));
      if (!m) fail(source, at + i, 'a name after ".."');
      steps.push({ kind: 'descend', step: { kind: 'field', name: m[0] } });
      i += m[0].length;
    } else if (text[i] === '.') {
      i++;
      if (i === text.length) break; // "{.}": the current node
      if (text[i] === '*') {
        steps.push({ kind: 'wildcard' });
        i++;
        continue;
      }
      const m = name.exec(text.slice(i));
      if (!m) fail(source, at + i, 'a field name after "."');
      steps.push({ kind: 'field', name: m[0] });
      i += m[0].length;
    } else if (text[i] === '[') {
      const end = bracketEnd(source, text, i, at);
      steps.push(parseBracket(source, text.slice(i + 1, end).trim(), at + i));
      i = end + 1;
    } else fail(source, at + i, `unexpected "${text[i]}"`);
  }
  return { fromRoot, steps };
}

function bracketEnd(source: string, text: string, open: number, at: number): number {
  let depth = 0;
  let quote: string | undefined;
  for (let j = open; j < text.length; j++) {
    const c = text[j]!;
    if (quote) {
      if (c === '\\') j++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '[' || c === '(') depth++;
    else if ((c === ']' || c === ')') && --depth === 0) return j;
  }
  return fail(source, at + open, 'unclosed "["');
}

function parseBracket(source: string, inner: string, at: number): Step {
  if (inner === '*') return { kind: 'wildcard' };
  if (/^-?\d+$/.test(inner)) return { kind: 'index', index: Number(inner) };
  const slice = /^(-?\d+)?:(-?\d+)?$/.exec(inner);
  if (slice) return { kind: 'slice', start: num(slice[1]), end: num(slice[2]) };
  if (/^["']/.test(inner)) return { kind: 'field', name: stringLiteral(source, inner, at) };
  const filter = /^\?\((.*)\)$/s.exec(inner);
  if (filter) {
    const m = /^(@[^=!<>]*?)\s*(==|!=|<=|>=|<|>)\s*(.+)$/s.exec(filter[1]!.trim());
    if (!m) return { kind: 'filter', path: parsePath(source, filter[1]!.trim(), at), op: undefined, literal: undefined };
    return { kind: 'filter', path: parsePath(source, m[1]!, at), op: m[2] as Op, literal: literal(source, m[3]!.trim(), at) };
  }
  return fail(source, at, `unsupported "[${inner}]" (supported: [n], [a:b], [*], ['name'], [?(@.x op literal)])`);
}

function num(s: string | undefined): number | undefined {
  return s === undefined ? undefined : Number(s);
}

function literal(source: string, text: string, at: number): unknown {
  if (/^["']/.test(text)) return stringLiteral(source, text, at);
  if (text === 'true' || text === 'false' || text === 'null') return JSON.parse(text) as unknown;
  if (/^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(text)) return Number(text);
  return fail(source, at, `a filter compares with a string, number, true, false or null, got "${text}"`);
}

/** Renders a template on a value. */
export function evalJsonPath(t: JsonPathTemplate, root: unknown): string {
  return render(t.nodes, root, root);
}

function render(nodes: Node[], root: unknown, current: unknown): string {
  let out = '';
  for (const n of nodes) {
    if (n.kind === 'text') out += n.text;
    else if (n.kind === 'path') out += select(n.path, root, current).map(show).join(' ');
    else {
      let items = select(n.path, root, current);
      // "{range .items}" means its elements, as "{range .items[*]}" does.
      if (items.length === 1 && Array.isArray(items[0])) items = items[0] as unknown[];
      for (const item of items) out += render(n.body, root, item);
    }
  }
  return out;
}

function show(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function select(path: Path, root: unknown, current: unknown): unknown[] {
  let nodes = [path.fromRoot ? root : current];
  for (const step of path.steps) nodes = nodes.flatMap((n) => apply(step, n, root));
  // undefined is "not there": a missing key prints nothing.
  return nodes.filter((n) => n !== undefined);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function children(v: unknown): unknown[] {
  return Array.isArray(v) ? v : isObject(v) ? Object.values(v) : [];
}

function apply(step: Step, node: unknown, root: unknown): unknown[] {
  switch (step.kind) {
    case 'field':
      return isObject(node) && Object.hasOwn(node, step.name) ? [node[step.name]] : [];
    case 'wildcard':
      return children(node);
    case 'index': {
      if (!Array.isArray(node)) return [];
      const i = step.index < 0 ? node.length + step.index : step.index;
      return i >= 0 && i < node.length ? [node[i]] : [];
    }
    case 'slice':
      return Array.isArray(node) ? node.slice(step.start, step.end) : [];
    case 'descend': {
      const out: unknown[] = [];
      const walk = (n: unknown) => {
        out.push(...apply(step.step, n, root));
        for (const c of children(n)) walk(c);
      };
      walk(node);
      return out;
    }
    case 'filter':
      return children(node).filter((c) => {
        const got = select(step.path, root, c);
        if (step.op === undefined) return got.length > 0 && got[0] !== null && got[0] !== false;
        return got.length > 0 && compare(got[0], step.op, step.literal);
      });
  }
}

function compare(a: unknown, op: Op, b: unknown): boolean {
  switch (op) {
    case '==':
      return a === b;
    case '!=':
      return a !== b;
    default: {
      if (!((typeof a === 'number' && typeof b === 'number') || (typeof a === 'string' && typeof b === 'string'))) return false;
      return op === '<' ? a < b : op === '<=' ? a <= b : op === '>' ? a > b : a >= b;
    }
  }
}
