import { ConfigError } from '../errors.js';

// Which topics the ingress consumes (QUEEN_INGRESS_TOPICS) and how each
// topic's records become log items (QUEEN_INGRESS_MAPPING).

export interface TopicMapping {
  topic: string;
  queue: string;
  /** This topic's dead-letter topic (else `<topic><QUEEN_DLQ_SUFFIX>`). */
  dlq?: string;
  /** How this topic's records become log items (QUEEN_INGRESS_MAPPING; else the default mapping). */
  mapping?: RecordMappingConfig;
}

/**
 * Where a record's transactionId comes from. Sources are tried in order; the
 * first that yields a value wins. `offset` derives `topic/partition/offset`
 * and is only ever used where it is written.
 */
export type IdSource = { header: string } | { key: true } | { jsonPointer: string } | { offset: true };

/** Where a record's log partition comes from; a source that yields nothing gives `Default`. */
export type PartitionSource = { key: true } | { header: string } | { jsonPointer: string } | { constant: string };

export interface RecordMappingConfig {
  transactionId: IdSource[];
  partition: PartitionSource;
  /** When no source yields an id: dead-letter, halt the partition, or `topic/partition/offset`. */
  missingId: 'dlq' | 'fail' | 'offset';
}

/** The mapping a topic has unless QUEEN_INGRESS_MAPPING says otherwise (docs/kafka-ingress.md). */
export const DEFAULT_ID_SOURCES: readonly IdSource[] = [{ header: 'transactionId' }, { jsonPointer: '/transactionId' }];

const TOPIC_NAME = /^[A-Za-z0-9._-]{1,249}$/;

/** RFC 6901: "" (the whole value) or "/"-separated tokens, where "~" only starts "~0" or "~1". */
const JSON_POINTER = /^(\/([^~]|~[01])*)*$/;

function parseSource(raw: unknown, where: string, kinds: readonly string[]): { kind: string; arg: string } {
  if (typeof raw !== 'string') throw new ConfigError(`${where} must be a string such as ${kinds.join(', ')}, got ${JSON.stringify(raw)}`);
  const colon = raw.indexOf(':');
  const kind = colon < 0 ? raw : raw.slice(0, colon);
  const arg = colon < 0 ? '' : raw.slice(colon + 1);
  const form = kinds.find((k) => k.split(':')[0] === kind);
  if (!form) throw new ConfigError(`${where} must be one of ${kinds.join(', ')}, got "${raw}"`);
  const needsArg = form.includes(':');
  if (needsArg !== colon >= 0 || (needsArg && arg === '')) throw new ConfigError(`${where}: "${raw}" must be written ${form}`);
  if (kind === 'json' && !JSON_POINTER.test(arg))
    throw new ConfigError(`${where}: "${arg}" is not a JSON pointer (RFC 6901: /field/0/sub, "~0" for ~, "~1" for /)`);
  return { kind, arg };
}

const ID_FORMS = ['header:<name>', 'key', 'json:<pointer>', 'offset'] as const;
const PARTITION_FORMS = ['key', 'header:<name>', 'json:<pointer>', 'constant:<name>'] as const;

/**
 * QUEEN_INGRESS_MAPPING: a JSON object from topic to its mapping, e.g.
 * {"orders":{"transactionId":["header:eventId","json:/id"],"partition":"json:/customer","missingId":"fail"}}.
 * Each field may be left out (the default mapping's). Every topic must be one
 * of QUEEN_INGRESS_TOPICS; `offset` may only be the last id source.
 */
export function parseMappings(
  raw: string | undefined,
  topics: readonly TopicMapping[],
  missingIdDefault: RecordMappingConfig['missingId'],
  name = 'QUEEN_INGRESS_MAPPING',
): Map<string, RecordMappingConfig> {
  const out = new Map<string, RecordMappingConfig>();
  if (raw === undefined || raw.trim() === '') return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new ConfigError(`${name} must be a JSON object from topic to mapping: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new ConfigError(`${name} must be a JSON object from topic to mapping`);
  const known = new Set(topics.map((t) => t.topic));
  for (const [topic, m] of Object.entries(parsed as Record<string, unknown>)) {
    const where = `${name}["${topic}"]`;
    if (!known.has(topic)) throw new ConfigError(`${where}: topic is not in QUEEN_INGRESS_TOPICS`);
    if (!m || typeof m !== 'object' || Array.isArray(m)) throw new ConfigError(`${where} must be an object`);
    const fields = m as Record<string, unknown>;
    for (const f of Object.keys(fields))
      if (!['transactionId', 'partition', 'missingId'].includes(f))
        throw new ConfigError(`${where}: unknown field "${f}" (transactionId, partition, missingId)`);
    const idsRaw =
      fields.transactionId === undefined ? undefined : Array.isArray(fields.transactionId) ? fields.transactionId : [fields.transactionId];
    if (idsRaw?.length === 0) throw new ConfigError(`${where}.transactionId must name at least one source`);
    const ids: IdSource[] = idsRaw
      ? idsRaw.map((r, i) => {
          const { kind, arg } = parseSource(r, `${where}.transactionId`, ID_FORMS);
          if (kind === 'offset' && i !== idsRaw.length - 1)
            throw new ConfigError(`${where}.transactionId: "offset" always yields, so it can only be the last source`);
          return kind === 'header'
            ? { header: arg }
            : kind === 'key'
              ? { key: true }
              : kind === 'json'
                ? { jsonPointer: arg }
                : { offset: true };
        })
      : [...DEFAULT_ID_SOURCES];
    let partition: PartitionSource = { key: true };
    if (fields.partition !== undefined) {
      const { kind, arg } = parseSource(fields.partition, `${where}.partition`, PARTITION_FORMS);
      partition =
        kind === 'header' ? { header: arg } : kind === 'key' ? { key: true } : kind === 'json' ? { jsonPointer: arg } : { constant: arg };
    }
    const missingId = fields.missingId ?? missingIdDefault;
    if (missingId !== 'dlq' && missingId !== 'fail' && missingId !== 'offset')
      throw new ConfigError(`${where}.missingId must be one of dlq, fail, offset, got ${JSON.stringify(missingId)}`);
    out.set(topic, { transactionId: ids, partition, missingId });
  }
  return out;
}

/** `topic`, `topic:queue` or `topic:queue:dlq`, comma separated. */
export function parseTopics(raw: string | undefined, name = 'QUEEN_INGRESS_TOPICS'): TopicMapping[] {
  if (raw === undefined || raw.trim() === '') return [];
  const out: TopicMapping[] = [];
  const seen = new Set<string>();
  for (const part of raw.split(',')) {
    const entry = part.trim();
    if (!entry) continue;
    const [topic, queue, dlq, extra] = entry.split(':');
    if (
      extra !== undefined ||
      !topic ||
      !TOPIC_NAME.test(topic) ||
      (queue !== undefined && !queue) ||
      (dlq !== undefined && !TOPIC_NAME.test(dlq))
    ) {
      throw new ConfigError(
        `${name} entries must be "topic", "topic:queue" or "topic:queue:dlq" with topic and dlq matching ${TOPIC_NAME}, got "${entry}"`,
      );
    }
    if (seen.has(topic)) throw new ConfigError(`${name} names topic "${topic}" twice`);
    if (dlq === topic) throw new ConfigError(`${name}: topic "${topic}" cannot be its own dead-letter topic`);
    seen.add(topic);
    out.push(dlq ? { topic, queue: queue ?? topic, dlq } : { topic, queue: queue ?? topic });
  }
  return out;
}
