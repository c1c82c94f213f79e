import type { PushInput, PushOutcome, Queen } from '../../client/index.js';
import { CliError, UsageError } from '../errors.js';
import { render, type OutputFormat } from '../format.js';
import type { CliIo } from '../io.js';
import { parseLine, pushLines, type LineResult } from './pushLines.js';

export interface PushArgs {
  partition: string | undefined;
  txn: string | undefined;
  /** -f FILE: one message a line (- is standard input). */
  filename: string | undefined;
  /** -K SEP: each line is TRANSACTIONID SEP DATA. */
  delimiter: string | undefined;
  /** --raw: DATA is text, pushed as a JSON string. */
  raw: boolean;
  batch: string | undefined;
}

export const DEFAULT_PUSH_BATCH = 100;

/**
 * `queenctl push QUEUE [--partition P] [--txn ID] DATA`: one message.
 * `queenctl push QUEUE - | -f FILE [-K SEP] [--raw] [--batch N]`: one message
 * a line, as `kcat -P` reads them (pushLines.ts).
 */
export async function push(client: Queen, io: CliIo, args: string[], opts: PushArgs, format: OutputFormat): Promise<void> {
  const [queue, raw, ...rest] = args;
  if (!queue) throw new UsageError('push needs a QUEUE');
  const q = client.queue(queue);
  const ref = opts.partition !== undefined ? q.partition(opts.partition) : q;
  const file = opts.filename ?? (raw === '-' ? '-' : undefined);
  if (file !== undefined) {
    if ((opts.filename !== undefined && raw !== undefined) || rest.length > 0)
      throw new UsageError('push with lines takes QUEUE and either - or -f FILE, no DATA');
    if (opts.txn !== undefined) throw new UsageError('--txn names one message; with lines use -K SEP (TRANSACTIONID SEP DATA per line)');
    await pushFromLines(io, file, (items) => ref.push(items), opts, format);
    return;
  }
  if (raw === undefined || rest.length > 0)
    throw new UsageError('push needs QUEUE and one DATA argument (JSON; quote it for the shell), or - to read lines');
  if (opts.delimiter !== undefined || opts.batch !== undefined) throw new UsageError('-K and --batch go with lines (push QUEUE -)');
  const parsed = parseLine(raw, { delimiter: undefined, raw: opts.raw });
  if (!parsed.ok) throw new UsageError(`DATA ${parsed.error}`);
  const [r] = (await ref.push([{ ...parsed.item, ...(opts.txn !== undefined ? { transactionId: opts.txn } : {}) }])) as [PushOutcome];
  if (r.status === 'failed') {
    if (format.kind === 'json' || format.kind === 'yaml') io.out(render({ value: r, names: [], text: '' }, format));
    throw new CliError(`push failed: ${r.error ?? 'no reason given'}`);
  }
  const line = `${r.status} id=${r.id} offset=${r.offset} queue=${r.queue} partition=${r.partition} transactionId=${r.transactionId}\n`;
  io.out(render({ value: r, names: [`message/${r.id}`], text: line }, format));
}

async function pushFromLines(
  io: CliIo,
  file: string,
  send: (items: PushInput[]) => Promise<PushOutcome[]>,
  opts: PushArgs,
  format: OutputFormat,
): Promise<void> {
  let batch = DEFAULT_PUSH_BATCH;
  if (opts.batch !== undefined) {
    if (!/^\d+$/.test(opts.batch) || Number(opts.batch) < 1 || Number(opts.batch) > 10_000)
      throw new UsageError(`--batch must be an integer from 1 to 10000, got "${opts.batch}"`);
    batch = Number(opts.batch);
  }
  if (opts.delimiter === '') throw new UsageError('-K needs a non-empty separator');
  let lines: AsyncIterable<string> | Iterable<string>;
  try {
    lines = io.lines ? await io.lines(file, io.signal) : splitLines(await io.read(file));
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const summary = await pushLines(lines, send, { batch, delimiter: opts.delimiter, raw: opts.raw }, (r) =>
    io.out(lineOutput(r, format, io)),
  );
  io.err(
    `pushed ${summary.lines} line${summary.lines === 1 ? '' : 's'}: ${summary.queued} queued, ${summary.duplicate} duplicate, ` +
      `${summary.failed} failed, ${summary.invalid} invalid\n`,
  );
  if (summary.stopped) {
    const { from, to, error } = summary.stopped;
    throw new CliError(
      `lines ${from}-${to} are not confirmed (${(error as Error).message}); the lines before them were answered above, later lines were not read`,
    );
  }
  const bad = summary.failed + summary.invalid;
  if (bad > 0) throw new CliError(`${bad} of ${summary.lines} lines were not pushed (see above); the others were`);
}

function splitLines(text: string): string[] {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/** One line's answer: a status line (table), a JSON object a line, a YAML list item, a name, or the template. */
function lineOutput(r: LineResult, format: OutputFormat, io: CliIo): string {
  const ok = r.status === 'queued' || r.status === 'duplicate';
  switch (format.kind) {
    case 'table':
    case 'wide':
      return ok
        ? `line ${r.line}: ${r.status} id=${r.id} offset=${r.offset} queue=${r.queue} partition=${r.partition} transactionId=${r.transactionId}\n`
        : `line ${r.line}: ${r.status}: ${r.error}\n`;
    case 'json':
      return JSON.stringify(r) + '\n';
    case 'yaml':
      return render({ value: [r], names: [], text: '' }, format);
    case 'name':
    case 'jsonpath':
      // These print only what worked; a failure still needs saying, where it cannot be taken for output.
      if (!ok) io.err(`queenctl: line ${r.line}: ${r.status}: ${r.error}\n`);
      return ok ? render({ value: r, names: [`message/${r.id}`], text: '' }, format) : '';
  }
}
