import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Repository root, from dist/src/telemetry/ (compiled) -- also where package.json is in the image. */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The package version and the commit being run (an explicit one, else git's HEAD, else "unknown"). */
export function buildInfo(commit: string | undefined): { version: string; commit: string } {
  let version = 'unknown';
  try {
    version = (JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    // A library embedding without package.json: the version is simply unknown.
  }
  if (commit) return { version, commit };
  try {
    const head = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], {
      cwd: ROOT,
      timeout: 2_000,
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .toString()
      .trim();
    return { version, commit: /^[0-9a-f]{7,40}$/.test(head) ? head : 'unknown' };
  } catch {
    return { version, commit: 'unknown' };
  }
}
