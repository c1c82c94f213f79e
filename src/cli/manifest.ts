import { isMap, isScalar, isSeq, LineCounter, parseAllDocuments, type Node, type Pair, type YAMLMap } from 'yaml';
import { ValidationError } from '../errors.js';
import { checkQueueName } from '../engine/limits.js';
import { QUEUE_OPTION_DEFAULTS, validateOptions, type QueueOptions } from '../engine/queueConfig.js';

/**
 * Reading `queenctl apply -f` files: multi-document YAML, or JSON (a JSON
 * text is a YAML document). A document is one Queue manifest, or a list of
 * them:
 *
 *   kind: Queue
 *   name: payments
 *   config:
 *     dedupWindowSeconds: 0
 *
 * Everything is checked before anything is applied, and every problem is
 * reported with file:line:column: unknown keys (top level and in config),
 * duplicate keys, wrong types, a queue named twice. Unknown keys are errors
 * rather than warnings because apply sends mode "replace": a misspelt option
 * would silently be reset to its default.
 */

export interface QueueManifest {
  name: string;
  /** Options as written; null means "the default" (which replace gives anyway). */
  config: Partial<Record<keyof QueueOptions, number | null>>;
  file: string;
  line: number;
}

export interface ManifestProblem {
  file: string;
  line: number;
  col: number;
  message: string;
}

export class ManifestError extends Error {
  constructor(readonly problems: ManifestProblem[]) {
    super(problems.map((p) => `${p.file}:${p.line}:${p.col}: ${p.message}`).join('\n'));
    this.name = 'ManifestError';
  }
}

const TOP_KEYS = ['kind', 'name', 'config'] as const;
export const OPTION_KEYS = Object.keys(QUEUE_OPTION_DEFAULTS) as (keyof QueueOptions)[];

export function parseManifests(text: string, file: string): QueueManifest[] {
  const lc = new LineCounter();
  const problems: ManifestProblem[] = [];
  const at = (offset: number | undefined, message: string) => {
    const p = lc.linePos(offset ?? 0);
    problems.push({ file, line: p.line, col: p.col, message });
  };
  const docs = parseAllDocuments(text, { uniqueKeys: true, lineCounter: lc, prettyErrors: true });
  const out: QueueManifest[] = [];
  for (const doc of Array.isArray(docs) ? docs : [docs]) {
    for (const e of doc.errors) {
      // yaml appends " at line L, column C:" and a source excerpt; we print our own position.
      const message = e.message.split(/ at line \d+, column \d+/)[0]!.trim();
      at(e.pos[0], e.code === 'DUPLICATE_KEY' ? `duplicate key "${keyAt(text, e.pos[0])}" (${message})` : message);
    }
    // A document that only repeats a key is still checked, so one run shows
    // every problem; after any other error its structure cannot be trusted.
    if (doc.errors.some((e) => e.code !== 'DUPLICATE_KEY')) continue;
    const root = doc.contents as Node | null;
    if (root === null || (isScalar(root) && root.value === null)) continue; // an empty document
    const nodes: unknown[] = isSeq(root) ? root.items : [root];
    for (const node of nodes) {
      const m = readManifest(node, file, at, lc);
      if (m) out.push(m);
    }
  }
  const seen = new Map<string, QueueManifest>();
  for (const m of out) {
    const first = seen.get(m.name);
    if (first) problems.push({ file, line: m.line, col: 1, message: `queue "${m.name}" is also defined at line ${first.line}` });
    else seen.set(m.name, m);
  }
  if (problems.length === 0 && out.length === 0)
    problems.push({ file, line: 1, col: 1, message: 'no manifests found (expected documents with kind: Queue)' });
  problems.sort((a, b) => a.line - b.line || a.col - b.col);
  if (problems.length > 0) throw new ManifestError(problems);
  return out;
}

type At = (offset: number | undefined, message: string) => void;

function readManifest(node: unknown, file: string, at: At, lc: LineCounter): QueueManifest | undefined {
  if (!isMap(node)) {
    at(startOf(node), 'a manifest must be a mapping with kind, name and config');
    return undefined;
  }
  let ok = true;
  const fail: At = (o, msg) => {
    ok = false;
    at(o, msg);
  };
  const pairs = keyedPairs(node, '', fail);
  for (const key of pairs.keys()) {
    if (!(TOP_KEYS as readonly string[]).includes(key))
      fail(startOf(pairs.get(key)!.key), `unknown key "${key}" (allowed: ${TOP_KEYS.join(', ')})`);
  }
  const kind = pairs.get('kind');
  if (!kind) fail(startOf(node), 'missing key "kind" (must be Queue)');
  else if (!isScalar(kind.value) || kind.value.value !== 'Queue') fail(startOf(kind.value ?? kind.key), 'kind must be Queue');

  const nameP = pairs.get('name');
  let name = '';
  if (!nameP) fail(startOf(node), 'missing key "name"');
  else {
    const v = isScalar(nameP.value) ? nameP.value.value : undefined;
    try {
      name = checkQueueName(v);
    } catch (err) {
      fail(startOf(nameP.value ?? nameP.key), `name: ${(err as Error).message}`);
    }
  }

  const config: QueueManifest['config'] = {};
  const configP = pairs.get('config');
  const cv = configP?.value;
  if (configP && cv !== null && !(isScalar(cv) && cv.value === null)) {
    if (!isMap(cv)) fail(startOf(cv ?? configP.key), 'config must be a mapping of queue options');
    else {
      for (const [key, pair] of keyedPairs(cv, 'config.', fail)) {
        if (!(OPTION_KEYS as string[]).includes(key)) {
          fail(startOf(pair.key), `unknown key "config.${key}" (known options: ${OPTION_KEYS.join(', ')})`);
          continue;
        }
        if (pair.value !== null && !isScalar(pair.value)) {
          fail(startOf(pair.value), `config.${key} must be a single value, not a ${isMap(pair.value) ? 'mapping' : 'list'}`);
          continue;
        }
        const value = pair.value === null ? null : pair.value.value;
        try {
          Object.assign(config, validateOptions({ [key]: value }));
        } catch (err) {
          if (!(err instanceof ValidationError)) throw err;
          fail(startOf(pair.value ?? pair.key), err.message.replace(/^options\./, 'config.'));
        }
      }
    }
  }
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- fail() above clears it from a callback
  if (!ok) return undefined;
  return { name, config, file, line: lc.linePos(startOf(node) ?? 0).line };
}

/** The map's pairs by key; non-string keys are reported. yaml already rejects duplicates. */
function keyedPairs(map: YAMLMap, prefix: string, fail: At): Map<string, Pair<Node, Node | null>> {
  const out = new Map<string, Pair<Node, Node | null>>();
  for (const pair of map.items as Pair<Node, Node | null>[]) {
    if (!isScalar(pair.key) || typeof pair.key.value !== 'string') {
      fail(startOf(pair.key), `${prefix ? `${prefix.slice(0, -1)}: ` : ''}keys must be strings`);
      continue;
    }
    out.set(pair.key.value, pair);
  }
  return out;
}

function startOf(node: unknown): number | undefined {
  const r = (node as { range?: [number, number, number] } | null)?.range;
  return r ? r[0] : undefined;
}

/** The key written at a duplicate-key error's offset ("name", or "\"name\"" in JSON). */
function keyAt(text: string, offset: number): string {
  const rest = text.slice(offset, !text.includes('\n', offset) ? undefined : text.indexOf('\n', offset));
  const m = /^\s*("(?:[^"\\]|\\.)*"|'[^']*'|[^:]+?)\s*:/.exec(rest);
  return m ? m[1]!.replace(/^["']|["']$/g, '') : rest.trim();
}
