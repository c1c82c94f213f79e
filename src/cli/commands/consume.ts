import { randomBytes } from 'node:crypto';
import type { Message, Queen } from '../../client/index.js';
import { UsageError } from '../errors.js';
import { structured, table, type OutputFormat } from '../format.js';
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

function dataText(m: Message): string {
  return m.dataEncoding === 'base64' ? `base64:${String(m.data)}` : JSON.stringify(m.data);
}

export function messageRows(
  msgs: readonly Pick<Message, 'partition' | 'offset' | 'transactionId' | 'createdAt' | 'data' | 'dataEncoding'>[],
): string[][] {
  return msgs.map((m) => [m.partition, String(m.offset), m.transactionId, m.createdAt, dataText(m as Message)]);
}

const HEADER = ['PARTITION', 'OFFSET', 'TRANSACTION ID', 'CREATED', 'DATA'];

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
  if (format !== 'table') {
    io.out(structured({ leaseId: msgs[0]?.leaseId ?? null, messages: msgs, ...(o.ack ? { acks: acked } : {}) }, format));
    return;
  }
  if (msgs.length === 0) {
    io.out('no messages\n');
    return;
  }
  io.out(table(HEADER, messageRows(msgs)));
  io.out(
    o.ack
      ? `acked ${acked.filter((r) => r === 'acked').length} of ${msgs.length}\n`
      : `leaseId ${msgs[0]!.leaseId} (not acked: redelivered when the lease expires)\n`,
  );
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
  if (format === 'table') io.out(table(HEADER, []));
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
    for (const m of msgs) {
      io.out(
        format === 'table'
          ? table(HEADER, messageRows([m])).split('\n')[1]! + '\n'
          : format === 'json'
            ? JSON.stringify(m) + '\n'
            : structured([m], 'yaml'),
      );
    }
    shown += msgs.length;
  }
}
