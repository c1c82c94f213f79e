import type { Queen, QueueInfo } from '../../client/index.js';
import { UsageError } from '../errors.js';
import { structured, table, type OutputFormat } from '../format.js';
import type { CliIo } from '../io.js';

/** What `get` can show; also offered by shell completion. */
export const GET_RESOURCES = ['queues', 'queue'] as const;

/**
 * `queenctl get queues` (every queue) and `queenctl get queue NAME` (one;
 * "queues NAME" works too, as in kubectl). json and yaml print the API's
 * answer as is: one queue's object, or {"queues": [...]} for the list.
 */
export async function get(client: Queen, io: CliIo, args: string[], format: OutputFormat): Promise<void> {
  const [kind, name, ...rest] = args;
  if (kind !== 'queue' && kind !== 'queues') throw new UsageError(`get: unknown resource "${kind ?? ''}" (try: get queues, get queue NAME)`);
  if (rest.length > 0) throw new UsageError(`get ${kind} takes at most one queue NAME`);
  if (name === undefined) {
    if (kind === 'queue') throw new UsageError('get queue needs a queue NAME (or: get queues)');
    const queues = await allQueues(client);
    io.out(format === 'table' ? queueTable(queues) : structured({ queues }, format));
    return;
  }
  const info = await client.queue(name).get();
  io.out(format === 'table' ? queueTable([info]) : structured(info, format));
}

/** Every page, in name order. */
async function allQueues(client: Queen): Promise<QueueInfo[]> {
  const out: QueueInfo[] = [];
  let after: string | undefined;
  do {
    const page = await client.listQueues(after === undefined ? {} : { after });
    out.push(...page.queues);
    after = page.next;
  } while (after !== undefined);
  return out;
}

function queueTable(queues: QueueInfo[]): string {
  return table(
    ['NAME', 'DEDUP WINDOW (S)', 'PARTITIONS', 'CREATED', 'UPDATED'],
    queues.map((q) => [q.queue, String(q.options.dedupWindowSeconds), String(q.partitions), q.createdAt, q.updatedAt]),
  );
}
