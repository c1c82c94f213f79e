// Builds the dual package (npm's prepack runs it, so a tarball is never
// stale): dist/ holds the ES modules and their declarations (tsconfig.json),
// dist/cjs/ the CommonJS build and its own declarations (tsconfig.cjs.json).
// dist/ is emptied first: tsc never deletes, and a module removed from
// src/client must not live on in the tarball.
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(join(here, 'dist'), { recursive: true, force: true });
for (const project of ['tsconfig.json', 'tsconfig.cjs.json']) {
  execFileSync(process.execPath, [tsc, '-p', join(here, project)], { stdio: 'inherit' });
}
// The nearest package.json decides how Node loads a .js file and how
// TypeScript reads a .d.ts beside it; the package's own says "module".
writeFileSync(join(here, 'dist', 'cjs', 'package.json'), JSON.stringify({ type: 'commonjs' }) + '\n');
