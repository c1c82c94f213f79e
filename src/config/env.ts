import { ConfigError } from '../errors.js';

// Readers of one environment variable each: a default when unset or empty,
// else a validated value or a ConfigError naming the variable and its limit.

export type Env = Record<string, string | undefined>;

export function int(env: Env, name: string, dflt: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got "${raw}"`);
  const n = Number(raw.trim());
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got ${raw}`);
  }
  return n;
}

export function bool(env: Env, name: string, dflt: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'on', 'yes'].includes(v)) return true;
  if (['0', 'false', 'off', 'no'].includes(v)) return false;
  throw new ConfigError(`${name} must be one of 1, 0, true, false, on, off, got "${raw}"`);
}

export function ratio(env: Env, name: string, dflt: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  const n = Number(raw.trim());
  if (!/^\s*(0|1|0?\.\d+|1\.0*)\s*$/.test(raw) || !(n >= 0 && n <= 1))
    throw new ConfigError(`${name} must be a number between 0 and 1, got "${raw}"`);
  return n;
}

export function oneOf<T extends string>(env: Env, name: string, dflt: T, allowed: readonly T[]): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw as T;
}

export function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL (${protocols.join(' or ')}), got an unparsable value`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return raw;
}

/** A connection string with its password replaced, safe to log. */
export function redactUrl(raw: string): string {
  try {
    const u = new URL(raw);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '<unparsable url>';
  }
}
