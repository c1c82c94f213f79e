import { randomBytes } from 'node:crypto';
import type { Message, Queen } from '../../client/index.js';
import { UsageError } from '../errors.js';
import { evalJsonPath } from '../jsonpath.js';
import { isStructured, render, structured, table, type OutputFormat } from '../format.js';
import type { CliIo } from '../io.js';

export interface PopArgs {
  group: string | undefined;
  partition: string | undefined;
  batch: string | undefined;
  ack: boolean;
  wait: boolean;
}

function positiveInt(v: string | undefined, name: string, dflt: number, max: number): number {
  if (v === undefined) return dflt;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max)
    throw new UsageError(`--${name} must be an integer from 1 to ${max}, got "${v}"`);
  return Number(v);
}

function dataText(m: Pick<Message, 'data' | 'dataEncoding'>): string {
  return m.dataEncoding === 'base64' ? `base64:${String(m.data)}` : JSON.stringify(m.data);
}

type Shown = Pick<Message, 'id' | 'partition' | 'offset' | 'transactionId' | 'createdAt' | 'data' | 'dataEncoding' | 'traceContext'>;

const HEADER = ['PARTITION', 'OFFSET', 'TRANSACTION ID', 'CREATED', 'DATA'];
const WIDE_HEADER = ['PARTITION', 'OFFSET', 'MESSAGE ID', 'TRANSACTION ID', 'CREATED', 'TRACE CONTEXT', 'DATA'];

function messageRow(m: Shown, wide: boolean): string[] {
  return wide
    ? [m.partition, String(m.offset), m.id, m.transactionId, m.createdAt, m.traceContext ?? '', dataText(m)]
    : [m.partition, String(m.offset), m.transactionId, m.createdAt, dataText(m)];
}

/** Messages as a table (-o wide adds the message id and trace context). */
export function messageTable(msgs: readonly Shown[], wide: boolean): string {
  return table(
    wide ? WIDE_HEADER : HEADER,
    msgs.map((m) => messageRow(m, wide)),
  );
}

/** -o name: a message is named by its id. */
export function messageNames(msgs: readonly Pick<Message, 'id'>[]): string[] {
  return msgs.map((m) => `message/${m.id}`);
}

/**
 * `queenctl pop QUEUE [--group G] [--partition P] [--batch N] [--wait] [--ack]`:
 * one leased pop; prints the messages and the lease id. --ack acks them
 * (completed) after printing; without it the lease runs out and they are
 * redelivered, which makes pop a safe way to look.
 */
export async function pop(client: Queen, io: CliIo, args: string[], o: PopArgs, format: OutputFormat): Promise<void> {
  const [queue, ...rest] = args;
  if (!queue || rest.length > 0) throw new UsageError('pop needs exactly one QUEUE');
  const batch = positiveInt(o.batch, 'batch', 1, 10_000);
  const msgs = await client.queue(queue).pop({
    batch,
    ...(o.group !== undefined ? { group: o.group } : {}),
    ...(o.partition !== undefined ? { partition: o.partition } : {}),
    ...(o.wait ? { wait: true, timeoutMs: 30_000 } : {}),
    ...(io.signal ? { signal: io.signal } : {}),
  });
  let acked: string[] = [];
  if (o.ack && msgs.length > 0) acked = (await client.ack(msgs)).map((a) => a.result);
  const value = { leaseId: msgs[0]?.leaseId ?? null, messages: msgs, ...(o.ack ? { acks: acked } : {}) };
  const footer = o.ack
    ? `acked ${acked.filter((r) => r === 'acked').length} of ${msgs.length}\n`
    : `leaseId ${msgs[0]?.leaseId} (not acked: redelivered when the lease expires)\n`;
  const shown = (wide: boolean) => (msgs.length === 0 ? 'no messages\n' : messageTable(msgs, wide) + footer);
  io.out(render({ value, names: messageNames(msgs), text: shown(false), wide: shown(true) }, format));
}

/**
 * `queenctl tail QUEUE [--group G] [--max N]`: follows new messages, like
 * `kubectl logs -f`. Without --group it reads as a throw-away group that
 * starts at the end (subscriptionMode new) and disturbs no one; with --group
 * it consumes as that group (autoAck). Stops on Ctrl-C or after --max.
 */
export async function tail(
  client: Queen,
  io: CliIo,
  args: string[],
  o: { group: string | undefined; max: string | undefined },
  format: OutputFormat,
): Promise<void> {
  const [queue, ...rest] = args;
  if (!queue || rest.length > 0) throw new UsageError('tail needs exactly one QUEUE');
  const max = o.max === undefined ? Infinity : positiveInt(o.max, 'max', 1, Number.MAX_SAFE_INTEGER);
  const group = o.group ?? `queenctl-tail-${randomBytes(6).toString('hex')}`;
  let shown = 0;
  const wide = format.kind === 'wide';
  if (!isStructured(format) && format.kind !== 'name') io.out(table(wide ? WIDE_HEADER : HEADER, []));
  while (shown < max && !io.signal?.aborted) {
    let msgs: Message[];
    try {
      msgs = await client.queue(queue).pop({
        group,
        batch: Math.min(1_000, max - shown),
        wait: true,
        timeoutMs: 30_000,
        autoAck: true,
        ...(o.group === undefined ? { subscriptionMode: 'new' as const } : {}),
        ...(io.signal ? { signal: io.signal } : {}),
      });
    } catch (err) {
      if (io.signal?.aborted) return;
      throw err;
    }
    // One message at a time, as it comes: json is one object a line, yaml one list item, jsonpath the template per message.
    for (const m of msgs) io.out(tailLine(m, format));
    shown += msgs.length;
  }
}

function tailLine(m: Message, format: OutputFormat): string {
  switch (format.kind) {
    case 'table':
    case 'wide':
      return table(format.kind === 'wide' ? WIDE_HEADER : HEADER, [messageRow(m, format.kind === 'wide')]).split('\n')[1]! + '\n';
    case 'name':
      return `message/${m.id}\n`;
    case 'json':
      return JSON.stringify(m) + '\n';
    case 'yaml':
      return structured([m], 'yaml');
    case 'jsonpath':
      return evalJsonPath(format.template, m);
  }
}
