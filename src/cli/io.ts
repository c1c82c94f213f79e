import { open, readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';

/** What a command may touch besides the network; run() gets the real one. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  env: Record<string, string | undefined>;
  /** Reads a file, or standard input for "-". */
  read(path: string): Promise<string>;
  /**
   * A file's or standard input's lines as they arrive (push QUEUE -); they
   * end early when `signal` aborts. Rejects when the file cannot be opened.
   * Without it, read() is split into lines.
   */
  lines?(path: string, signal?: AbortSignal): Promise<AsyncIterable<string>>;
  /** Aborted on Ctrl-C: long-running commands (tail, pop --wait) stop. */
  signal?: AbortSignal;
}

export const processIo: CliIo = {
  out: (t) => void process.stdout.write(t),
  err: (t) => void process.stderr.write(t),
  env: process.env,
  async read(path) {
    if (path !== '-') return readFile(path, 'utf8');
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  },
  async lines(path, signal) {
    // Opened first, so a missing file is an error here rather than a stream event later.
    const input = path === '-' ? process.stdin : (await open(path, 'r')).createReadStream({ encoding: 'utf8' });
    // Ctrl-C ends the input: what was read is pushed and answered, then the summary says how far it got.
    return createInterface({ input, crlfDelay: Infinity, ...(signal ? { signal } : {}) });
  },
};
