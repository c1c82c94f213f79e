#!/usr/bin/env node
/** queenctl: the operator's command line for queen-ingress (see run.ts and docs/configure.md). */
import { processIo } from './io.js';
import { run } from './run.js';

const interrupted = new AbortController();
process.once('SIGINT', () => interrupted.abort());
process.exitCode = await run(process.argv.slice(2), { ...processIo, signal: interrupted.signal });
