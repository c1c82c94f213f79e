import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { bool, oneOf, type Env } from './env.js';

// How the service reaches the brokers: TLS and SASL (KAFKA_SSL*, KAFKA_SASL_*).

/** TLS towards the brokers (KAFKA_SSL*): files are read at start-up; PEM. */
export interface KafkaTls {
  ca?: string;
  cert?: string;
  key?: string;
  rejectUnauthorized: boolean;
}

/** SASL towards the brokers (KAFKA_SASL_*). The password is never logged. */
export type KafkaSasl = { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'; username: string; password: string } & (
  { mechanism: 'plain' } | { mechanism: 'scram-sha-256' } | { mechanism: 'scram-sha-512' }
);

/** A PEM file named by the variable (undefined when unset); a file that is not PEM is refused. */
export function readPemFile(env: Env, name: string): string | undefined {
  const path = env[name];
  if (path === undefined || path.trim() === '') return undefined;
  let text: string;
  try {
    text = readFileSync(path.trim(), 'utf8');
  } catch (err) {
    throw new ConfigError(`${name}: cannot read ${path.trim()}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (!text.includes('-----BEGIN ')) throw new ConfigError(`${name}: ${path.trim()} is not a PEM file`);
  return text;
}

/** KAFKA_SSL=true (or any KAFKA_SSL_* file) turns TLS on; the files are PEM. */
export function kafkaTls(env: Env): KafkaTls | undefined {
  const ca = readPemFile(env, 'KAFKA_SSL_CA_FILE');
  const cert = readPemFile(env, 'KAFKA_SSL_CERT_FILE');
  const key = readPemFile(env, 'KAFKA_SSL_KEY_FILE');
  const on = bool(env, 'KAFKA_SSL', ca !== undefined || cert !== undefined || key !== undefined);
  if (!on) {
    if (ca || cert || key) throw new ConfigError('KAFKA_SSL=false contradicts the KAFKA_SSL_*_FILE settings');
    return undefined;
  }
  if ((cert === undefined) !== (key === undefined))
    throw new ConfigError('KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE go together (client certificate and its key)');
  return {
    ...(ca ? { ca } : {}),
    ...(cert ? { cert } : {}),
    ...(key ? { key } : {}),
    rejectUnauthorized: bool(env, 'KAFKA_SSL_REJECT_UNAUTHORIZED', true),
  };
}

export function kafkaSasl(env: Env): KafkaSasl | undefined {
  const mechanism = oneOf(env, 'KAFKA_SASL_MECHANISM', '' as 'plain', ['plain', 'scram-sha-256', 'scram-sha-512'] as const);
  const username = env.KAFKA_SASL_USERNAME;
  let password = env.KAFKA_SASL_PASSWORD;
  const passwordFile = env.KAFKA_SASL_PASSWORD_FILE?.trim();
  if (passwordFile) {
    if (password) throw new ConfigError('set KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE, not both');
    try {
      password = readFileSync(passwordFile, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new ConfigError(
        `KAFKA_SASL_PASSWORD_FILE: cannot read ${passwordFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the default '' (not set) is typed 'plain' only to fit oneOf()'s signature
  if (!mechanism) {
    if (username || password)
      throw new ConfigError('KAFKA_SASL_USERNAME/PASSWORD are set but KAFKA_SASL_MECHANISM is not (plain, scram-sha-256 or scram-sha-512)');
    return undefined;
  }
  if (!username) throw new ConfigError(`KAFKA_SASL_MECHANISM=${mechanism} needs KAFKA_SASL_USERNAME`);
  if (!password) throw new ConfigError(`KAFKA_SASL_MECHANISM=${mechanism} needs KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE`);
  return { mechanism, username, password };
}
