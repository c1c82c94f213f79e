import type { Queen } from '../../client/index.js';
import { UsageError } from '../errors.js';
import { render, table, type OutputFormat } from '../format.js';
import type { CliIo } from '../io.js';

export interface TimerArgs {
  partition: string | undefined;
  txn: string | undefined;
  delay: string | undefined;
  at: string | undefined;
  limit: string | undefined;
}

/**
 * `queenctl timers list QUEUE [--limit N]`
 * `queenctl timers schedule QUEUE KEY (--delay 30m | --at TIME) [--partition P] [--txn ID] DATA`
 * `queenctl timers peek QUEUE KEY`
 * `queenctl timers cancel QUEUE KEY`   (absent = no longer pending, which includes delivered)
 */
export async function timers(client: Queen, io: CliIo, args: string[], opts: TimerArgs, format: OutputFormat): Promise<void> {
  const [verb, queue, key, ...rest] = args;
  if (!queue) throw new UsageError('timers needs a verb and a QUEUE: timers list|schedule|peek|cancel QUEUE ...');
  const show = (value: unknown, line: string, names: string[] = [`timer/${key}`]) => io.out(render({ value, names, text: line }, format));
  switch (verb) {
    case 'list': {
      if (key !== undefined) throw new UsageError('timers list takes only QUEUE');
      const limit = opts.limit === undefined ? 100 : Number(opts.limit);
      if (!Number.isInteger(limit) || limit < 1) throw new UsageError(`--limit must be a positive integer, got "${opts.limit}"`);
      const r = await client.timer(queue).list(limit);
      io.out(
        render(
          {
            value: r,
            names: r.timers.map((x) => `timer/${x.key}`),
            text: table(
              ['KEY', 'PARTITION', 'DELIVER AT', 'MESSAGE ID', 'ATTEMPTS'],
              r.timers.map((x) => [x.key, x.partition, x.deliverAt, x.messageId, String(x.attempts)]),
            ),
            wide: table(
              ['KEY', 'PARTITION', 'DELIVER AT', 'MESSAGE ID', 'TRANSACTION ID', 'ATTEMPTS'],
              r.timers.map((x) => [x.key, x.partition, x.deliverAt, x.messageId, x.transactionId, String(x.attempts)]),
            ),
          },
          format,
        ),
      );
      return;
    }
    case 'schedule': {
      const [raw, ...extra] = rest;
      if (!key || raw === undefined || extra.length > 0)
        throw new UsageError('timers schedule needs QUEUE KEY and one DATA argument (JSON)');
      if ((opts.delay === undefined) === (opts.at === undefined))
        throw new UsageError('timers schedule needs exactly one of --delay or --at');
      let data: unknown;
      try {
        data = JSON.parse(raw);
      } catch (err) {
        throw new UsageError(`DATA must be JSON: ${(err as Error).message}`);
      }
      let ref = client.timer(queue).key(key).payload(data);
      try {
        ref = opts.delay !== undefined ? ref.delay(/^\d+$/.test(opts.delay) ? Number(opts.delay) : opts.delay) : ref.at(opts.at!);
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
      if (opts.partition !== undefined) ref = ref.partition(opts.partition);
      if (opts.txn !== undefined) ref = ref.transactionId(opts.txn);
      const r = await ref.schedule();
      show(r, `${r.status} key=${key} messageId=${r.messageId} transactionId=${r.transactionId}\n`);
      return;
    }
    case 'peek': {
      if (!key || rest.length > 0) throw new UsageError('timers peek needs QUEUE KEY');
      const r = await client.timer(queue).key(key).peek();
      if (!r) {
        show({ status: 'absent' }, `absent (no longer pending: never scheduled, cancelled, or already fired)\n`, []);
        return;
      }
      show(r, `pending key=${key} partition=${r.partition} deliverAt=${r.deliverAt} messageId=${r.messageId} attempts=${r.attempts}\n`);
      return;
    }
    case 'cancel': {
      if (!key || rest.length > 0) throw new UsageError('timers cancel needs QUEUE KEY');
      const status = await client.timer(queue).key(key).cancel();
      show(
        { status },
        status === 'cancelled' ? 'cancelled\n' : 'absent (no longer pending; it may have been delivered)\n',
        status === 'cancelled' ? [`timer/${key}`] : [],
      );
      return;
    }
    default:
      throw new UsageError(`timers: unknown verb "${verb ?? ''}" (list, schedule, peek, cancel)`);
  }
}
