import { readdir, readFile } from 'node:fs/promises';
import { loadFunctionFiles, loadMigrations, SQL_DIR } from '../../src/engine/migrate.js';

/**
 * Reads sql/functions/*.sql the way the layout checks need it
 * (docs/sql-layout.md): each file's statements with comments and quoted text
 * taken out, the functions it defines with their bodies, and the functions
 * it marks as rolling-upgrade predecessors.
 */

export interface FileFunction {
  file: string;
  name: string;
  /** The text between the dollar quotes: what pg_proc.prosrc holds once applied. */
  body: string;
}

export interface ParsedFunctionFile {
  file: string;
  /** Statements with comments removed and quoted text replaced by a placeholder, trimmed. */
  statements: string[];
  functions: FileFunction[];
  /** Names after `-- rolling-upgrade predecessor: queen.<name>` lines. */
  predecessors: string[];
}

/** Splits SQL into statements, skipping `--` comments, 'strings' and $tag$ bodies$tag$. */
export function splitSql(sql: string): { text: string; quoted: string[] }[] {
  const out: { text: string; quoted: string[] }[] = [];
  let text = '';
  let quoted: string[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    if (c === '-' && sql[i + 1] === '-') {
      const nl = sql.indexOf('\n', i);
      i = nl < 0 ? sql.length : nl;
    } else if (c === "'") {
      let j = i + 1;
      for (;;) {
        j = sql.indexOf("'", j);
        if (j < 0) throw new Error('unterminated string');
        if (sql[j + 1] === "'") j += 2;
        else break;
      }
      text += "''";
      i = j + 1;
    } else if (c === '$' && /^\$[a-z_]*\$/i.test(sql.slice(i))) {
      const tag = /^\$[a-z_]*\$/i.exec(sql.slice(i))![0];
      const end = sql.indexOf(tag, i + tag.length);
      if (end < 0) throw new Error(`unterminated ${tag} body`);
      quoted.push(sql.slice(i + tag.length, end));
      text += '$$';
      i = end + tag.length;
    } else if (c === ';') {
      if (text.trim()) out.push({ text: text.trim(), quoted });
      text = '';
      quoted = [];
      i++;
    } else {
      text += c;
      i++;
    }
  }
  if (text.trim()) out.push({ text: text.trim(), quoted });
  return out;
}

export function parseFunctionFile(file: string, sql: string): ParsedFunctionFile {
  const statements = splitSql(sql);
  const functions: FileFunction[] = [];
  for (const s of statements) {
    const m = /^CREATE\s+OR\s+REPLACE\s+FUNCTION\s+queen\.([a-z0-9_]+)\s*\(/i.exec(s.text);
    if (m) functions.push({ file, name: m[1]!, body: s.quoted[0] ?? '' });
  }
  const predecessors = [...sql.matchAll(/^-- rolling-upgrade predecessor: queen\.([a-z0-9_]+)\s*$/gm)].map((m) => m[1]!);
  return { file, statements: statements.map((s) => s.text), functions, predecessors };
}

export async function parseFunctionFiles(): Promise<ParsedFunctionFile[]> {
  return (await loadFunctionFiles()).map((f) => parseFunctionFile(`${f.name}.sql`, f.sql));
}

/** Every function a numbered migration drops (DROP FUNCTION [IF EXISTS] queen.name ...). */
export async function droppedByMigrations(): Promise<{ version: number; name: string }[]> {
  const out: { version: number; name: string }[] = [];
  for (const m of await loadMigrations()) {
    for (const s of splitSql(m.sql)) {
      const d = /^DROP\s+FUNCTION\s+(?:IF\s+EXISTS\s+)?queen\.([a-z0-9_]+)/i.exec(s.text);
      if (d) out.push({ version: m.version, name: d[1]! });
    }
  }
  return out;
}

/** The text of every .ts file under src/ (the code whose calls decide which versions live). */
export async function sourceTexts(): Promise<{ path: string; text: string }[]> {
  const root = `${SQL_DIR}../src/`;
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  const files = entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => `${e.parentPath}/${e.name}`);
  return Promise.all(files.map(async (path) => ({ path, text: await readFile(path, 'utf8') })));
}
