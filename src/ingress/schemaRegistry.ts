import { Agent } from 'node:https';
import { createRequire } from 'node:module';
import { fromBinary, toJson } from '@bufbuild/protobuf';
import type * as Registry from '@confluentinc/schemaregistry';
import type { AvroDeserializer, Client, ClientConfig, ProtobufDeserializer, SchemaInfo } from '@confluentinc/schemaregistry';
import type { SchemaRegistryConfig } from '../config.js';
import { SchemaRegistryError } from '../errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { Counter, MetricsRegistry } from '../telemetry/metrics.js';
import { backoffMs, pause } from '../util/backoff.js';

/**
 * Confluent's wire format decoded through a Schema Registry.
 *
 * A framed value is magic byte 0, a 4-byte big-endian schema id, then the
 * serialized value (Protobuf puts its message indexes, zigzag varints, in
 * between). The id names a schema in the registry, and only the registry
 * says whether it is Avro, Protobuf or JSON Schema. So decoding is two steps:
 *
 *   fetch   (async, per chunk, only when a framed value names an id not
 *           cached yet) asks the registry for each such id once, through
 *           Confluent's client (@confluentinc/schemaregistry), and keeps what
 *           it needs to decode that id without I/O: an avsc Type, a Protobuf
 *           file descriptor, or "JSON". Cached by id for the process's life
 *           (a schema id never changes meaning). The registry's own "not
 *           found" is cached as unknown for UNKNOWN_TTL_MS, then asked again.
 *   decode  (sync, per record) turns the bytes into JSON text to store, and
 *           the decoded value for the mapping's JSON pointers.
 *
 * Unframed values never reach either step, and a chunk whose ids are all
 * cached costs no promise: needsFetch() is a loop over the values.
 *
 * Failures, per REGISTRY_ANSWERS: a registry that does not answer, refuses
 * the credentials or fails (5xx) says nothing about the record, so the fetch
 * throws a retriable SchemaRegistryError and the chunk's partition halts and
 * retries (fetchUntilDone). An unknown id, a schema that cannot be compiled,
 * or bytes that do not decode under their schema are verdicts on the record:
 * decode() returns the reason, and the record is dead-lettered.
 */

/** How long the registry's "no such schema id" is believed before it is asked again. */
export const UNKNOWN_TTL_MS = 60_000;
/** Unknown ids remembered at most (a stream of random binary values could name any id). */
const MAX_UNKNOWN = 1024;
/** Ids one chunk asks for at once. */
const FETCH_CONCURRENCY = 8;
const FRAME_HEADER = 5;

type Library = Pick<
  typeof Registry,
  'AvroDeserializer' | 'ProtobufDeserializer' | 'RestError' | 'SchemaId' | 'SchemaRegistryClient' | 'SerdeType'
>;
let library: Library | undefined;
/**
 * Confluent's client, loaded on first use and only the parts used: its
 * index also loads the AWS, Azure, GCP and Vault KMS drivers of its field
 * encryption (measured: 1.4 s of CPU against 0.5 s), and a service without a
 * registry loads none of it.
 */
function lib(): Library {
  if (!library) {
    const require = createRequire(import.meta.url);
    const dist = '@confluentinc/schemaregistry/dist';
    library = {
      ...(require(`${dist}/schemaregistry-client.js`) as Pick<Library, 'SchemaRegistryClient'>),
      ...(require(`${dist}/serde/serde.js`) as Pick<Library, 'SchemaId' | 'SerdeType'>),
      ...(require(`${dist}/serde/avro.js`) as Pick<Library, 'AvroDeserializer'>),
      ...(require(`${dist}/serde/protobuf.js`) as Pick<Library, 'ProtobufDeserializer'>),
      ...(require(`${dist}/rest-error.js`) as Pick<Library, 'RestError'>),
    };
  }
  return library;
}

/**
 * The one table that classifies Schema Registry answers, as
 * engine/sqlstate.ts does PostgreSQL's. true: retriable (the record's
 * partition halts and retries; the answer is about the registry or our
 * access to it, never the record). false: a verdict on the schema id (each
 * record naming it is dead-lettered). Keys: "404-registry" (a 404 whose body
 * carries the registry's own error_code 404xx), an HTTP status, a status
 * class ("4xx", "5xx"), or "none" (no answer: refused, reset, timeout, TLS).
 */
export const REGISTRY_ANSWERS: ReadonlyMap<string, boolean> = new Map([
  ['404-registry', false], // Schema Registry's "Schema not found": no schema has this id
  ['404', true], // a 404 without the registry's error body: a proxy or a wrong base path, not a verdict on the id
  ['401', true], // credentials refused: the operator fixes them, the partition resumes
  ['403', true], // not authorized for this schema: the same
  ['408', true], // request timeout
  ['429', true], // rate limited
  ['4xx', true], // any other refusal of our request is ours to fix, never the record's fault
  ['5xx', true], // the registry failing
  ['none', true], // no answer at all
]);

function answerKey(status: number | undefined, errorCode: number | undefined): string {
  if (status === undefined) return 'none';
  if (status === 404 && errorCode !== undefined && errorCode >= 40400 && errorCode < 40500) return '404-registry';
  if (REGISTRY_ANSWERS.has(String(status))) return String(status);
  return `${Math.floor(status / 100)}xx`;
}

/** A registry failure as a SchemaRegistryError; undefined for anything else (a schema that does not compile). */
export function registryFailure(err: unknown, what: string): SchemaRegistryError | undefined {
  if (err instanceof SchemaRegistryError) return err;
  let status: number | undefined;
  let errorCode: number | undefined;
  let detail: string;
  if (err instanceof lib().RestError) {
    status = err.status;
    errorCode = err.errorCode;
    detail = `HTTP ${status}${errorCode > 0 ? ` (error_code ${errorCode})` : ''}: ${err.message}`;
  } else if ((err as { isAxiosError?: boolean } | null)?.isAxiosError) {
    // No answer (an answer with a status became a RestError in the client).
    const e = err as { code?: string; message?: string };
    detail = `no answer (${e.code ?? 'error'}): ${e.message ?? ''}`;
  } else return undefined;
  const retriable = REGISTRY_ANSWERS.get(answerKey(status, errorCode)) ?? true;
  return new SchemaRegistryError(`${what}: ${detail}`, status, { retriable, cause: err });
}

/** A value's JSON view for the mapping's pointers (computed on first use where it costs a parse). */
export type Json = { ok: true; value: unknown } | { ok: false };

/** One framed value, decoded: the JSON text to store and the decoded value; or why not (a verdict on the record). */
export type DecodedValue = { ok: true; payload: Buffer; json: () => Json } | { ok: false; reason: string };

/** What the record mapping needs of a registry: a synchronous decode of a framed value whose schema was fetched. */
export interface FramedValueDecoder {
  decode(value: Buffer): DecodedValue;
}

/** What fetchUntilDone needs of its chunk: whether to go on, and how to halt and resume the partition visibly. */
export interface FetchHooks {
  isRunning(): boolean;
  isStale(): boolean;
  signal: AbortSignal;
  /** From the first failure on, with the current reason (readiness shows it, the halted-partitions metric counts it). */
  halt(reason: string): void;
  /** The fetch succeeded or the chunk was abandoned: the partition goes on (or is read again by whoever owns it). */
  resume(): void;
}

// The library's own (CommonJS) view of @bufbuild/protobuf's descriptor types, which this ES module's import of the package does not share.
type DescFile = Awaited<ReturnType<ProtobufDeserializer['toFileDesc']>>;
type DescMessage = ReturnType<ProtobufDeserializer['toMessageDescFromIndexes']>;

type Compiled =
  | { kind: 'AVRO'; read: (body: Buffer) => unknown }
  | { kind: 'JSON' }
  | { kind: 'PROTOBUF'; file: DescFile; messages: Map<string, DescMessage> };

/** Both clients of one registry: Protobuf schemas are asked for as serialized descriptors, the others as text (see fromConfig). */
export interface RegistryClients {
  text: Client;
  serialized: Client;
}

export class SchemaRegistryDecoder implements FramedValueDecoder {
  private readonly schemas = new Map<number, Compiled>();
  private readonly unknown = new Map<number, { reason: string; until: number }>();
  private readonly inflight = new Map<number, Promise<void>>();
  private readonly avro: AvroDeserializer;
  private readonly protobuf: ProtobufDeserializer;
  /** The serialized client as the Protobuf compiler must see it (alwaysSerialized). */
  private readonly protobufClient: Client;
  private readonly failures: Counter | undefined;
  private readonly fetches: Counter | undefined;

  constructor(
    private readonly clients: RegistryClients,
    private readonly log: Logger,
    metrics?: MetricsRegistry,
    private readonly unknownTtlMs = UNKNOWN_TTL_MS,
  ) {
    // Used only to compile schemas (references included) and for their caches; never to deserialize (that costs several promises per record).
    const { AvroDeserializer, ProtobufDeserializer, SerdeType } = lib();
    this.avro = new AvroDeserializer(clients.text, SerdeType.VALUE, {});
    this.protobufClient = alwaysSerialized(clients.serialized);
    this.protobuf = new ProtobufDeserializer(this.protobufClient, SerdeType.VALUE, {});
    this.fetches = metrics?.counter(
      'queen_ingress_schema_fetches_total',
      'Schema ids fetched from the Schema Registry, by outcome',
      'outcome',
    );
    this.failures = metrics?.counter(
      'queen_ingress_schema_registry_failures_total',
      'Schema Registry fetches that failed retriably (each halts its partition until the registry answers)',
    );
  }

  /**
   * Two clients of the configured registry: the client caches by subject
   * and id whatever format it was asked for first, and a Protobuf schema must
   * be asked for as `format=serialized` (a descriptor) while an Avro or JSON
   * schema must not (Confluent's registry refuses formats a type lacks).
   * Retries are this module's (fetchUntilDone), not the client's.
   */
  static fromConfig(cfg: SchemaRegistryConfig, log: Logger, metrics?: MetricsRegistry): SchemaRegistryDecoder {
    const config = (): ClientConfig => ({
      baseURLs: cfg.urls,
      ...(cfg.basicAuth
        ? { basicAuthCredentials: { credentialsSource: 'USER_INFO', userInfo: `${cfg.basicAuth.user}:${cfg.basicAuth.password}` } }
        : {}),
      createAxiosDefaults: { timeout: cfg.timeoutMs, ...(cfg.ca ? { httpsAgent: new Agent({ ca: cfg.ca, keepAlive: true }) } : {}) },
      maxRetries: 0,
      cacheCapacity: 10_000,
    });
    const { SchemaRegistryClient } = lib();
    return new SchemaRegistryDecoder(
      { text: new SchemaRegistryClient(config()), serialized: new SchemaRegistryClient(config()) },
      log,
      metrics,
    );
  }

  /** Whether any framed value among these names a schema id not known yet (no allocation, no promise). */
  needsFetch(records: readonly { value: Buffer | null }[]): boolean {
    return this.firstToFetch(records) >= 0;
  }

  /** The index of the first record whose framed value names a schema id not known yet, or -1. */
  firstToFetch(records: readonly { value: Buffer | null }[]): number {
    for (let i = 0; i < records.length; i++) {
      const v = records[i]!.value;
      if (v && v.length >= FRAME_HEADER && v[0] === 0 && !this.known(v.readUInt32BE(1))) return i;
    }
    return -1;
  }

  private known(id: number): boolean {
    if (this.schemas.has(id)) return true;
    const u = this.unknown.get(id);
    return u !== undefined && u.until > Date.now();
  }

  /**
   * Fetches every schema id these values name that is not known yet. Rejects
   * with a retriable SchemaRegistryError when the registry does not answer
   * usably; an id the registry does not have is remembered as unknown.
   */
  async fetchMissing(topic: string, records: readonly { value: Buffer | null }[]): Promise<void> {
    const ids = new Set<number>();
    for (const r of records) {
      const v = r.value;
      if (v && v.length >= FRAME_HEADER && v[0] === 0) {
        const id = v.readUInt32BE(1);
        if (!this.known(id)) ids.add(id);
      }
    }
    const list = [...ids];
    for (let i = 0; i < list.length; i += FETCH_CONCURRENCY)
      await Promise.all(list.slice(i, i + FETCH_CONCURRENCY).map((id) => this.fetchOne(topic, id)));
  }

  /**
   * fetchMissing until it succeeds: a retriable failure halts the partition
   * from the first attempt (hooks.halt, with the cause) and retries with
   * backoff; success or abandonment (shutdown, rebalance) resumes it. False:
   * abandoned, nothing of the chunk may be committed.
   */
  async fetchUntilDone(topic: string, records: readonly { value: Buffer | null }[], hooks: FetchHooks): Promise<boolean> {
    let since: string | undefined;
    for (let attempt = 0; ; attempt++) {
      if (!hooks.isRunning() || hooks.isStale() || hooks.signal.aborted) {
        if (since) hooks.resume();
        return false;
      }
      try {
        await this.fetchMissing(topic, records);
        if (since) hooks.resume();
        return true;
      } catch (err) {
        const failure = registryFailure(err, 'schema registry');
        if (!failure?.retriable) throw err; // a defect: the consumer restarts from its commits
        this.failures?.inc();
        since ??= new Date().toISOString();
        hooks.halt(`schema registry failing since ${since} (${attempt + 1} attempts, retrying with backoff): ${failure.message}`);
        if (attempt % 10 === 0) this.log.warn({ topic, attempt, err: failure.message }, 'schema registry fetch failed; retrying');
        await pause(backoffMs(attempt, 500, 10_000), hooks.signal);
      }
    }
  }

  private fetchOne(topic: string, id: number): Promise<void> {
    let p = this.inflight.get(id);
    if (!p) {
      p = this.load(topic, id).finally(() => this.inflight.delete(id));
      this.inflight.set(id, p);
    }
    return p;
  }

  private async load(topic: string, id: number): Promise<void> {
    // TopicNameStrategy's subject: the registry finds an id without it, but its client's requests name one.
    const subject = `${topic}-value`;
    let info: SchemaInfo;
    try {
      info = await this.clients.text.getBySubjectAndId(subject, id);
    } catch (err) {
      const failure = registryFailure(err, `fetching schema id ${id}`);
      if (!failure || failure.retriable) throw failure ?? err;
      this.fetches?.inc(1, 'unknown');
      this.remember(id, `schema id ${id} is not in the schema registry (${failure.message})`, this.unknownTtlMs);
      return;
    }
    const kind = info.schemaType ?? 'AVRO';
    try {
      this.schemas.set(id, await this.compile(subject, id, kind, info));
      this.unknown.delete(id);
      this.fetches?.inc(1, 'ok');
    } catch (err) {
      const failure = registryFailure(err, `fetching what schema id ${id} references`);
      if (failure?.retriable) throw failure;
      // A schema that does not compile here never will (its id's meaning is fixed): remembered for good.
      this.fetches?.inc(1, 'unusable');
      this.remember(id, `schema id ${id} (${kind}) cannot be used: ${(err as Error).message}`, Infinity);
    }
  }

  private async compile(subject: string, id: number, kind: string, info: SchemaInfo): Promise<Compiled> {
    if (kind === 'AVRO') {
      const [type] = await this.avro.toType(info);
      return { kind: 'AVRO', read: (body) => type.fromBuffer(body) as unknown };
    }
    if (kind === 'JSON') return { kind: 'JSON' };
    if (kind === 'PROTOBUF') {
      const serialized = await this.protobufClient.getBySubjectAndId(subject, id, 'serialized');
      return { kind: 'PROTOBUF', file: await this.protobuf.toFileDesc(this.protobufClient, serialized), messages: new Map() };
    }
    throw new Error(`schema type ${kind} is not one of AVRO, PROTOBUF, JSON`);
  }

  private remember(id: number, reason: string, ttlMs: number): void {
    // The oldest answer goes first; decode() still dead-letters an id whose answer went (below).
    if (this.unknown.size >= MAX_UNKNOWN) this.unknown.delete(this.unknown.keys().next().value!);
    this.unknown.set(id, { reason, until: Date.now() + ttlMs });
  }

  /**
   * One framed value, synchronously: JSON text to store, and the decoded
   * value for the mapping. Avro: records as objects, a union as its branch's
   * value, bytes and fixed as base64, enums as their symbols. Protobuf:
   * proto3's JSON mapping with the .proto's field names, every field present
   * (64-bit integers as strings, bytes as base64). JSON Schema: the payload
   * as it is (the producer's serializer validated it).
   */
  decode(value: Buffer): DecodedValue {
    const id = value.readUInt32BE(1);
    const schema = this.schemas.get(id);
    if (!schema) {
      const u = this.unknown.get(id);
      if (u) return { ok: false, reason: u.reason };
      // fetchMissing ran for this chunk and kept no schema: the registry did not have it, and its answer was
      // pushed out by more than MAX_UNKNOWN other unknown ids since (a stream of binary values that are not frames).
      return {
        ok: false,
        reason: `schema id ${id} is not in the schema registry (one of more than ${MAX_UNKNOWN} unknown ids at once)`,
      };
    }
    try {
      if (schema.kind === 'JSON') {
        const body = value.subarray(FRAME_HEADER);
        const parsed = JSON.parse(body.toString('utf8')) as unknown;
        return { ok: true, payload: body, json: () => ({ ok: true, value: parsed }) };
      }
      if (schema.kind === 'AVRO') {
        const decoded = schema.read(value.subarray(FRAME_HEADER));
        const text = JSON.stringify(decoded, avroJson);
        return { ok: true, payload: Buffer.from(text), json: () => ({ ok: true, value: decoded }) };
      }
      const framing = new (lib().SchemaId)('PROTOBUF');
      const start = framing.fromBytes(value);
      const indexes = framing.messageIndexes ?? [0];
      const key = indexes.join('.');
      let desc = schema.messages.get(key);
      if (!desc) {
        desc = this.protobuf.toMessageDescFromIndexes(schema.file, indexes);
        schema.messages.set(key, desc);
      }
      const message = fromBinary(desc, value.subarray(start));
      const decoded = toJson(desc, message, { useProtoFieldName: true, alwaysEmitImplicit: true, registry: this.protobuf.fileRegistry });
      return { ok: true, payload: Buffer.from(JSON.stringify(decoded)), json: () => ({ ok: true, value: decoded }) };
    } catch (err) {
      const what = schema.kind === 'JSON' ? 'JSON Schema value is not JSON' : `${schema.kind} value does not decode under its schema`;
      return { ok: false, reason: `schema id ${id}: the ${what}: ${(err as Error).message}` };
    }
  }

  /** Ids cached (tests, diagnostics). */
  cachedIds(): number[] {
    return [...this.schemas.keys()];
  }
}

/**
 * The client as the Protobuf compiler must see it: every schema asked for in
 * `format=serialized` (a base64 FileDescriptorProto). The library asks for a
 * schema's direct references that way but for their own references (an
 * import of an import) without a format, and a real registry then answers
 * .proto text, which does not parse as a descriptor: the id would be
 * dead-lettered as unusable for good. Protobuf schemas reference only
 * Protobuf schemas, so forcing the format is right for the whole graph.
 */
function alwaysSerialized(client: Client): Client {
  return new Proxy(client, {
    get(target, prop, receiver) {
      if (prop === 'getSchemaMetadata')
        return (subject: string, version: number, deleted?: boolean) =>
          target.getSchemaMetadata(subject, version, deleted ?? false, 'serialized');
      if (prop === 'getBySubjectAndId') return (subject: string, id: number) => target.getBySubjectAndId(subject, id, 'serialized');
      if (prop === 'getLatestSchemaMetadata') return (subject: string) => target.getLatestSchemaMetadata(subject, 'serialized');
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** JSON.stringify's replacer for avsc values: bytes and fixed (Buffers) as base64, as Connect's JSON converter writes them. */
function avroJson(this: unknown, key: string, v: unknown): unknown {
  const raw = (this as Record<string, unknown>)[key];
  if (Buffer.isBuffer(raw)) return raw.toString('base64');
  return typeof v === 'bigint' ? v.toString() : v;
}
