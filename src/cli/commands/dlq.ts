import { QueenHttpError, type DeadLetter, type Queen, type RequeueResult } from '../../client/index.js';
import { CliError, serverMessage, UsageError } from '../errors.js';
import { render, table, type OutputFormat } from '../format.js';
import type { CliIo } from '../io.js';

export interface DlqArgs {
  group: string | undefined;
  after: string | undefined;
  limit: string | undefined;
}

export const DLQ_VERBS = ['list', 'requeue'] as const;

/**
 * `queenctl dlq list QUEUE [--group G] [--after ID] [--limit N]`: one page
 * of a queue's dead letters by id (GET /api/v1/dlq).
 * `queenctl dlq requeue ID...`: pushes a copy of each (POST
 * /api/v1/dlq/:id/requeue); every id gets its own answer, and one that fails
 * (requeued already, unknown) does not stop the others.
 */
export async function dlq(client: Queen, io: CliIo, args: string[], o: DlqArgs, format: OutputFormat): Promise<void> {
  const [verb, ...rest] = args;
  if (verb === 'list') return list(client, io, rest, o, format);
  if (verb === 'requeue') {
    if (o.group !== undefined || o.after !== undefined || o.limit !== undefined)
      throw new UsageError('--group, --after and --limit go with dlq list');
    return requeue(client, io, rest, format);
  }
  throw new UsageError(`dlq: unknown verb "${verb ?? ''}" (list QUEUE, requeue ID...)`);
}

async function list(client: Queen, io: CliIo, args: string[], o: DlqArgs, format: OutputFormat): Promise<void> {
  const [queue, ...rest] = args;
  if (!queue || rest.length > 0) throw new UsageError('dlq list needs exactly one QUEUE');
  const int = (v: string | undefined, name: string, min: number, max: number) => {
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max)
      throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got "${v}"`);
    return Number(v);
  };
  const after = int(o.after, 'after', 0, Number.MAX_SAFE_INTEGER);
  const limit = int(o.limit, 'limit', 1, 1000);
  const page = await client.deadLetters(queue, {
    ...(o.group !== undefined ? { group: o.group } : {}),
    ...(after !== undefined ? { after } : {}),
    ...(limit !== undefined ? { limit } : {}),
  });
  const more = page.next !== null ? `more after id ${page.next} (--after ${page.next})\n` : '';
  const rows = (wide: boolean) =>
    page.deadLetters.map((d) => [
      String(d.id),
      d.partition,
      d.consumerGroup,
      String(d.offset),
      d.transactionId ?? '',
      String(d.attempts),
      d.createdAt,
      d.requeuedAt ?? '',
      ...(wide ? [d.messageId ?? '', d.error ?? '', dataText(d)] : []),
    ]);
  const header = ['ID', 'PARTITION', 'GROUP', 'OFFSET', 'TRANSACTION ID', 'ATTEMPTS', 'CREATED', 'REQUEUED'];
  io.out(
    render(
      {
        value: page,
        names: page.deadLetters.map((d) => `deadletter/${d.id}`),
        text: (page.deadLetters.length === 0 ? 'no dead letters\n' : table(header, rows(false))) + more,
        wide: (page.deadLetters.length === 0 ? 'no dead letters\n' : table([...header, 'MESSAGE ID', 'ERROR', 'DATA'], rows(true))) + more,
      },
      format,
    ),
  );
}

function dataText(d: DeadLetter): string {
  return d.dataEncoding === 'base64' ? `base64:${String(d.data)}` : JSON.stringify(d.data);
}

async function requeue(client: Queen, io: CliIo, ids: string[], format: OutputFormat): Promise<void> {
  if (ids.length === 0) throw new UsageError('dlq requeue needs one or more dead-letter IDs (see dlq list)');
  // Every id is checked before the first requeue, so a typo requeues nothing.
  for (const id of ids)
    if (!/^\d+$/.test(id) || Number(id) < 1) throw new UsageError(`dead-letter ID must be a positive integer, got "${id}"`);
  const done: RequeueResult[] = [];
  const lines: string[] = [];
  let failed = 0;
  for (const id of ids) {
    try {
      const r = await client.requeue(Number(id));
      done.push(r);
      lines.push(
        `deadletter/${id} requeued: ${r.push.status} id=${r.push.id} offset=${r.push.offset} partition=${r.push.partition} transactionId=${r.push.transactionId}\n`,
      );
    } catch (err) {
      if (!(err instanceof QueenHttpError)) {
        // No server: the rest would fail the same way. What was requeued is still said.
        io.out(
          render({ value: { requeued: done }, names: done.map((r) => `deadletter/${r.deadLetter.id}`), text: lines.join('') }, format),
        );
        throw err;
      }
      failed++;
      io.err(`queenctl: deadletter/${id}: ${serverMessage(err)}\n`);
    }
  }
  io.out(render({ value: { requeued: done }, names: done.map((r) => `deadletter/${r.deadLetter.id}`), text: lines.join('') }, format));
  if (failed > 0) throw new CliError(`${failed} of ${ids.length} dead letters were not requeued (see above)`);
}
