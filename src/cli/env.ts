/**
 * The one place queenctl reads the environment. The service reads its own
 * settings in src/config.ts; queenctl is a separate program with exactly two
 * variables, and a flag always wins over the variable.
 *
 *   QUEEN_URL    broker base URL (default http://127.0.0.1:6632)
 *   QUEEN_TOKEN  bearer token (prefer it over --token, which shows in `ps`)
 */
export const DEFAULT_SERVER = 'http://127.0.0.1:6632';

export interface CliEnv {
  server: string | undefined;
  token: string | undefined;
}

export function readCliEnv(env: Record<string, string | undefined>): CliEnv {
  return {
    server: env.QUEEN_URL?.trim() || undefined,
    token: env.QUEEN_TOKEN || undefined,
  };
}
