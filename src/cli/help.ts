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
  get: `usage: queenctl get queues [-o table|json|yaml]
       queenctl get queue NAME [-o table|json|yaml]
       queenctl get messages QUEUE [--partition P] [--from N] [--limit N] [-o table|json|yaml]

Shows every queue (name, dedup window, partitions, timestamps), or one queue's
effective options, or a partition's decoded messages (no cursor moves). json
and yaml print the API's answer as it is.

  -o, --output FORMAT   table (default), json or yaml
      --partition P     get messages: the partition (default "Default")
      --from N          get messages: the first offset
      --limit N         get messages: at most N (1-1000)
`,
  push: `usage: queenctl push QUEUE [--partition P] [--txn ID] [-o table|json|yaml] DATA

Pushes one message; DATA is one JSON value (quote it for the shell). Without
--txn a random transactionId is minted, so a retried push is deduplicated.

  --partition P         partition (default: Default)
  --txn ID              transactionId: the deduplication key
  -o, --output FORMAT   table (default), json or yaml

example:
  queenctl push payments --partition customer-42 --txn order-9137-paid '{"orderId":9137}'
`,
  version: `usage: queenctl version [-o table|json|yaml]

Prints queenctl's version.
`,
  completion: `usage: queenctl completion bash|zsh

Prints a shell completion script for commands, resources and flags.

  bash:  source <(queenctl completion bash)      # or save it under /etc/bash_completion.d/
  zsh:   source <(queenctl completion zsh)       # or save it as _queenctl on your $fpath
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
