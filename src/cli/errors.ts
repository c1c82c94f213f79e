/** The command line was wrong (exit code 2); the message says how to call it. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** The command ran and failed (exit code 1): a bad manifest, a refusal from the server, no server. */
export class CliError extends Error {
  override name = 'CliError';
}

export const EXIT = { ok: 0, error: 1, usage: 2 } as const;
