import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { int, redactUrl, type Env } from './env.js';
import { readPemFile } from './kafkaAccess.js';

// The Schema Registry settings (QUEEN_SCHEMA_REGISTRY_*): docs/kafka-ingress.md.

/**
 * A Confluent Schema Registry (QUEEN_SCHEMA_REGISTRY_*) through which framed
 * Avro, Protobuf and JSON Schema values are decoded. The password is never
 * logged, and a URL may not carry credentials (URLs get logged).
 */
export interface SchemaRegistryConfig {
  /** One or more base URLs of the same registry cluster, tried in order. */
  urls: string[];
  /** HTTP basic auth (Confluent's USER_INFO credentials source). */
  basicAuth: { user: string; password: string } | undefined;
  /** PEM CA bundle for an https registry whose certificate the system store does not trust. */
  ca: string | undefined;
  /** Longest one registry request may take before it counts as unreachable. */
  timeoutMs: number;
}

/**
 * QUEEN_SCHEMA_REGISTRY_URL (comma-separated http/https base URLs), with
 * _USER and _PASSWORD or _PASSWORD_FILE for basic auth, _CA_FILE (PEM) for
 * TLS, _TIMEOUT_MS per request. No setting here echoes a password or a URL's
 * credentials into an error message.
 */
export function schemaRegistry(env: Env, defaultTimeoutMs: number): SchemaRegistryConfig | undefined {
  const raw = env.QUEEN_SCHEMA_REGISTRY_URL?.trim();
  const user = env.QUEEN_SCHEMA_REGISTRY_USER;
  let password = env.QUEEN_SCHEMA_REGISTRY_PASSWORD;
  const passwordFile = env.QUEEN_SCHEMA_REGISTRY_PASSWORD_FILE?.trim();
  const ca = readPemFile(env, 'QUEEN_SCHEMA_REGISTRY_CA_FILE');
  if (!raw) {
    if (user || password || passwordFile || ca)
      throw new ConfigError('QUEEN_SCHEMA_REGISTRY_USER/PASSWORD/PASSWORD_FILE/CA_FILE are set but QUEEN_SCHEMA_REGISTRY_URL is not');
    return undefined;
  }
  const urls = raw
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  for (const u of urls) {
    let parsed: URL;
    try {
      parsed = new URL(u);
    } catch {
      throw new ConfigError('QUEEN_SCHEMA_REGISTRY_URL must be comma-separated http:// or https:// URLs, got an unparsable one');
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      throw new ConfigError(`QUEEN_SCHEMA_REGISTRY_URL must use http: or https:, got ${parsed.protocol}`);
    if (parsed.username || parsed.password)
      throw new ConfigError(
        `QUEEN_SCHEMA_REGISTRY_URL ${redactUrl(u)} carries credentials: set QUEEN_SCHEMA_REGISTRY_USER and QUEEN_SCHEMA_REGISTRY_PASSWORD(_FILE) instead (a URL gets logged)`,
      );
  }
  if (passwordFile) {
    if (password) throw new ConfigError('set QUEEN_SCHEMA_REGISTRY_PASSWORD or QUEEN_SCHEMA_REGISTRY_PASSWORD_FILE, not both');
    try {
      password = readFileSync(passwordFile, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new ConfigError(
        `QUEEN_SCHEMA_REGISTRY_PASSWORD_FILE: cannot read ${passwordFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  if (Boolean(user) !== Boolean(password))
    throw new ConfigError('QUEEN_SCHEMA_REGISTRY_USER and QUEEN_SCHEMA_REGISTRY_PASSWORD(_FILE) go together (basic auth)');
  if (user?.includes(':'))
    throw new ConfigError('QUEEN_SCHEMA_REGISTRY_USER cannot contain ":" (basic auth separates user and password with it)');
  if (ca && !urls.some((u) => u.startsWith('https:')))
    throw new ConfigError('QUEEN_SCHEMA_REGISTRY_CA_FILE is set but no QUEEN_SCHEMA_REGISTRY_URL is https');
  return {
    urls,
    basicAuth: user && password ? { user, password } : undefined,
    ca,
    timeoutMs: int(env, 'QUEEN_SCHEMA_REGISTRY_TIMEOUT_MS', defaultTimeoutMs, 100, 120_000),
  };
}
