import { ConfigError } from '../errors.js';

// Which topics the ingress consumes (QUEEN_INGRESS_TOPICS: names and
// /regex/ patterns) and how each topic's records become log items
// (QUEEN_INGRESS_MAPPING).

export interface TopicMapping {
  topic: string;
  queue: string;
  /** This topic's dead-letter topic (else `<topic><QUEEN_DLQ_SUFFIX>`). */
  dlq?: string;
  /** How this topic's records become log items (QUEEN_INGRESS_MAPPING; else the default mapping). */
  mapping?: RecordMappingConfig;
}

/**
 * A QUEEN_INGRESS_TOPICS entry `/regex/`, `/regex/:queue` or
 * `/regex/:queue:dlq`: every existing topic whose whole name matches it, as
 * in the Java consumer's pattern subscription and Connect's `topics.regex`,
 * resolved when the ingress starts (matchTopicPatterns).
 */
export interface TopicPattern {
  /** As written, slashes included ("/orders-.+/"): a QUEEN_INGRESS_MAPPING key names the pattern so. */
  source: string;
  /** The whole-name matcher, `^(?:regex)$`, without flags (a `g` or `y` flag would make test() stateful). */
  pattern: RegExp;
  /** One queue for every matched topic; else each topic's own name. */
  queue?: string;
  /** One dead-letter topic for every matched topic; else `<topic><QUEEN_DLQ_SUFFIX>` each. */
  dlq?: string;
  /** The mapping of every matched topic (QUEEN_INGRESS_MAPPING keyed by `source`). */
  mapping?: RecordMappingConfig;
  /** Mappings of single matched topics, keyed by topic name (QUEEN_INGRESS_MAPPING), over `mapping`. */
  topicMappings?: Record<string, RecordMappingConfig>;
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
 * Each field may be left out (the default mapping's). Every key must be a
 * topic of QUEEN_INGRESS_TOPICS, one of its patterns as written ("/orders-.+/"),
 * or a topic name one of its patterns matches; `offset` may only be the last
 * id source.
 */
export function parseMappings(
  raw: string | undefined,
  topics: readonly TopicMapping[],
  missingIdDefault: RecordMappingConfig['missingId'],
  name = 'QUEEN_INGRESS_MAPPING',
  patterns: readonly TopicPattern[] = [],
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
  const known = new Set([...topics.map((t) => t.topic), ...patterns.map((p) => p.source)]);
  for (const [topic, m] of Object.entries(parsed as Record<string, unknown>)) {
    const where = `${name}["${topic}"]`;
    if (!known.has(topic) && !(TOPIC_NAME.test(topic) && patterns.some((p) => p.pattern.test(topic))))
      throw new ConfigError(`${where}: topic is not in QUEEN_INGRESS_TOPICS, nor matched by one of its /regex/ patterns`);
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

/** Literal and pattern entries of QUEEN_INGRESS_TOPICS. */
export interface IngressTopics {
  topics: TopicMapping[];
  patterns: TopicPattern[];
}

/** The literal topics of QUEEN_INGRESS_TOPICS (parseIngressTopics for its /regex/ patterns too). */
export function parseTopics(raw: string | undefined, name = 'QUEEN_INGRESS_TOPICS'): TopicMapping[] {
  return parseIngressTopics(raw, name).topics;
}

/**
 * `topic`, `topic:queue` or `topic:queue:dlq`, and `/regex/` with the same
 * optional `:queue:dlq`, comma separated. A comma or colon inside a regex's
 * slashes belongs to the regex (`/a{1,3}/`); the regex ends at the first `/`
 * not escaped as `\/`.
 */
export function parseIngressTopics(raw: string | undefined, name = 'QUEEN_INGRESS_TOPICS'): IngressTopics {
  const out: IngressTopics = { topics: [], patterns: [] };
  if (raw === undefined || raw.trim() === '') return out;
  const seen = new Set<string>();
  for (const part of splitEntries(raw, name)) {
    const entry = part.trim();
    if (!entry) continue;
    if (entry.startsWith('/')) {
      const p = parsePattern(entry, name);
      if (out.patterns.some((q) => q.source === p.source)) throw new ConfigError(`${name} names pattern ${p.source} twice`);
      out.patterns.push(p);
      continue;
    }
    const [topic, queue, dlq, extra] = entry.split(':');
    if (
      extra !== undefined ||
      !topic ||
      !TOPIC_NAME.test(topic) ||
      (queue !== undefined && !queue) ||
      (dlq !== undefined && !TOPIC_NAME.test(dlq))
    ) {
      throw new ConfigError(
        `${name} entries must be "topic", "topic:queue" or "topic:queue:dlq" with topic and dlq matching ${TOPIC_NAME}, or "/regex/" with the same ":queue:dlq", got "${entry}"`,
      );
    }
    if (seen.has(topic)) throw new ConfigError(`${name} names topic "${topic}" twice`);
    if (dlq === topic) throw new ConfigError(`${name}: topic "${topic}" cannot be its own dead-letter topic`);
    seen.add(topic);
    out.topics.push(dlq ? { topic, queue: queue ?? topic, dlq } : { topic, queue: queue ?? topic });
  }
  return out;
}

/** Splits on commas outside a regex's slashes. */
function splitEntries(raw: string, name: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inRegex = false;
  let escaped = false;
  for (const ch of raw) {
    if (inRegex) {
      cur += ch;
      if (escaped) escaped = false;
      else if (ch === '\\') escaped = true;
      else if (ch === '/') inRegex = false;
      continue;
    }
    if (ch === ',') {
      out.push(cur);
      cur = '';
      continue;
    }
    if (ch === '/' && cur.trim() === '') {
      cur = '';
      inRegex = true;
    }
    cur += ch;
  }
  if (inRegex) throw new ConfigError(`${name}: the pattern ${cur.trim()} has no closing "/"`);
  out.push(cur);
  return out;
}

function parsePattern(entry: string, name: string): TopicPattern {
  let close = -1;
  for (let i = 1; i < entry.length; i++) {
    if (entry[i] === '\\') i++;
    else if (entry[i] === '/') {
      close = i;
      break;
    }
  }
  const source = entry.slice(0, close + 1);
  const body = entry.slice(1, close);
  const rest = entry.slice(close + 1);
  if (body === '') throw new ConfigError(`${name}: the pattern ${source} is empty`);
  if (rest !== '' && !rest.startsWith(':'))
    throw new ConfigError(
      `${name}: ${entry}: a pattern takes no flags (topic names are case-sensitive, and the whole name must match); write "/regex/", "/regex/:queue" or "/regex/:queue:dlq"`,
    );
  const [, queue, dlq, extra] = rest.split(':');
  if (extra !== undefined || (queue !== undefined && !queue) || (dlq !== undefined && !TOPIC_NAME.test(dlq)))
    throw new ConfigError(`${name}: ${entry} must be "/regex/", "/regex/:queue" or "/regex/:queue:dlq" with dlq matching ${TOPIC_NAME}`);
  let pattern: RegExp;
  try {
    pattern = new RegExp(`^(?:${body})$`);
  } catch (err) {
    throw new ConfigError(`${name}: ${source} is not a regular expression: ${(err as Error).message}`);
  }
  if (dlq !== undefined && pattern.test(dlq)) throw new ConfigError(`${name}: ${source} matches its own dead-letter topic "${dlq}"`);
  const p: TopicPattern = { source, pattern };
  if (queue !== undefined) p.queue = queue;
  if (dlq !== undefined) p.dlq = dlq;
  return p;
}

/**
 * The topics the patterns add, given the names the broker lists: each name a
 * pattern matches wholly, in the first matching pattern's terms (queue,
 * dead-letter topic, mapping; a mapping keyed by the name itself wins).
 * Never added: a literal topic (its own entry rules), an internal topic
 * (`__consumer_offsets`, any name starting with "__"), and a dead-letter
 * topic (a name ending in `dlqSuffix`, or any entry's own dead-letter
 * topic): consuming its own dead letters would loop them back into the log.
 */
export function matchTopicPatterns(
  names: readonly string[],
  patterns: readonly TopicPattern[],
  literal: readonly TopicMapping[],
  dlqSuffix: string,
): TopicMapping[] {
  const taken = new Set(literal.map((t) => t.topic));
  const deadLetterTopics = new Set([...literal, ...patterns].flatMap((t) => (t.dlq ? [t.dlq] : [])));
  const out: TopicMapping[] = [];
  for (const topic of [...names].sort()) {
    if (taken.has(topic) || topic.startsWith('__') || topic.endsWith(dlqSuffix) || deadLetterTopics.has(topic)) continue;
    const p = patterns.find((q) => q.pattern.test(topic));
    if (!p) continue;
    taken.add(topic);
    const t: TopicMapping = { topic, queue: p.queue ?? topic };
    if (p.dlq) t.dlq = p.dlq;
    const mapping = p.topicMappings?.[topic] ?? p.mapping;
    if (mapping) t.mapping = mapping;
    out.push(t);
  }
  return out;
}
