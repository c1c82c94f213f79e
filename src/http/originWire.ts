import type { KafkaOrigin } from '../engine/frames.js';

/** A Kafka header on the wire: the value as UTF-8 text, base64 text when it is not valid UTF-8 (`valueEncoding`), or null. */
export interface WireHeader {
  key: string;
  value: string | null;
  valueEncoding?: 'base64';
}

/** The `kafka` field of a popped or browsed message (docs/http-api.md, "Kafka origin"). */
export interface WireOrigin {
  topic: string;
  partition: number;
  /** Kafka's int64 offset as decimal text. */
  offset: string;
  /** The record timestamp, ISO 8601 with milliseconds; null when the record had none. */
  timestamp: string | null;
  /** Every header, in the order kept (docs/kafka-ingress.md), repeats and null values included. */
  headers: WireHeader[];
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function originWire(o: KafkaOrigin): WireOrigin {
  return {
    topic: o.topic,
    partition: o.partition,
    offset: o.offset,
    timestamp: o.timestamp === null ? null : new Date(o.timestamp).toISOString(),
    headers: o.headers.map((h) => {
      if (h.value === null) return { key: h.key, value: null };
      try {
        return { key: h.key, value: utf8.decode(h.value) };
      } catch {
        return { key: h.key, value: h.value.toString('base64'), valueEncoding: 'base64' as const };
      }
    }),
  };
}
