import type { PushInput, PushOutcome } from '../../client/index.js';

/**
 * `queenctl push QUEUE -`: one message a line, as `kcat -P` reads them.
 *
 * A line is DATA (JSON, or any text with --raw), or with -K SEP
 * "TRANSACTIONID SEP DATA" (split at the first SEP), so a re-run of the same
 * input is deduplicated. Empty lines are skipped; a trailing CR is dropped.
 *
 * Lines go out in batches of at most `batch`, each batch as soon as the
 * previous answer is in: a batch holds what has been read by then, so a slow
 * producer (`tail -f log | queenctl push q -`) is pushed line by line and a
 * file in full batches. Every line gets its own result, in order. A line that
 * does not parse is reported and skipped, and the lines before and after it
 * are pushed all the same. Only a request that fails as a whole (no server,
 * a refusal of the batch) stops the run: its lines are reported as not
 * confirmed, and no later line is read.
 */

export type ParsedLine = { ok: true; item: PushInput } | { ok: false; error: string };

export function parseLine(line: string, o: { delimiter: string | undefined; raw: boolean }): ParsedLine {
  const text = line.endsWith('\r') ? line.slice(0, -1) : line;
  let transactionId: string | undefined;
  let data = text;
  if (o.delimiter !== undefined) {
    const at = text.indexOf(o.delimiter);
    if (at === -1) return { ok: false, error: `has no "${o.delimiter}" between the transactionId and the data (-K)` };
    transactionId = text.slice(0, at);
    if (transactionId === '') return { ok: false, error: 'has an empty transactionId' };
    data = text.slice(at + o.delimiter.length);
  }
  let value: unknown = data;
  if (!o.raw) {
    try {
      value = JSON.parse(data);
    } catch (err) {
      return { ok: false, error: `must be JSON (or use --raw): ${(err as Error).message}` };
    }
  }
  return { ok: true, item: { data: value, ...(transactionId !== undefined ? { transactionId } : {}) } };
}

/** One input line's answer. */
export type LineResult = ({ line: number } & PushOutcome) | { line: number; status: 'invalid'; error: string };

export interface PushSummary {
  lines: number;
  queued: number;
  duplicate: number;
  failed: number;
  invalid: number;
  /** Set when a request failed as a whole: its lines (from..to) have no answer. */
  stopped?: { from: number; to: number; error: unknown };
}

const NOT_YET = Symbol('not yet');

/**
 * The source in batches of 1..max: waits for one item, then adds those that
 * are ready without waiting (a turn of the event loop decides "ready").
 */
export async function* readyBatches<T>(source: AsyncIterable<T>, max: number): AsyncGenerator<T[]> {
  const it = source[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<T>> | undefined;
  try {
    yield* batchesOf();
  } finally {
    // A consumer that stops early leaves one read in flight; its failure is no one's to handle.
    pending?.catch(() => undefined);
  }

  async function* batchesOf(): AsyncGenerator<T[]> {
    for (;;) {
      const first = await (pending ?? it.next());
      pending = undefined;
      if (first.done) return;
      const batch = [first.value];
      let ended = false;
      while (batch.length < max) {
        pending = it.next();
        const r = await Promise.race([pending, new Promise<typeof NOT_YET>((resolve) => setImmediate(() => resolve(NOT_YET)))]);
        if (r === NOT_YET) break;
        pending = undefined;
        if (r.done) {
          ended = true;
          break;
        }
        batch.push(r.value);
      }
      yield batch;
      if (ended) return;
    }
  }
}

export async function pushLines(
  lines: AsyncIterable<string> | Iterable<string>,
  send: (items: PushInput[]) => Promise<PushOutcome[]>,
  o: { batch: number; delimiter: string | undefined; raw: boolean },
  report: (r: LineResult) => void,
): Promise<PushSummary> {
  const summary: PushSummary = { lines: 0, queued: 0, duplicate: 0, failed: 0, invalid: 0 };
  const numbered = number(lines);
  for await (const batch of readyBatches(numbered, o.batch)) {
    // Parse the whole batch first, so results are reported in line order.
    const parsed = batch.map(({ n, text }) => ({ n, p: parseLine(text, o) }));
    const items = parsed.flatMap((x) => (x.p.ok ? [x.p.item] : []));
    let outcomes: PushOutcome[] = [];
    if (items.length > 0) {
      try {
        outcomes = await send(items);
      } catch (error) {
        // Lines before the batch are answered; the invalid ones of this batch are reported too.
        for (const x of parsed) if (!x.p.ok) note({ line: x.n, status: 'invalid', error: x.p.error });
        summary.lines += parsed.filter((x) => !x.p.ok).length;
        summary.stopped = { from: batch[0]!.n, to: batch.at(-1)!.n, error };
        return summary;
      }
    }
    let k = 0;
    for (const x of parsed) note(x.p.ok ? { line: x.n, ...outcomes[k++]! } : { line: x.n, status: 'invalid', error: x.p.error });
    summary.lines += parsed.length;
  }
  return summary;

  function note(r: LineResult) {
    if (r.status === 'queued') summary.queued++;
    else if (r.status === 'duplicate') summary.duplicate++;
    else if (r.status === 'failed') summary.failed++;
    else summary.invalid++;
    report(r);
  }
}

/** Numbers the lines from 1 and drops the empty ones (after the number is taken, so numbers match the input). */
async function* number(lines: AsyncIterable<string> | Iterable<string>): AsyncGenerator<{ n: number; text: string }> {
  let n = 0;
  for await (const text of lines) {
    n++;
    if (text === '' || text === '\r') continue;
    yield { n, text };
  }
}
