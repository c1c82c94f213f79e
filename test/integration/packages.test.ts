import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import anyTest, { type TestFn } from 'ava';
import { CONSUMER_OPTIONS, NO_NODE_GLOBALS, SCENARIO, TYPE_CHECK, WRONG_CALL } from '../helpers/clientConsumers.js';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * The published packages as a user gets them: `npm pack` both
 * (packages/client, packages/queenctl), install the tarballs into a scratch
 * project OUTSIDE the repository (so nothing resolves from the repo's
 * node_modules), type-check ES module and CommonJS importers with tsc, then
 * run both formats, the seed's example and the installed queenctl bin against
 * a real server.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const CLIENT_DIR = join('node_modules', '@queen-ingress', 'client');

interface Ctx extends HttpStack {
  dir: string;
}
const test = anyTest as TestFn<Ctx>;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env: { ...process.env, ...env }, timeout: 240_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}

async function ok(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<string> {
  const r = await run(cmd, args, cwd, env);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/**
 * A consumer project of its own (a folder of the scratch project, so it sees
 * the installed packages): writes the sources and a tsconfig naming them,
 * runs tsc with --listFiles, and answers its result and which of the client
 * package's declaration files it read, relative to the package.
 */
async function tsc(
  t: { context: Ctx },
  name: string,
  sources: Record<string, string>,
  options: Record<string, unknown> = {},
): Promise<Run & { declarations: string[] }> {
  const dir = join(t.context.dir, 'project', name);
  await mkdir(dir, { recursive: true });
  for (const [file, text] of Object.entries(sources)) await writeFile(join(dir, file), text);
  await writeFile(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { ...CONSUMER_OPTIONS, noEmit: true, ...options, listFiles: true }, files: Object.keys(sources) }),
  );
  const r = await run(process.execPath, [TSC, '-p', 'tsconfig.json'], dir);
  const marker = `/${CLIENT_DIR.split('\\').join('/')}/`;
  const declarations = r.stdout
    .split('\n')
    .filter((l) => l.includes(marker))
    .map((l) => l.slice(l.indexOf(marker) + marker.length).trim())
    .sort();
  return { ...r, declarations };
}

test.before(async (t) => {
  const stack = await startHttpStack('packages');
  const dir = await mkdtemp(join(tmpdir(), 'queen-packages-'));
  t.context = { ...stack, dir };

  // prepack builds each package from src/ first, so the tarballs are never stale.
  const tarballs = join(dir, 'tarballs');
  await mkdir(tarballs);
  for (const pkg of ['client', 'queenctl']) {
    await ok('npm', ['pack', '--pack-destination', tarballs, '--loglevel=error', `./packages/${pkg}`], ROOT);
  }
  const files = (await readdir(tarballs)).sort();
  const client = files.find((f) => f.startsWith('queen-ingress-client-'));
  const cli = files.find((f) => f.startsWith('queen-ingress-queenctl-'));
  if (!client || !cli) throw new Error(`npm pack made ${files.join(', ')}`);

  const project = join(dir, 'project');
  await mkdir(project);
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }));
  // @types/node: what any TypeScript-on-Node project has; the version ours pins, so the npm cache serves it.
  const ours = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
  await ok(
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      '--loglevel=error',
      join(tarballs, client),
      join(tarballs, cli),
      `@types/node@${ours.devDependencies['@types/node']!}`,
    ],
    project,
  );
});

teardownAndCheckLeaks(test, async (t) => {
  await t.context.stop?.();
  if (t.context.dir) await rm(t.context.dir, { recursive: true, force: true });
});

test('the client tarball holds the ESM and CommonJS builds with their declarations, README and LICENSE, and depends on nothing', async (t) => {
  const pkgDir = join(t.context.dir, 'project', CLIENT_DIR);
  const pkg = JSON.parse(await readFile(join(pkgDir, 'package.json'), 'utf8')) as Record<string, unknown>;
  t.is(pkg.dependencies, undefined);
  const listed = (await ok('find', ['.', '-type', 'f'], pkgDir)).split('\n').filter(Boolean).sort();
  t.deepEqual(
    listed.filter(
      (f) =>
        !/^\.\/dist\/(cjs\/)?[a-zA-Z]+\.(js|d\.ts)$/.test(f) &&
        !['./dist/cjs/package.json', './README.md', './LICENSE', './package.json'].includes(f),
    ),
    [],
    'nothing but dist/*.js|.d.ts, dist/cjs/*.js|.d.ts, dist/cjs/package.json, README.md, LICENSE and package.json',
  );
  // The two builds hold the same modules, each with its declarations.
  const esm = listed.filter((f) => /^\.\/dist\/[a-zA-Z]+\.(js|d\.ts)$/.test(f)).map((f) => f.slice('./dist/'.length));
  const cjs = listed.filter((f) => /^\.\/dist\/cjs\/[a-zA-Z]+\.(js|d\.ts)$/.test(f)).map((f) => f.slice('./dist/cjs/'.length));
  t.true(esm.includes('index.js') && esm.includes('index.d.ts'), esm.join(' '));
  t.deepEqual(cjs, esm);
  // The marker that makes Node load dist/cjs/*.js, and TypeScript read dist/cjs/*.d.ts, as CommonJS.
  t.deepEqual(JSON.parse(await readFile(join(pkgDir, 'dist', 'cjs', 'package.json'), 'utf8')), { type: 'commonjs' });
  t.regex(await readFile(join(pkgDir, 'dist', 'cjs', 'index.js'), 'utf8'), /require\("\.\/queen\.js"\)/);
  // Nothing in it imports a package: only relative modules and node: builtins, in either build.
  const imports = await ok('grep', ['-rhoE', `from '[^']+'|require\\("[^"]+"\\)`, 'dist'], pkgDir);
  const external = imports
    .split('\n')
    .filter(Boolean)
    .map((l) => (l.startsWith('from') ? l.slice(6, -1) : l.slice(9, -2)))
    .filter((s) => !s.startsWith('./') && !s.startsWith('node:'));
  t.deepEqual(external, []);
});

test('both packages carry publishable metadata: Apache-2.0 with its LICENSE, repository, files, public provenance publishing', async (t) => {
  for (const name of ['client', 'queenctl']) {
    const pkgDir = join(t.context.dir, 'project', 'node_modules', '@queen-ingress', name);
    const pkg = JSON.parse(await readFile(join(pkgDir, 'package.json'), 'utf8')) as {
      license: string;
      repository: { type: string; url: string; directory: string };
      homepage: string;
      bugs: { url: string };
      files: string[];
      publishConfig: Record<string, unknown>;
    };
    t.is(pkg.license, 'Apache-2.0', name);
    t.regex(await readFile(join(pkgDir, 'LICENSE'), 'utf8'), /^\s*Apache License\s+Version 2\.0, January 2004/, name);
    t.is(pkg.repository.type, 'git', name);
    t.regex(pkg.repository.url, /^git\+https:\/\/.+\.git$/, name);
    t.is(pkg.repository.directory, `packages/${name}`);
    t.regex(pkg.homepage, /^https:\/\//, name);
    t.regex(pkg.bugs.url, /^https:\/\//, name);
    t.true(pkg.files.includes('LICENSE'), name);
    // npm publish --provenance needs a public package and the repository above.
    t.deepEqual(pkg.publishConfig, { access: 'public', provenance: true }, name);
  }
});

test('the exports map: import gets the ES module build, require the CommonJS one, each with its own declarations', async (t) => {
  const pkg = JSON.parse(await readFile(join(t.context.dir, 'project', CLIENT_DIR, 'package.json'), 'utf8')) as { exports: unknown };
  t.deepEqual(pkg.exports, {
    '.': {
      import: { types: './dist/index.d.ts', default: './dist/index.js' },
      require: { types: './dist/cjs/index.d.ts', default: './dist/cjs/index.js' },
    },
    './package.json': './package.json',
  });
});

test('an ES module importer type-checks against the ESM declarations (tsc, nodenext), and wrong calls do not', async (t) => {
  const r = await tsc(t, 'esm-check', { 'check.mts': TYPE_CHECK });
  t.is(r.code, 0, r.stdout + r.stderr);
  t.true(r.declarations.includes('dist/index.d.ts'), r.declarations.join(' '));
  t.deepEqual(
    r.declarations.filter((f) => !/^dist\/[a-zA-Z]+\.d\.ts$/.test(f)),
    [],
  );

  // The same check must fail when the types are wrong, or it proves nothing
  // (skipLibCheck: only the importer's error matters here, and it is faster).
  const bad = await tsc(t, 'esm-wrong', { 'check.mts': WRONG_CALL }, { skipLibCheck: true });
  t.not(bad.code, 0);
  t.regex(bad.stdout, /check\.mts\(2,\d+\): error TS2322/);
});

test('a CommonJS importer type-checks against the CommonJS declarations (tsc, nodenext), and wrong calls do not', async (t) => {
  // tsc accepts a CommonJS file importing an ES module under nodenext (it
  // allows require() of ESM), so exit 0 alone did not catch the old
  // import-only map, whose "types" served require() too while Node refused
  // it. Which declarations tsc read does: they must be the ones beside what
  // require() loads.
  const r = await tsc(t, 'cjs-check', { 'check.cts': TYPE_CHECK });
  t.is(r.code, 0, r.stdout + r.stderr);
  t.true(r.declarations.includes('dist/cjs/index.d.ts'), r.declarations.join(' '));
  t.deepEqual(
    r.declarations.filter((f) => !/^dist\/cjs\/[a-zA-Z]+\.d\.ts$/.test(f)),
    [],
    'the CommonJS importer read only dist/cjs declarations',
  );

  const bad = await tsc(t, 'cjs-wrong', { 'check.cts': WRONG_CALL }, { skipLibCheck: true });
  t.not(bad.code, 0);
  t.regex(bad.stdout, /check\.cts\(2,\d+\): error TS2322/);
});

test('the declarations need @types/node or the DOM lib for fetch and AbortSignal, as the README says', async (t) => {
  // types: ["node"] is CONSUMER_OPTIONS' own: the two checks above.
  const bare = await tsc(t, 'types-none', { 'check.mts': NO_NODE_GLOBALS }, { types: [], lib: ['ES2022'] });
  t.not(bare.code, 0);
  t.regex(bare.stdout, /@queen-ingress\/client\/dist\/[a-zA-Z]+\.d\.ts\(\d+,\d+\): error TS2304: Cannot find name 'AbortSignal'/);
  const dom = await tsc(t, 'types-dom', { 'check.mts': NO_NODE_GLOBALS }, { types: [], lib: ['ES2022', 'DOM'] });
  t.is(dom.code, 0, dom.stdout + dom.stderr);
});

test('every TypeScript example of the installed README type-checks, and together they show consume, pop, ack, transactions and timers', async (t) => {
  const readme = await readFile(join(t.context.dir, 'project', CLIENT_DIR, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  t.true(blocks.length >= 5, `${blocks.length} ts blocks`);
  const all = blocks.join('\n');
  for (const call of [/\.consume\(/, /\.pop\(/, /client\.ack\(/, /\.transaction\(\)[\s\S]*?\.commit\(\)/, /\.timer\(/, /\.schedule\(\)/]) {
    t.regex(all, call);
  }
  // Each block is a module of its own (top-level await, as in the README).
  const r = await tsc(t, 'readme', Object.fromEntries(blocks.map((b, i) => [`example-${i + 1}.mts`, b])));
  t.is(r.code, 0, r.stdout + r.stderr);
});

test('the tarball runs from ES modules and from CommonJS (tsc nodenext output) against a real server: push, pop, ack, transaction, consume, timers', async (t) => {
  const dir = join(t.context.dir, 'project', 'scenario');
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'scenario.mts'), SCENARIO);
  await writeFile(join(dir, 'scenario.cts'), SCENARIO);
  await writeFile(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { ...CONSUMER_OPTIONS, outDir: 'out' }, files: ['scenario.mts', 'scenario.cts'] }),
  );
  await ok(process.execPath, [TSC, '-p', 'tsconfig.json'], dir);
  // What tsc emitted is what each format runs: an import, and a require().
  t.regex(await readFile(join(dir, 'out', 'scenario.mjs'), 'utf8'), /^import \{[^}]+\} from '@queen-ingress\/client';$/m);
  t.regex(await readFile(join(dir, 'out', 'scenario.cjs'), 'utf8'), /require\("@queen-ingress\/client"\)/);

  const [esm, cjs] = await Promise.all(
    [
      ['esm', 'scenario.mjs'],
      ['cjs', 'scenario.cjs'],
    ].map(async ([prefix, file]) =>
      JSON.parse(await ok(process.execPath, [join('out', file!)], dir, { QUEEN_URL: t.context.api.url, PREFIX: prefix! })),
    ),
  );
  for (const [format, out] of [
    ['esm', esm],
    ['cjs', cjs],
  ] as const) {
    t.deepEqual(
      out,
      {
        push: { first: 'queued', retry: 'duplicate', sameId: true },
        pop: { popped: [1, 2], acked: ['acked'], failed: ['released'], again: [2], settled: ['acked'], drained: 0 },
        transaction: { pushes: ['queued'], acks: ['acked'], shipment: { order: { orderId: 1 } }, shipmentTxn: 'ship:o-1', ordersLeft: 0 },
        consume: { seen: ['a', 'b', 'c'], eventsLeft: 0 },
        timers: {
          scheduled: 'scheduled',
          rescheduled: 'rescheduled',
          sameMessageId: true,
          pending: { status: 'pending', partition: 'customer-42', payload: { orderId: 9137, reminder: 2 } },
          listed: ['order-9137'],
          cancelled: 'cancelled',
          gone: null,
        },
        httpError: { instance: true, status: 404 },
      },
      format,
    );
  }
});

test("the seed's example runs from the installed package against a real server: the retry is a duplicate of the first push", async (t) => {
  const project = join(t.context.dir, 'project');
  await writeFile(
    join(project, 'run.mjs'),
    `import { Queen } from '@queen-ingress/client';
const client = new Queen({ url: process.env.QUEEN_URL });
const first = await client.queue('payments').partition('customer-42')
  .push([{ transactionId: 'order-9137-paid', data: { orderId: 9137, amount: 99.5 } }]);
const retry = await client.queue('payments').partition('customer-42')
  .push([{ transactionId: 'order-9137-paid', data: { orderId: 9137, amount: 99.5 } }]);
console.log(JSON.stringify({ first, retry }));
`,
  );
  const out = JSON.parse(await ok(process.execPath, ['run.mjs'], project, { QUEEN_URL: t.context.api.url })) as {
    first: { status: string; id: string }[];
    retry: { status: string; id: string }[];
  };
  t.is(out.first[0]!.status, 'queued');
  t.is(out.retry[0]!.status, 'duplicate');
  t.is(out.retry[0]!.id, out.first[0]!.id);
  // One message stored: the partition's allocator handed out offset 0 only.
  const rows = await t.context.sql.query(
    "SELECT p.last_offset::int AS last FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'payments' AND p.name = 'customer-42'",
  );
  t.deepEqual(rows.rows, [{ last: 0 }]);
});

test('the installed queenctl bin: version, and get queues -o json against the real server', async (t) => {
  const project = join(t.context.dir, 'project');
  const bin = join(project, 'node_modules', '.bin', 'queenctl');
  t.is((await ok(bin, ['version', '--client'], project)).trim(), 'queenctl 0.1.0');
  await t.context.client.queue('pkg-listed').configure({ dedupWindowSeconds: 60 });
  const listed = JSON.parse(await ok(bin, ['get', 'queues', '-o', 'json', '--server', t.context.api.url], project)) as {
    queues: { queue: string; options: { dedupWindowSeconds: number } }[];
  };
  const mine = listed.queues.find((q) => q.queue === 'pkg-listed');
  t.is(mine?.options.dedupWindowSeconds, 60);
});
