import { QueenHttpError, type Queen } from '../../client/index.js';
import { CliError, UsageError } from '../errors.js';
import type { CliIo } from '../io.js';
import { ManifestError, parseManifests } from '../manifest.js';
import { plan, renderPlan } from '../diff.js';

/**
 * `queenctl apply -f FILE [--dry-run]`. Every manifest is checked first;
 * then each queue is configured with mode "replace" (a manifest is the whole
 * configuration, so an option it omits returns to its default). --dry-run
 * reads each live queue and prints the difference instead.
 */
export async function apply(client: Queen, io: CliIo, file: string | undefined, dryRun: boolean): Promise<void> {
  if (!file) throw new UsageError('apply needs -f FILE (use -f - for standard input)');
  let text: string;
  try {
    text = await io.read(file);
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
  let manifests;
  try {
    manifests = parseManifests(text, file === '-' ? '<stdin>' : file);
  } catch (err) {
    if (err instanceof ManifestError) throw new CliError(`${file} is not a valid manifest; nothing was applied\n${err.message}`);
    throw err;
  }
  for (const m of manifests) {
    const q = client.queue(m.name);
    if (dryRun) {
      const live = await q.get().then(
        (info) => info.options,
        (err: unknown) => {
          if (err instanceof QueenHttpError && err.status === 404) return undefined;
          throw err;
        },
      );
      io.out(renderPlan(plan(m, live)).join('\n') + '\n');
      continue;
    }
    const r = await q.configure(m.config, { mode: 'replace' });
    const opts = Object.entries(r.options)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(' ');
    io.out(`queue/${m.name} ${r.created ? 'created' : 'configured'} (${opts})\n`);
  }
  if (dryRun) io.out('dry run: nothing was applied\n');
}
