import { access, readFile } from 'node:fs/promises';
import test from 'ava';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '../../src/config.js';
import { buildInfo } from '../../src/telemetry/buildInfo.js';

/**
 * No Docker engine or registry is reachable here, so the image cannot be
 * built; this checks the Dockerfile as far as that allows: the base is pinned,
 * the final stage runs as a numeric non-root user matching the chart, it
 * carries a HEALTHCHECK on the chart's liveness path and OCI labels, it copies
 * only the built service, the migrations and production dependencies, and every
 * path it copies exists after `make build` and is not excluded by .dockerignore.
 */

const ROOT = new URL('../../../', import.meta.url);
const read = (p: string) => readFile(new URL(p, ROOT), 'utf8');

interface Instruction {
  op: string;
  args: string;
}

async function stages(): Promise<{ args: Map<string, string>; stages: Instruction[][] }> {
  const text = (await read('Dockerfile')).replace(/\\\n/g, ' ');
  const args = new Map<string, string>();
  const out: Instruction[][] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Z]+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const ins = { op: m[1]!, args: m[2]!.trim() };
    if (ins.op === 'FROM') out.push([]);
    if (ins.op === 'ARG' && out.length === 0) {
      const [k, v] = ins.args.split('=');
      args.set(k!, v ?? '');
    }
    out.at(-1)?.push(ins);
  }
  return { args, stages: out };
}

async function chartValues(): Promise<{
  podSecurityContext: { runAsUser: number; runAsGroup: number };
  probes: { liveness: { path: string } };
  http: { port: number };
}> {
  return parseYaml(await read('deploy/helm/queen-ingress/values.yaml'));
}

test('the base image is pinned to a Node 24 patch version (a digest may follow)', async (t) => {
  const { args, stages: all } = await stages();
  t.regex(args.get('NODE_IMAGE') ?? '', /^node:24\.\d+\.\d+-bookworm-slim(@sha256:[a-f0-9]{64})?$/);
  t.is(all.length, 2);
  for (const s of all) t.regex(s[0]!.args, /^\$\{NODE_IMAGE\}( AS \w+)?$/);
});

test('the image runs the Node that make pins for development and tests (deploy/local/node.sh)', async (t) => {
  const { args } = await stages();
  const pinned = /^NODE_VERSION=(\d+\.\d+\.\d+)$/m.exec(await read('deploy/local/node.sh'))?.[1];
  t.truthy(pinned);
  t.is(/^node:(\d+\.\d+\.\d+)-/.exec(args.get('NODE_IMAGE') ?? '')?.[1], pinned);
});

test('the final stage runs as the numeric non-root user the chart expects, with a HEALTHCHECK on its liveness path', async (t) => {
  const final = (await stages()).stages.at(-1)!;
  const values = await chartValues();
  const user = final.filter((i) => i.op === 'USER').at(-1)?.args ?? '';
  t.regex(user, /^\d+:\d+$/);
  const [uid, gid] = user.split(':').map(Number);
  t.not(uid, 0);
  t.is(uid, values.podSecurityContext.runAsUser);
  t.is(gid, values.podSecurityContext.runAsGroup);
  const health = final.find((i) => i.op === 'HEALTHCHECK')?.args ?? '';
  t.regex(health, /CMD \[/);
  t.true(health.includes(`'${values.probes.liveness.path}'`), health);
  t.true(health.includes(String(values.http.port)));
  t.true(final.some((i) => i.op === 'EXPOSE' && i.args === String(values.http.port)));
});

test('the final stage carries the OCI labels', async (t) => {
  const labels = (await stages()).stages
    .at(-1)!
    .filter((i) => i.op === 'LABEL')
    .map((i) => i.args)
    .join(' ');
  for (const key of ['title', 'description', 'version', 'revision', 'created', 'licenses', 'base.name']) {
    t.regex(labels, new RegExp(`org\\.opencontainers\\.image\\.${key.replace('.', '\\.')}="[^"]+"`), key);
  }
});

test('the image reports the commit it was built from: QUEEN_BUILD_COMMIT build arg -> env -> queen_build_info, and the revision label', async (t) => {
  const final = (await stages()).stages.at(-1)!;
  const args = final.filter((i) => i.op === 'ARG').map((i) => i.args);
  t.true(args.includes('QUEEN_BUILD_COMMIT=unknown'), args.join('; '));
  // The revision label defaults to the same build arg, so one --build-arg sets both.
  t.true(args.indexOf('REVISION=${QUEEN_BUILD_COMMIT}') > args.indexOf('QUEEN_BUILD_COMMIT=unknown'), args.join('; '));
  t.true(final.some((i) => i.op === 'ENV' && i.args === 'QUEEN_BUILD_COMMIT=${QUEEN_BUILD_COMMIT}'));
  t.regex(await read('Dockerfile'), /--build-arg QUEEN_BUILD_COMMIT="\$\(git rev-parse HEAD\)"/);
  // What the service does with that env: the image has no .git, so this is the only source of the commit.
  const commit = loadConfig({ QUEEN_BUILD_COMMIT: '0123456789abcdef0123456789abcdef01234567' }).buildCommit;
  t.is(buildInfo(commit).commit, '0123456789abcdef0123456789abcdef01234567');
});

test('the final stage copies only the built service, the migrations, the manifest and production dependencies', async (t) => {
  const { stages: all } = await stages();
  const copies = all
    .at(-1)!
    .filter((i) => i.op === 'COPY' || i.op === 'ADD')
    .map((i) => i.args);
  t.deepEqual(
    copies.sort(),
    ['--from=build /app/dist/src ./dist/src', '--from=build /app/node_modules ./node_modules', 'package.json ./', 'sql ./sql'].sort(),
  );
  // The build stage prunes dev dependencies before the final stage takes node_modules.
  const build = all[0]!.map((i) => i.args).join('\n');
  t.regex(build, /npm prune --omit=dev/);
  // migrate.ts finds the migrations at dist/src/engine/../../../sql, i.e. WORKDIR/sql.
  t.true(all.at(-1)!.some((i) => i.op === 'WORKDIR' && i.args === '/app'));
  t.regex(await read('src/engine/migrate.ts'), /new URL\('\.\.\/\.\.\/\.\.\/sql\/', import\.meta\.url\)/);
});

test('every path the Dockerfile copies from the context exists after the build and is not in .dockerignore', async (t) => {
  const { stages: all } = await stages();
  const ignored = (await read('.dockerignore')).split('\n').filter((l) => l && !l.startsWith('#'));
  const sources = all.flatMap((s) =>
    s.filter((i) => i.op === 'COPY' && !i.args.startsWith('--from')).flatMap((i) => i.args.split(/\s+/).slice(0, -1)),
  );
  t.deepEqual(sources.sort(), ['package-lock.json', 'package.json', 'package.json', 'sql', 'src', 'tsconfig.json'].sort());
  for (const src of sources) {
    await t.notThrowsAsync(access(new URL(src, ROOT)), src);
    t.false(ignored.includes(src), `${src} is excluded by .dockerignore`);
  }
  // What the final stage runs exists once tsc has built src/ (make build did).
  const cmd = all.at(-1)!.find((i) => i.op === 'CMD')!.args;
  t.is(cmd, '["node", "dist/src/main.js"]');
  await t.notThrowsAsync(access(new URL('dist/src/main.js', ROOT)));
});
