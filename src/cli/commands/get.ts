import type { Queen, QueueInfo } from '../../client/index.js';
import { UsageError } from '../errors.js';
import { render, table, type OutputFormat } from '../format.js';
import type { CliIo } from '../io.js';
import { messageNames, messageTable } from './consume.js';

/** What `get` can show; also offered by shell completion. */
export const GET_RESOURCES = ['queues', 'queue', 'messages'] as const;

export interface BrowseArgs {
  partition: string | undefined;
  from: string | undefined;
  limit: string | undefined;
}

/** `queenctl get messages QUEUE [--partition P] [--from N] [--limit N]`: decoded messages, no cursor moves. */
async function getMessages(client: Queen, io: CliIo, queue: string, o: BrowseArgs, format: OutputFormat): Promise<void> {
  for (const [k, v] of [
    ['from', o.from],
    ['limit', o.limit],
  ] as const) {
    if (v !== undefined && !/^\d+$/.test(v)) throw new UsageError(`--${k} must be a non-negative integer, got "${v}"`);
  }
  const page = await client.queue(queue).browse({
    ...(o.partition !== undefined ? { partition: o.partition } : {}),
    ...(o.from !== undefined ? { from: Number(o.from) } : {}),
    ...(o.limit !== undefined ? { limit: Number(o.limit) } : {}),
  });
  const more = page.next !== null ? `more from offset ${page.next} (--from ${page.next})\n` : '';
  io.out(
    render(
      {
        value: page,
        names: messageNames(page.messages),
        text: messageTable(page.messages, false) + more,
        wide: messageTable(page.messages, true) + more,
      },
      format,
    ),
  );
}

/**
 * `queenctl get queues` (every queue), `queenctl get queue NAME` (one;
 * "queues NAME" works too, as in kubectl) and `queenctl get messages QUEUE`.
 * json and yaml print the API's answer as is: one queue's object, or
 * {"queues": [...]} for the list.
 */
export async function get(
  client: Queen,
  io: CliIo,
  args: string[],
  format: OutputFormat,
  browse: BrowseArgs = { partition: undefined, from: undefined, limit: undefined },
): Promise<void> {
  const [kind, name, ...rest] = args;
  if (kind === 'messages' || kind === 'message') {
    if (!name || rest.length > 0) throw new UsageError('get messages needs exactly one QUEUE');
    await getMessages(client, io, name, browse, format);
    return;
  }
  if (browse.partition !== undefined || browse.from !== undefined || browse.limit !== undefined)
    throw new UsageError('--partition, --from and --limit go with get messages');
  if (kind !== 'queue' && kind !== 'queues')
    throw new UsageError(`get: unknown resource "${kind ?? ''}" (try: get queues, get queue NAME, get messages QUEUE)`);
  if (rest.length > 0) throw new UsageError(`get ${kind} takes at most one queue NAME`);
  if (name === undefined) {
    if (kind === 'queue') throw new UsageError('get queue needs a queue NAME (or: get queues)');
    const queues = await allQueues(client);
    io.out(render(queueView({ queues }, queues), format));
    return;
  }
  const info = await client.queue(name).get();
  io.out(render(queueView(info, [info]), format));
}

/** Every page in name order, or the first `maxPages` (shell completion offers the first 1000 names). */
export async function allQueues(client: Queen, maxPages = Infinity): Promise<QueueInfo[]> {
  const out: QueueInfo[] = [];
  let after: string | undefined;
  let pages = 0;
  do {
    const page = await client.listQueues(after === undefined ? {} : { after });
    out.push(...page.queues);
    after = page.next;
  } while (after !== undefined && ++pages < maxPages);
  return out;
}

function queueView(value: unknown, queues: QueueInfo[]) {
  return {
    value,
    names: queues.map((q) => `queue/${q.queue}`),
    text: table(
      ['NAME', 'DEDUP WINDOW (S)', 'PARTITIONS', 'CREATED', 'UPDATED'],
      queues.map((q) => [q.queue, String(q.options.dedupWindowSeconds), String(q.partitions), q.createdAt, q.updatedAt]),
    ),
    wide: table(
      [
        'NAME',
        'DEDUP WINDOW (S)',
        'PARTITIONS',
        'RETENTION (S)',
        'COMPLETED RETENTION (S)',
        'LEASE (S)',
        'RETRY LIMIT',
        'CREATED',
        'UPDATED',
      ],
      queues.map((q) => [
        q.queue,
        String(q.options.dedupWindowSeconds),
        String(q.partitions),
        String(q.options.retentionSeconds),
        String(q.options.completedRetentionSeconds),
        String(q.options.leaseTime),
        String(q.options.retryLimit),
        q.createdAt,
        q.updatedAt,
      ]),
    ),
  };
}
