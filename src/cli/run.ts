import { parseArgs } from 'node:util';
import { Queen, QueenHttpError, QueenNetworkError } from '../client/index.js';
import { apply } from './commands/apply.js';
import { allQueues, get, GET_RESOURCES } from './commands/get.js';
import { push } from './commands/push.js';
import { timers } from './commands/timers.js';
import { pop, tail } from './commands/consume.js';
import { dlq, DLQ_VERBS } from './commands/dlq.js';
import { version } from './commands/version.js';
import { bashCompletion, complete, completionOutput, fishCompletion, zshCompletion, type CompletionSpec } from './completion.js';
import { commandHelp } from './help.js';
import { QUEENCTL_VERSION } from './version.js';
import { DEFAULT_SERVER, readCliEnv } from './env.js';
import { CliError, EXIT, serverMessage, UsageError } from './errors.js';
import { OUTPUT_FORMATS, parseOutput } from './format.js';
import type { CliIo } from './io.js';

export const USAGE = `usage: queenctl [--server URL] [--token TOKEN] COMMAND

commands:
  apply -f FILE [--dry-run]                         configure queues from YAML/JSON manifests (mode: replace)
  get queues [-o FORMAT]                            list every queue
  get queue NAME [-o FORMAT]                        show a queue's effective options
  push QUEUE [--partition P] [--txn ID] DATA        push one message; DATA is JSON
  push QUEUE - [-K SEP] [--raw] [--batch N]         push one message per line of standard input (or -f FILE)
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
  dlq list QUEUE [--group G] [--after ID] [--limit N]
                                                    a queue's dead letters
  dlq requeue ID...                                 push a copy of each dead letter to its partition
  version [--client]                                print queenctl's version and the server's
  completion bash|zsh|fish                          print a shell completion script
  help [COMMAND]                                    this text, or a command's own (also: COMMAND --help)

options:
  --server URL     broker URL (env QUEEN_URL, default ${DEFAULT_SERVER})
  --token TOKEN    bearer token (env QUEEN_TOKEN; preferred, flags show in ps)
  -o FORMAT        table (default), wide, name, json, yaml or jsonpath=TEMPLATE
  -h, --help       this text
  --version        print queenctl's version

exit codes: 0 ok, 1 error, 2 usage
`;

const NO_COMMAND = 'no command given';

/** Every option of every command; ALLOWED says which command takes which. */
const OPTIONS = {
  server: { type: 'string' },
  token: { type: 'string' },
  filename: { type: 'string', short: 'f' },
  'dry-run': { type: 'boolean' },
  output: { type: 'string', short: 'o' },
  partition: { type: 'string' },
  txn: { type: 'string' },
  'txn-delimiter': { type: 'string', short: 'K' },
  raw: { type: 'boolean' },
  delay: { type: 'string' },
  at: { type: 'string' },
  group: { type: 'string' },
  batch: { type: 'string' },
  wait: { type: 'boolean' },
  ack: { type: 'boolean' },
  max: { type: 'string' },
  from: { type: 'string' },
  after: { type: 'string' },
  limit: { type: 'string' },
  client: { type: 'boolean' },
  version: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Which options each command accepts (the rest are usage errors). */
const ALLOWED: Record<string, string[]> = {
  apply: ['filename', 'dry-run'],
  get: ['output', 'partition', 'from', 'limit'],
  push: ['partition', 'txn', 'filename', 'txn-delimiter', 'raw', 'batch', 'output'],
  timers: ['partition', 'txn', 'delay', 'at', 'limit', 'output'],
  pop: ['group', 'partition', 'batch', 'wait', 'ack', 'output'],
  tail: ['group', 'max', 'output'],
  dlq: ['group', 'after', 'limit', 'output'],
  version: ['client', 'output'],
  completion: [],
};

/** -o formats a command takes, where not all: version has no table of objects. */
const FORMATS: Record<string, readonly string[]> = { version: ['table', 'json', 'yaml', 'jsonpath='] };

const GLOBAL_FLAGS = ['server', 'token'];

const COMPLETION: CompletionSpec = {
  commands: ALLOWED,
  globalFlags: GLOBAL_FLAGS,
  valueFlags: Object.entries(OPTIONS)
    .filter(([, o]) => o.type === 'string')
    .map(([k]) => k),
  shortFlags: Object.fromEntries(Object.entries(OPTIONS).flatMap(([k, o]) => ('short' in o ? [[o.short, k]] : []))),
  subcommands: {
    get: GET_RESOURCES,
    timers: ['list', 'schedule', 'peek', 'cancel'],
    dlq: DLQ_VERBS,
    completion: ['bash', 'zsh', 'fish'],
  },
  queueArgs: [
    'push',
    'pop',
    'tail',
    'get queue',
    'get queues',
    'get messages',
    'timers list',
    'timers schedule',
    'timers peek',
    'timers cancel',
    'dlq list',
  ],
  flagValues: { output: OUTPUT_FORMATS },
  fileFlags: ['filename'],
};

/** Runs one queenctl invocation and returns its exit code; never throws. */
export async function run(argv: string[], io: CliIo): Promise<number> {
  // Hidden, for the completion scripts: its words are a command line being typed, not options.
  if (argv[0] === '__complete') return completeWords(argv.slice(1), io);
  try {
    let parsed;
    try {
      parsed = parseArgs({ args: argv, allowPositionals: true, strict: true, options: OPTIONS });
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
    if (values.version) {
      if (positionals.length > 0) throw new UsageError('--version takes no command (or: queenctl version)');
      io.out(`queenctl ${QUEENCTL_VERSION}\n`);
      return EXIT.ok;
    }
    if (!command) throw new UsageError(NO_COMMAND);
    const allowed = ALLOWED[command];
    if (!allowed) throw new UsageError(`unknown command "${command}"`);
    for (const key of Object.keys(values)) {
      if (![...GLOBAL_FLAGS, ...allowed].includes(key)) throw new UsageError(`${command} does not take --${key}`);
    }
    const format = parseOutput(values.output, command, FORMATS[command]);

    if (command === 'completion') {
      const [shell, ...more] = args;
      const scripts: Record<string, () => string> = { bash: bashCompletion, zsh: zshCompletion, fish: fishCompletion };
      const script = shell !== undefined && more.length === 0 ? scripts[shell] : undefined;
      if (!script) throw new UsageError('completion needs one shell: bash, zsh or fish');
      io.out(script());
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
    const connect = () => new Queen({ url: server, token: values.token ?? env.token, retries: 3, maxDelayMs: 2_000, timeoutMs: 15_000 });

    switch (command) {
      case 'version':
        if (args.length > 0) throw new UsageError('version takes no arguments');
        await version(connect, io, values.client ?? false, format);
        break;
      case 'apply':
        if (args.length > 0) throw new UsageError(`apply takes no arguments besides -f FILE, got "${args.join(' ')}"`);
        await apply(connect(), io, values.filename, values['dry-run'] ?? false);
        break;
      case 'get':
        await get(connect(), io, args, format, { partition: values.partition, from: values.from, limit: values.limit });
        break;
      case 'pop':
        await pop(
          connect(),
          io,
          args,
          { group: values.group, partition: values.partition, batch: values.batch, ack: values.ack ?? false, wait: values.wait ?? false },
          format,
        );
        break;
      case 'tail':
        await tail(connect(), io, args, { group: values.group, max: values.max }, format);
        break;
      case 'push':
        await push(
          connect(),
          io,
          args,
          {
            partition: values.partition,
            txn: values.txn,
            filename: values.filename,
            delimiter: values['txn-delimiter'],
            raw: values.raw ?? false,
            batch: values.batch,
          },
          format,
        );
        break;
      case 'timers':
        await timers(
          connect(),
          io,
          args,
          { partition: values.partition, txn: values.txn, delay: values.delay, at: values.at, limit: values.limit },
          format,
        );
        break;
      case 'dlq':
        await dlq(connect(), io, args, { group: values.group, after: values.after, limit: values.limit }, format);
        break;
    }
    return EXIT.ok;
  } catch (err) {
    return report(err, io);
  }
}

/**
 * `queenctl __complete WORD... CURRENT`: candidates for CURRENT, one a line,
 * then a directive (completion.ts). Never fails loudly: a shell would print
 * whatever came out in the middle of the user's command line.
 */
async function completeWords(words: string[], io: CliIo): Promise<number> {
  const env = readCliEnv(io.env);
  const c = await complete(COMPLETION, words.length === 0 ? [''] : words, async (conn) => {
    // One attempt, 2 s at most: a TAB must not hang on a server that is away.
    const client = new Queen({
      url: conn.server ?? env.server ?? DEFAULT_SERVER,
      token: conn.token ?? env.token,
      retries: 0,
      timeoutMs: 2_000,
    });
    return (await allQueues(client, 1)).map((q) => q.queue);
  });
  io.out(completionOutput(c));
  return EXIT.ok;
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
