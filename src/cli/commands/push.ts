import type { PushOutcome, Queen } from '../../client/index.js';
import { CliError, UsageError } from '../errors.js';
import { structured, type OutputFormat } from '../format.js';
import type { CliIo } from '../io.js';

export interface PushArgs {
  partition: string | undefined;
  txn: string | undefined;
}

/** `queenctl push QUEUE [--partition P] [--txn ID] DATA`; DATA is one JSON value. */
export async function push(client: Queen, io: CliIo, args: string[], opts: PushArgs, format: OutputFormat): Promise<void> {
  const [queue, raw, ...rest] = args;
  if (!queue || raw === undefined || rest.length > 0)
    throw new UsageError('push needs QUEUE and one DATA argument (JSON; quote it for the shell)');
  let data: unknown;
  try {
    data = JSON.parse(raw);
  } catch (err) {
    throw new UsageError(`DATA must be JSON: ${(err as Error).message}`);
  }
  const q = client.queue(queue);
  const ref = opts.partition !== undefined ? q.partition(opts.partition) : q;
  const [r] = (await ref.push([{ data, ...(opts.txn !== undefined ? { transactionId: opts.txn } : {}) }])) as [PushOutcome];
  if (format !== 'table') io.out(structured(r, format));
  else if (r.status !== 'failed')
    io.out(`${r.status} id=${r.id} offset=${r.offset} queue=${r.queue} partition=${r.partition} transactionId=${r.transactionId}\n`);
  if (r.status === 'failed') throw new CliError(`push failed: ${r.error ?? 'no reason given'}`);
}
