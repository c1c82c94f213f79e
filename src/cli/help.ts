/**
 * Per-command help: `queenctl COMMAND --help` and `queenctl help COMMAND`.
 * A command without an entry here still gets help: its lines of the general
 * usage text (see commandHelp), so a new command is never helpless.
 */
const HELP: Record<string, string> = {
  apply: `usage: queenctl apply -f FILE [--dry-run]

Configures queues from YAML or JSON manifests (one or more documents of
kind: Queue). Every manifest is checked before anything is applied; each queue
is then configured with mode "replace", so an option a manifest omits returns
to its default. -f - reads standard input.

  -f, --filename FILE   manifest file, or - for standard input
      --dry-run         print what would change; apply nothing

example:
  queenctl apply -f queues.yaml --dry-run
`,
  get: `usage: queenctl get queues [-o FORMAT]
       queenctl get queue NAME [-o FORMAT]
       queenctl get messages QUEUE [--partition P] [--from N] [--limit N] [-o FORMAT]

Shows every queue (name, dedup window, partitions, timestamps), or one queue's
effective options, or a partition's decoded messages (no cursor moves). json,
yaml and jsonpath work on the API's answer as it is ({"queues": [...]} for the
list); -o name prints queue/NAME or message/ID, one a line.

  -o, --output FORMAT   table (default), wide (more columns), name, json, yaml,
                        or jsonpath=TEMPLATE, e.g. -o jsonpath='{.queues[*].queue}'
      --partition P     get messages: the partition (default "Default")
      --from N          get messages: the first offset
      --limit N         get messages: at most N (1-1000)
`,
  push: `usage: queenctl push QUEUE [--partition P] [--txn ID] [--raw] [-o FORMAT] DATA
       queenctl push QUEUE - [--partition P] [-K SEP] [--raw] [--batch N] [-o FORMAT]
       queenctl push QUEUE -f FILE [...]

Pushes one message; DATA is one JSON value (quote it for the shell). Without
--txn a random transactionId is minted, so a retried push is deduplicated.

With - (standard input) or -f FILE, every line is one message, as kcat -P
reads them; empty lines are skipped. With -K SEP a line is TRANSACTIONID SEP
DATA, split at the first SEP, so pushing the same input again is deduplicated.
Lines go out in batches of up to --batch (default 100) as they are read.
Every line gets its own answer (line N: queued|duplicate|failed|invalid); a
line that is not valid is reported and skipped, and the lines around it are
pushed all the same. The exit code is 1 when any line was not pushed.

  --partition P         partition (default: Default)
  --txn ID              transactionId: the deduplication key (one message)
  -f, --filename FILE   one message a line from FILE (- is standard input)
  -K, --txn-delimiter SEP
                        lines are TRANSACTIONID SEP DATA
      --raw             DATA is text, pushed as a JSON string (lines need not be JSON)
      --batch N         lines: at most N messages a request (1-10000, default 100)
  -o, --output FORMAT   table (default), name (message/ID), json (one object a
                        line for lines), yaml, or jsonpath=TEMPLATE

examples:
  queenctl push payments --partition customer-42 --txn order-9137-paid '{"orderId":9137}'
  tail -f orders.log | queenctl push orders - --raw
  queenctl push orders -f orders.txt -K :        # each line: order-9137:{"orderId":9137}
`,
  dlq: `usage: queenctl dlq list QUEUE [--group G] [--after ID] [--limit N] [-o FORMAT]
       queenctl dlq requeue ID... [-o FORMAT]

list shows one page of a queue's dead letters in id order (all consumer groups,
or --group's); a full page ends with the --after to continue from. requeue
pushes a copy of each dead letter to its partition (transactionId
"<original>#requeue-<id>"), where every consumer group sees it as a new
message; each ID gets its own answer, and one that was requeued already or
does not exist is reported without stopping the others.

  --group G             list: one consumer group's
  --after ID            list: those after this id
  --limit N             list: at most N (1-1000, default 100)
  -o, --output FORMAT   table (default), wide (message id, error, data), name
                        (deadletter/ID), json, yaml or jsonpath=TEMPLATE

example:
  queenctl dlq list payments -o name | cut -d/ -f2 | xargs queenctl dlq requeue
`,
  version: `usage: queenctl version [--client] [-o table|json|yaml|jsonpath=TEMPLATE]

Prints queenctl's version and the server's (its package version and commit,
from GET /api/v1/version). When the server cannot be reached, queenctl's own
version is printed and the exit code is 1. --client (or queenctl --version)
asks no server.
`,
  completion: `usage: queenctl completion bash|zsh|fish

Prints a shell completion script for commands, resources, verbs, flags and
-o formats; queue names are completed from the server (the --server and
--token on the line being typed, else QUEEN_URL and QUEEN_TOKEN), and when it
does not answer within 2 s nothing is offered.

  bash:  source <(queenctl completion bash)      # or save it under /etc/bash_completion.d/
  zsh:   source <(queenctl completion zsh)       # or save it as _queenctl on your $fpath
  fish:  queenctl completion fish > ~/.config/fish/completions/queenctl.fish
`,
};

/** Help for one command, or undefined when it is not a command. */
export function commandHelp(command: string, usage: string, commands: readonly string[]): string | undefined {
  if (!commands.includes(command)) return undefined;
  const own = HELP[command];
  if (own) return own;
  const lines = usage.split('\n').filter((l) => l.startsWith(`  ${command} `) || l.trim() === command);
  return `usage: queenctl ${lines.map((l) => l.trim()).join('\n       queenctl ')}\n`;
}
