import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import test from 'ava';
import type { CliIo } from '../../src/cli/io.js';
import { run, USAGE } from '../../src/cli/run.js';
import { QUEENCTL_VERSION } from '../../src/cli/version.js';

/** queenctl's offline commands: version, per-command help, shell completion. */

async function queenctl(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = { out: (t) => void (out += t), err: (t) => void (err += t), env: {}, read: async () => '' };
  const code = await run(args, io);
  return { code, out, err };
}

const COMMANDS = ['apply', 'get', 'push', 'pop', 'tail', 'timers', 'version', 'completion'];

test('version matches both package manifests, and -o json/yaml are structured', async (t) => {
  for (const file of ['../../../package.json', '../../../packages/queenctl/package.json']) {
    const pkg = JSON.parse(await readFile(new URL(file, import.meta.url), 'utf8')) as { version: string };
    t.is(pkg.version, QUEENCTL_VERSION, file);
  }
  t.deepEqual(await queenctl(['version']), { code: 0, out: `queenctl ${QUEENCTL_VERSION}\n`, err: '' });
  t.deepEqual(JSON.parse((await queenctl(['version', '-o', 'json'])).out), { queenctl: QUEENCTL_VERSION });
  t.is((await queenctl(['version', '-o', 'yaml'])).out, `queenctl: ${QUEENCTL_VERSION}\n`);
  t.is((await queenctl(['version', 'extra'])).code, 2);
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

function bashComplete(script: string, words: string[]): Promise<string[]> {
  const quoted = words.map((w) => `'${w}'`).join(' ');
  const program = `${script}\nCOMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _queenctl; printf '%s\\n' "\${COMPREPLY[@]}"`;
  return new Promise((resolve, reject) =>
    execFile('bash', ['--norc', '-c', program], (err, stdout, stderr) =>
      err ? reject(new Error(stderr)) : resolve(stdout.split('\n').filter(Boolean)),
    ),
  );
}

test('bash completion completes commands, get resources, -o formats and each command’s flags', async (t) => {
  const { code, out: script } = await queenctl(['completion', 'bash']);
  t.is(code, 0);
  t.deepEqual((await bashComplete(script, ['queenctl', ''])).sort(), [...COMMANDS, 'help'].sort());
  t.deepEqual(await bashComplete(script, ['queenctl', 'ge']), ['get']);
  t.deepEqual(await bashComplete(script, ['queenctl', '--server', 'http://x', 'ap']), ['apply']);
  t.deepEqual((await bashComplete(script, ['queenctl', 'get', ''])).sort(), ['messages', 'queue', 'queues']);
  t.deepEqual(await bashComplete(script, ['queenctl', 'get', 'queues', '-o', '']), ['table', 'json', 'yaml']);
  t.deepEqual(await bashComplete(script, ['queenctl', 'apply', '--d']), ['--dry-run']);
  t.deepEqual((await bashComplete(script, ['queenctl', 'push', 'q', '--p'])).sort(), ['--partition']);
  t.deepEqual(await bashComplete(script, ['queenctl', 'completion', '']), ['bash', 'zsh']);
});

test('zsh completion is the same function behind bashcompinit; an unknown shell is a usage error', async (t) => {
  const bash = (await queenctl(['completion', 'bash'])).out;
  const zsh = await queenctl(['completion', 'zsh']);
  t.is(zsh.code, 0);
  t.true(zsh.out.startsWith('#compdef queenctl\n'));
  t.regex(zsh.out, /^autoload -U \+X bashcompinit && bashcompinit$/m);
  t.true(zsh.out.endsWith(bash.split('\n').slice(1).join('\n')));
  t.is((await queenctl(['completion', 'fish'])).code, 2);
  t.is((await queenctl(['completion'])).code, 2);
});
