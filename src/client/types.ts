/** Wire and result types of the client (the contract in docs/http-api.md). */

export interface PushInput {
  /** The deduplication key. Minted (random UUID) by the client when absent, before the first attempt. */
  transactionId?: string;
  /** Any JSON value; stored as its JSON text. */
  data: unknown;
  /** W3C trace context (traceparent, optionally ";" tracestate). */
  traceContext?: string;
}

export type PushStatus = 'queued' | 'duplicate' | 'failed';

export interface PushOutcome {
  status: PushStatus;
  /** The message id: the new one when queued, the original one when duplicate; null when failed. */
  id: string | null;
  transactionId: string | null;
  /** The message's offset in its partition (the original's when duplicate); null when failed. */
  offset: number | null;
  queue: string;
  partition: string;
  /** Why the item failed. */
  error?: string;
}

export interface QueueOptions {
  dedupWindowSeconds: number;
  /** Segments older than this are removed; 0 keeps everything (docs/retention.md). */
  retentionSeconds: number;
  completedRetentionSeconds: number;
  /** The lease a pop takes when it names none, in seconds (default 300). */
  leaseTime: number;
  /** Failed acks before a message is dead-lettered (default 3). */
  retryLimit: number;
}

/** A configure body's options: a value sets, null restores the default, omitted keeps (merge mode). */
export type QueueOptionsPatch = { [K in keyof QueueOptions]?: QueueOptions[K] | null };

export type ConfigureMode = 'merge' | 'replace';

export interface ConfigureResult {
  queue: string;
  created: boolean;
  options: QueueOptions;
}

export interface QueueInfo {
  queue: string;
  options: QueueOptions;
  createdAt: string;
  updatedAt: string;
  partitions: number;
  /** What retention removed so far and how far behind it is (docs/retention.md). */
  retention?: {
    segmentsRemoved: number;
    messagesRemoved: number;
    bytesRemoved: number;
    txnsRowsRemoved: number;
    lastRemovalAt: string | null;
    purgeLagSeconds: number;
    oldestRetainedAgeSeconds: number;
  };
}

/** One result of POST /api/v1/push, as the server sends it. */
export interface WirePushResult {
  index: number;
  /** Sent by servers from 0.2.0 on. */
  messageId?: string | null;
  /** Sent by servers from 0.2.0 on. */
  transactionId?: string | null;
  /** Deprecated: the 0.1.x name of messageId; servers send both until 0.3.0. */
  message_id: string | null;
  /** Deprecated: the 0.1.x name of transactionId; servers send both until 0.3.0. */
  transaction_id: string | null;
  queue: string;
  partition: string;
  status: PushStatus;
  offset: number | null;
  error?: string;
}

/** One page of GET /api/v1/resources/queues: queues by name; `next` (the `after` of the following page) only when the page is full. */
export interface QueueList {
  queues: QueueInfo[];
  next?: string;
}

/** The message id and transactionId of a push result, from a server of any version (camelCase from 0.2.0, snake_case before). */
export function pushIdentity(r: WirePushResult): { id: string | null; transactionId: string | null } {
  return {
    id: r.messageId !== undefined ? r.messageId : r.message_id,
    transactionId: r.transactionId !== undefined ? r.transactionId : r.transaction_id,
  };
}

/** A Kafka record header, as the server returns it (docs/http-api.md, "Kafka origin"). */
export interface KafkaHeader {
  key: string;
  /** UTF-8 text; base64 text when `valueEncoding` is "base64" (a value that is not UTF-8); null for Kafka's null value. */
  value: string | null;
  valueEncoding?: 'base64';
}

/** Where a message came from in Kafka; only messages the Kafka ingress stored have it. */
export interface KafkaOrigin {
  topic: string;
  partition: number;
  /** Kafka's int64 offset as decimal text. */
  offset: string;
  /** The record timestamp, ISO 8601; null when the record had none. */
  timestamp: string | null;
  /** Every header as kept: repeats and null values included. */
  headers: KafkaHeader[];
}

/**
 * A header's value as the bytes the producer sent (null for a null value).
 * A Uint8Array, not a Buffer: the client's declarations need only the DOM
 * lib or @types/node (README), and a Buffer is a Uint8Array.
 */
export function headerBytes(h: KafkaHeader): Uint8Array | null {
  if (h.value === null) return null;
  if (h.valueEncoding !== 'base64') return new TextEncoder().encode(h.value);
  const bin = atob(h.value);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** GET /api/v1/version: the build the broker runs (the same values as its queen_build_info metric). */
export interface ServerVersion {
  version: string;
  commit: string;
}

/** A dead letter, as GET /api/v1/dlq lists it. */
export interface DeadLetter {
  /** The id to requeue it by. */
  id: number;
  queue: string;
  partition: string;
  partitionId: number;
  consumerGroup: string;
  offset: number;
  messageId: string | null;
  transactionId: string | null;
  /** The payload: JSON as pushed; base64 text when `dataEncoding` is "base64"; null when none was stored. */
  data: unknown;
  dataEncoding?: 'base64';
  traceContext: string | null;
  /** The error of the last failed ack. */
  error: string | null;
  attempts: number;
  createdAt: string;
  /** When it was requeued; null while it was not. */
  requeuedAt: string | null;
}

/** One page of GET /api/v1/dlq, by id; `next` (the `after` of the following page) is null on the last page. */
export interface DeadLetterList {
  deadLetters: DeadLetter[];
  next: number | null;
}

/** POST /api/v1/dlq/:id/requeue: the dead letter, now requeued, and the push of its copy. */
export interface RequeueResult {
  deadLetter: DeadLetter;
  push: PushOutcome;
}
