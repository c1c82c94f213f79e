import { pino, type Logger } from 'pino';

export type { Logger };

/** JSON logs on stdout. Secrets never go in: URLs are logged redacted (config.redactUrl). */
export function createLogger(level: string, name = 'queen-ingress'): Logger {
  return pino({ name, level, base: { pid: process.pid } });
}

/** A logger that writes nothing (tests, library use). */
export const silentLogger: Logger = pino({ level: 'silent' });
