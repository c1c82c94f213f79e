import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import type { CliIo } from '../../src/cli/io.js';
import { run, USAGE } from '../../src/cli/run.js';
import { QUEENCTL_VERSION } from '../../src/cli/version.js';
import { fakeQueen } from '../helpers/fakeQueen.js';

/** queenctl's offline commands: version, per-command help, shell completion (queue names from a fake server). */

async function queenctl(args: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = { out: (t) => void (out += t), err: (t) => void (err += t), env, read: async () => '' };
  const code = await run(args, io);
  return { code, out, err };
}

const COMMANDS = ['apply', 'get', 'push', 'pop', 'tail', 'timers', 'dlq', 'version', 'completion'];

test('version --client matches both package manifests, and -o json/yaml/jsonpath are structured', async (t) => {
  for (const file of ['../../../package.json', '../../../packages/queenctl/package.json']) {
    const pkg = JSON.parse(await readFile(new URL(file, import.meta.url), 'utf8')) as { version: string };
    t.is(pkg.version, QUEENCTL_VERSION, file);
  }
  t.deepEqual(await queenctl(['version', '--client']), { code: 0, out: `queenctl ${QUEENCTL_VERSION}\n`, err: '' });
  t.deepEqual(JSON.parse((await queenctl(['version', '--client', '-o', 'json'])).out), { queenctl: QUEENCTL_VERSION });
  t.is((await queenctl(['version', '--client', '-o', 'yaml'])).out, `queenctl: ${QUEENCTL_VERSION}\n`);
  t.is((await queenctl(['version', '--client', '-o', 'jsonpath={.queenctl}'])).out, QUEENCTL_VERSION);
  t.is((await queenctl(['version', 'extra'])).code, 2);
  const noName = await queenctl(['version', '-o', 'name']);
  t.is(noName.code, 2);
  t.regex(noName.err, /version: -o must be table, json, yaml, jsonpath=TEMPLATE, got "name"/);
});

test("--version prints queenctl's version and asks no server; with a command it is a usage error", async (t) => {
  // No server listens on port 9: a request would fail the command.
  t.deepEqual(await queenctl(['--version', '--server', 'http://127.0.0.1:9']), { code: 0, out: `queenctl ${QUEENCTL_VERSION}\n`, err: '' });
  const withCommand = await queenctl(['get', 'queues', '--version']);
  t.is(withCommand.code, 2);
  t.regex(withCommand.err, /--version takes no command/);
  t.regex((await queenctl(['--help'])).out, /^ {2}--version {8}print queenctl's version$/m);
});

test("version prints the server's version and commit beside its own, from GET /api/v1/version with the token", async (t) => {
  const fake = await fakeQueen({ 'GET /api/v1/version': () => ({ body: { version: '9.8.7', commit: 'abc123def456' } }) });
  t.teardown(() => fake.close());
  const env = { QUEEN_URL: fake.url, QUEEN_TOKEN: 's3cret' };
  t.deepEqual(await queenctl(['version'], env), {
    code: 0,
    out: `queenctl ${QUEENCTL_VERSION}\nserver 9.8.7 (commit abc123def456)\n`,
    err: '',
  });
  t.is(fake.requests[0]!.authorization, 'Bearer s3cret');
  t.deepEqual(JSON.parse((await queenctl(['version', '-o', 'json'], env)).out), {
    queenctl: QUEENCTL_VERSION,
    server: { version: '9.8.7', commit: 'abc123def456' },
  });
  t.is((await queenctl(['version', '-o', 'jsonpath={.server.version}'], env)).out, '9.8.7');
  const before = fake.requests.length;
  await queenctl(['version', '--client'], env);
  t.is(fake.requests.length, before, '--client asks no server');
});

test('version without a server: its own version on stdout, the error on stderr, exit 1', async (t) => {
  const r = await queenctl(['version', '--server', 'http://127.0.0.1:9']);
  t.is(r.code, 1);
  t.is(r.out, `queenctl ${QUEENCTL_VERSION}\n`);
  t.regex(r.err, /cannot reach the server: GET \/api\/v1\/version/);
});

test('every command has its own help, by --help, -h and help COMMAND', async (t) => {
  for (const cmd of COMMANDS) {
    const a = await queenctl([cmd, '--help']);
    t.is(a.code, 0, cmd);
    t.true(a.out.startsWith(`usage: queenctl ${cmd}`), `${cmd}: ${a.out}`);
    t.not(a.out, USAGE);
    t.deepEqual(await queenctl([cmd, '-h']), a);
    t.deepEqual(await queenctl(['help', cmd]), a);
  }
  t.regex((await queenctl(['get', '--help'])).out, /get queues/);
  t.is((await queenctl(['help'])).out, USAGE);
  const unknown = await queenctl(['help', 'nope']);
  t.is(unknown.code, 2);
  t.regex(unknown.err, /no help for "nope"/);
});

const QUEENCTL_JS = fileURLToPath(new URL('../../src/cli/queenctl.js', import.meta.url));

/**
 * Runs the bash script as bash would on TAB: COMP_LINE/COMP_POINT and
 * COMP_WORDS (split at ":" and "=" too, as bash does) for `line`, then
 * _queenctl, with "queenctl" being this build.
 */
function bashComplete(script: string, line: string, env: Record<string, string> = {}): Promise<string[]> {
  const words = line.split(/(\s+|[:=])/).filter((w) => w.trim() !== '');
  if (/\s$/.test(line)) words.push('');
  const quoted = words.map((w) => `'${w}'`).join(' ');
  const program = [
    `queenctl() { '${process.execPath}' '${QUEENCTL_JS}' "$@"; }`,
    script,
    `COMP_LINE='${line}'; COMP_POINT=${line.length}; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _queenctl`,
    `printf '%s\\n' "\${COMPREPLY[@]}"`,
  ].join('\n');
  return new Promise((resolve, reject) =>
    execFile('bash', ['--norc', '-c', program], { env: { PATH: process.env.PATH ?? '', ...env } }, (err, stdout, stderr) =>
      err ? reject(new Error(stderr)) : resolve(stdout.split('\n').filter(Boolean)),
    ),
  );
}

const QUEUES = { queues: [{ queue: 'orders' }, { queue: 'orders-eu' }, { queue: 'payments' }] };

test('bash completion completes commands, get resources, verbs, -o formats and each command’s flags', async (t) => {
  const { code, out: script } = await queenctl(['completion', 'bash']);
  t.is(code, 0);
  t.deepEqual((await bashComplete(script, 'queenctl ')).sort(), [...COMMANDS, 'help'].sort());
  t.deepEqual(await bashComplete(script, 'queenctl ge'), ['get']);
  t.deepEqual(await bashComplete(script, 'queenctl --server http://127.0.0.1:9 ap'), ['apply']);
  t.deepEqual((await bashComplete(script, 'queenctl get ')).sort(), ['messages', 'queue', 'queues']);
  t.deepEqual(await bashComplete(script, 'queenctl get queues -o '), ['table', 'wide', 'name', 'json', 'yaml', 'jsonpath=']);
  t.deepEqual(await bashComplete(script, 'queenctl get queues -o j'), ['json', 'jsonpath=']);
  t.deepEqual(await bashComplete(script, 'queenctl apply --d'), ['--dry-run']);
  t.deepEqual((await bashComplete(script, 'queenctl push q --p')).sort(), ['--partition']);
  t.deepEqual(await bashComplete(script, 'queenctl completion '), ['bash', 'zsh', 'fish']);
  t.deepEqual(await bashComplete(script, 'queenctl timers '), ['list', 'schedule', 'peek', 'cancel']);
  t.deepEqual(await bashComplete(script, 'queenctl dlq '), ['list', 'requeue']);
  t.deepEqual(await bashComplete(script, 'queenctl -'), ['--server', '--token', '--help', '--version']);
  t.deepEqual(await bashComplete(script, 'queenctl version --c'), ['--client']);
  t.deepEqual(await bashComplete(script, 'queenctl push q --batch 5 --r'), ['--raw']);
});

test('bash completion asks the server for queue names, with the line’s --server and --token, and is quiet when there is none', async (t) => {
  const fake = await fakeQueen({ 'GET /api/v1/resources/queues': () => ({ body: QUEUES }) });
  t.teardown(() => fake.close());
  const { out: script } = await queenctl(['completion', 'bash']);
  const at = `--server ${fake.url} --token tk`;
  t.deepEqual(await bashComplete(script, `queenctl ${at} push `), ['orders', 'orders-eu', 'payments']);
  t.deepEqual(await bashComplete(script, `queenctl ${at} push or`), ['orders', 'orders-eu']);
  t.deepEqual(await bashComplete(script, `queenctl ${at} get queue p`), ['payments']);
  t.deepEqual(await bashComplete(script, `queenctl ${at} get messages --partition p1 or`), ['orders', 'orders-eu']);
  t.deepEqual(await bashComplete(script, `queenctl ${at} timers cancel pay`), ['payments']);
  t.deepEqual(await bashComplete(script, `queenctl ${at} dlq list o`), ['orders', 'orders-eu']);
  t.deepEqual(await bashComplete(script, `queenctl ${at} pop --group g o`), ['orders', 'orders-eu']);
  t.deepEqual(await bashComplete(script, `queenctl ${at} timers cancel payments `), [], 'a KEY is no queue');
  t.deepEqual(await bashComplete(script, `queenctl ${at} dlq requeue `), [], 'nor is a dead-letter ID');
  t.true(fake.requests.every((r) => r.authorization === 'Bearer tk'));
  // QUEEN_URL is used when the line names no --server.
  t.deepEqual(await bashComplete(script, 'queenctl tail pa', { QUEEN_URL: fake.url }), ['payments']);
  // No server: nothing offered, nothing printed into the user's line.
  t.deepEqual(await bashComplete(script, 'queenctl --server http://127.0.0.1:9 push '), []);
  const quiet = await queenctl(['__complete', '--server', 'http://127.0.0.1:9', 'push', '']);
  t.deepEqual(quiet, { code: 0, out: ':\n', err: '' });
  t.deepEqual(await queenctl(['__complete', '--server', 'not a url', 'push', '']), { code: 0, out: ':\n', err: '' });
});

test('__complete prints candidates, then a directive: ":files" after -f', async (t) => {
  t.deepEqual(await queenctl(['__complete', 'apply', '-f', '']), { code: 0, out: ':files\n', err: '' });
  t.deepEqual(await queenctl(['__complete', 'push', 'q', '--filename', 'x']), { code: 0, out: ':files\n', err: '' });
  t.deepEqual(await queenctl(['__complete', 'get', 'q']), { code: 0, out: 'queues\nqueue\n:\n', err: '' });
  t.deepEqual(await queenctl(['__complete', '--output=json', 'get', 'm']), { code: 0, out: 'messages\n:\n', err: '' });
  t.deepEqual(await queenctl(['__complete']), await queenctl(['__complete', '']));
  t.false((await queenctl(['help'])).out.includes('__complete'), 'hidden from the usage text');
});

test('zsh completion asks __complete for the words it offers; fish likewise; an unknown shell is a usage error', async (t) => {
  const zsh = await queenctl(['completion', 'zsh']);
  t.is(zsh.code, 0);
  t.true(zsh.out.startsWith('#compdef queenctl\n'));
  t.regex(zsh.out, /queenctl __complete "\$\{\(@\)words\[2,CURRENT\]\}"/);
  t.regex(zsh.out, /^ {2}compdef _queenctl queenctl$/m);

  const fish = await queenctl(['completion', 'fish']);
  t.is(fish.code, 0);
  t.regex(fish.out, /^function __queenctl_complete$/m);
  t.regex(fish.out, /queenctl __complete \$words\[2\.\.-1\] 2>\/dev\/null/);
  t.regex(fish.out, /__fish_complete_path/);
  t.regex(fish.out, /^complete -c queenctl -f -a '\(__queenctl_complete\)'$/m);

  t.is((await queenctl(['completion', 'tcsh'])).code, 2);
  t.is((await queenctl(['completion'])).code, 2);
  t.is((await queenctl(['completion', 'bash', 'zsh'])).code, 2);
});
