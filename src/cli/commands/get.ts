import type { Queen } from '../../client/index.js';
import { UsageError } from '../errors.js';
import { structured, table, type OutputFormat } from '../format.js';
import type { CliIo } from '../io.js';

/** `queenctl get queue NAME [-o table|json|yaml]`. json and yaml print the API's answer as is. */
export async function get(client: Queen, io: CliIo, args: string[], format: OutputFormat): Promise<void> {
  const [kind, name, ...rest] = args;
  if (kind !== 'queue' && kind !== 'queues') throw new UsageError(`get: unknown resource "${kind ?? ''}" (try: get queue NAME)`);
  if (!name || rest.length > 0) throw new UsageError('get queue needs exactly one queue NAME');
  const info = await client.queue(name).get();
  if (format !== 'table') {
    io.out(structured(info, format));
    return;
  }
  io.out(
    table(
      ['NAME', 'DEDUP WINDOW (S)', 'PARTITIONS', 'CREATED', 'UPDATED'],
      [[info.queue, String(info.options.dedupWindowSeconds), String(info.partitions), info.createdAt, info.updatedAt]],
    ),
  );
}
