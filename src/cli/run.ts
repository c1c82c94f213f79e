import { parseArgs } from 'node:util';
import { Queen, QueenHttpError, QueenNetworkError } from '../client/index.js';
import { apply } from './commands/apply.js';
import { get, GET_RESOURCES } from './commands/get.js';
import { push } from './commands/push.js';
import { timers } from './commands/timers.js';
import { pop, tail } from './commands/consume.js';
import { bashCompletion, zshCompletion, type CompletionSpec } from './completion.js';
import { commandHelp } from './help.js';
import { QUEENCTL_VERSION } from './version.js';
import { DEFAULT_SERVER, readCliEnv } from './env.js';
import { CliError, EXIT, UsageError } from './errors.js';
import { structured, type OutputFormat } from './format.js';
import type { CliIo } from './io.js';

export const USAGE = `usage: queenctl [--server URL] [--token TOKEN] COMMAND

commands:
  apply -f FILE [--dry-run]                         configure queues from YAML/JSON manifests (mode: replace)
  get queues [-o table|json|yaml]                   list every queue
  get queue NAME [-o table|json|yaml]               show a queue's effective options
  push QUEUE [--partition P] [--txn ID] DATA        push one message; DATA is JSON
  timers list QUEUE [--limit N]                     pending timers in due order
  timers schedule QUEUE KEY (--delay 30m | --at TIME) [--partition P] [--txn ID] DATA
                                                    schedule or reschedule a timer; DATA is JSON
  timers peek QUEUE KEY                             show a pending timer
  timers cancel QUEUE KEY                           cancel; "absent" = no longer pending (maybe delivered)
  pop QUEUE [--group G] [--partition P] [--batch N] [--wait] [--ack]
                                                    pop (leased) and print; --ack acks them
  tail QUEUE [--group G] [--max N]                  follow new messages (Ctrl-C stops)
  get messages QUEUE [--partition P] [--from N] [--limit N]
                                                    browse a partition's messages (no cursor moves)
  version [-o table|json|yaml]                      print queenctl's version
  completion bash|zsh                               print a shell completion script
  help [COMMAND]                                    this text, or a command's own (also: COMMAND --help)

options:
  --server URL     broker URL (env QUEEN_URL, default ${DEFAULT_SERVER})
  --token TOKEN    bearer token (env QUEEN_TOKEN; preferred, flags show in ps)
  -h, --help       this text

exit codes: 0 ok, 1 error, 2 usage
`;

const NO_COMMAND = 'no command given';

/** Which options each command accepts (the rest are usage errors). */
const ALLOWED: Record<string, string[]> = {
  apply: ['filename', 'dry-run'],
  get: ['output', 'partition', 'from', 'limit'],
  push: ['partition', 'txn', 'output'],
  timers: ['partition', 'txn', 'delay', 'at', 'limit', 'output'],
  pop: ['group', 'partition', 'batch', 'wait', 'ack', 'output'],
  tail: ['group', 'max', 'output'],
  version: ['output'],
  completion: [],
};

const GLOBAL_FLAGS = ['server', 'token'];

/** Runs one queenctl invocation and returns its exit code; never throws. */
export async function run(argv: string[], io: CliIo): Promise<number> {
  try {
    let parsed;
    try {
      parsed = parseArgs({
        args: argv,
        allowPositionals: true,
        strict: true,
        options: {
          server: { type: 'string' },
          token: { type: 'string' },
          filename: { type: 'string', short: 'f' },
          'dry-run': { type: 'boolean' },
          output: { type: 'string', short: 'o' },
          partition: { type: 'string' },
          txn: { type: 'string' },
          delay: { type: 'string' },
          at: { type: 'string' },
          group: { type: 'string' },
          batch: { type: 'string' },
          wait: { type: 'boolean' },
          ack: { type: 'boolean' },
          max: { type: 'string' },
          from: { type: 'string' },
          limit: { type: 'string' },
          help: { type: 'boolean', short: 'h' },
        },
      });
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    const { values, positionals } = parsed;
    const [command, ...args] = positionals;
    if (values.help || command === 'help') {
      const topic = command === 'help' ? args[0] : command;
      if (topic === undefined) io.out(USAGE);
      else io.out(commandHelp(topic, USAGE, Object.keys(ALLOWED)) ?? usageError(`no help for "${topic}": not a command`));
      return EXIT.ok;
    }
    if (!command) throw new UsageError(NO_COMMAND);
    const allowed = ALLOWED[command];
    if (!allowed) throw new UsageError(`unknown command "${command}"`);
    for (const key of Object.keys(values)) {
      if (![...GLOBAL_FLAGS, ...allowed].includes(key)) throw new UsageError(`${command} does not take --${key}`);
    }
    const format = (values.output ?? 'table') as OutputFormat;
    if (!['table', 'json', 'yaml'].includes(format)) throw new UsageError(`-o must be table, json or yaml, got "${values.output}"`);

    // Commands that never talk to a server.
    if (command === 'version') {
      if (args.length > 0) throw new UsageError('version takes no arguments');
      io.out(format === 'table' ? `queenctl ${QUEENCTL_VERSION}\n` : structured({ queenctl: QUEENCTL_VERSION }, format));
      return EXIT.ok;
    }
    if (command === 'completion') {
      const spec: CompletionSpec = { commands: ALLOWED, globalFlags: GLOBAL_FLAGS, getResources: GET_RESOURCES };
      const [shell, ...more] = args;
      if (more.length > 0 || (shell !== 'bash' && shell !== 'zsh')) throw new UsageError('completion needs one shell: bash or zsh');
      io.out(shell === 'bash' ? bashCompletion(spec) : zshCompletion(spec));
      return EXIT.ok;
    }

    const env = readCliEnv(io.env);
    const server = values.server ?? env.server ?? DEFAULT_SERVER;
    try {
      new URL(server);
    } catch {
      throw new UsageError(`--server / QUEEN_URL must be a URL, got "${server}"`);
    }
    // A command-line tool should give up quickly: a few retries, short timeouts.
    const client = new Queen({ url: server, token: values.token ?? env.token, retries: 3, maxDelayMs: 2_000, timeoutMs: 15_000 });

    switch (command) {
      case 'apply':
        if (args.length > 0) throw new UsageError(`apply takes no arguments besides -f FILE, got "${args.join(' ')}"`);
        await apply(client, io, values.filename, values['dry-run'] ?? false);
        break;
      case 'get':
        await get(client, io, args, format, { partition: values.partition, from: values.from, limit: values.limit });
        break;
      case 'pop':
        await pop(
          client,
          io,
          args,
          { group: values.group, partition: values.partition, batch: values.batch, ack: values.ack ?? false, wait: values.wait ?? false },
          format,
        );
        break;
      case 'tail':
        await tail(client, io, args, { group: values.group, max: values.max }, format);
        break;
      case 'push':
        await push(client, io, args, { partition: values.partition, txn: values.txn }, format);
        break;
      case 'timers':
        await timers(
          client,
          io,
          args,
          { partition: values.partition, txn: values.txn, delay: values.delay, at: values.at, limit: values.limit },
          format,
        );
        break;
    }
    return EXIT.ok;
  } catch (err) {
    return report(err, io);
  }
}

function usageError(message: string): never {
  throw new UsageError(message);
}

function report(err: unknown, io: CliIo): number {
  if (err instanceof UsageError) {
    io.err(
      err.message === NO_COMMAND ? `queenctl: ${err.message}\n\n${USAGE}` : `queenctl: ${err.message}\nRun "queenctl --help" for usage.\n`,
    );
    return EXIT.usage;
  }
  if (err instanceof CliError) io.err(`queenctl: error: ${err.message}\n`);
  else if (err instanceof QueenHttpError) io.err(`queenctl: error: the server refused: ${serverMessage(err)}\n`);
  else if (err instanceof QueenNetworkError) io.err(`queenctl: error: cannot reach the server: ${err.message}\n`);
  else io.err(`queenctl: error: ${(err as Error | null | undefined)?.stack ?? String(err)}\n`);
  return EXIT.error;
}

function serverMessage(err: QueenHttpError): string {
  const b = err.body as { message?: unknown } | undefined;
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- the body of a non-JSON error answer is a string; an object without a message is shown as it is
  const msg = typeof b?.message === 'string' ? b.message : String(err.body ?? '');
  return `${msg} (HTTP ${err.status} on ${err.method} ${err.path})`;
}
