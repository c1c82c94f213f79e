import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import anyTest, { type TestFn } from 'ava';
import { type HttpStack, startHttpStack } from '../helpers/httpStack.js';
import { teardownAndCheckLeaks } from '../helpers/leaks.js';

/**
 * The published packages as a user gets them: `npm pack` both
 * (packages/client, packages/queenctl), install the tarballs into a scratch
 * project OUTSIDE the repository (so nothing resolves from the repo's
 * node_modules), type-check an importer with tsc --noEmit, then run the seed's
 * example and the installed queenctl bin against a real server.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

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

test('the client tarball holds only built JS, declarations and the README, and depends on nothing', async (t) => {
  const project = join(t.context.dir, 'project');
  const pkgDir = join(project, 'node_modules', '@queen-ingress', 'client');
  const pkg = JSON.parse(await readFile(join(pkgDir, 'package.json'), 'utf8')) as Record<string, unknown>;
  t.is(pkg.dependencies, undefined);
  const listed = (await ok('find', ['.', '-type', 'f'], pkgDir)).split('\n').filter(Boolean).sort();
  t.true(listed.includes('./dist/index.js') && listed.includes('./dist/index.d.ts') && listed.includes('./README.md'), listed.join(' '));
  t.deepEqual(
    listed.filter((f) => !/^\.\/dist\/[a-z]+\.(js|d\.ts)$/.test(f) && f !== './README.md' && f !== './package.json'),
    [],
    'nothing but dist/*.js, dist/*.d.ts, README.md and package.json',
  );
  // Nothing in it imports a package: only relative modules and node: builtins.
  const imports = await ok('grep', ['-rhoE', `from '[^']+'`, 'dist'], pkgDir);
  const external = imports
    .split('\n')
    .filter(Boolean)
    .map((l) => l.slice(6, -1))
    .filter((s) => !s.startsWith('./') && !s.startsWith('node:'));
  t.deepEqual(external, []);
});

test('an importer type-checks against the installed declarations (tsc --noEmit), and wrong calls do not', async (t) => {
  const project = join(t.context.dir, 'project');
  await writeFile(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
      },
      files: ['check.ts'],
    }),
  );
  await writeFile(
    join(project, 'check.ts'),
    `import { Queen, QueenHttpError, type PushOutcome, type QueueList } from '@queen-ingress/client';
const client = new Queen({ url: 'http://127.0.0.1:6632', retries: 2 });
export async function example(): Promise<string> {
  const first: PushOutcome[] = await client.queue('payments').partition('customer-42')
    .push([{ transactionId: 'order-9137-paid', data: { orderId: 9137, amount: 99.5 } }]);
  const page: QueueList = await client.listQueues({ limit: 10 });
  // @ts-expect-error data is required
  await client.queue('payments').push([{ transactionId: 'x' }]);
  // @ts-expect-error transactionId is a string
  await client.queue('payments').push([{ transactionId: 42, data: 1 }]);
  const status: 'queued' | 'duplicate' | 'failed' = first[0]!.status;
  return status + page.queues.length + (new QueenHttpError(400, {}, 'GET', '/').code ?? '');
}
`,
  );
  const r = await run(process.execPath, [TSC, '-p', 'tsconfig.json'], project);
  t.is(r.code, 0, r.stdout + r.stderr);

  // The same check must fail when the types are wrong, or it proves nothing.
  await writeFile(join(project, 'check.ts'), `import { Queen } from '@queen-ingress/client';\nnew Queen({ url: 1 });\n`);
  const bad = await run(process.execPath, [TSC, '-p', 'tsconfig.json'], project);
  t.not(bad.code, 0);
  t.regex(bad.stdout, /check\.ts\(2,\d+\): error TS2322/);
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
