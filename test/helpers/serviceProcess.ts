import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitFor } from './leaks.js';

const MAIN = fileURLToPath(new URL('../../src/main.js', import.meta.url));

/**
 * The service as a separate OS process (`node dist/src/main.js`), for tests
 * that kill it. Its JSON log lines are collected; `ready` resolves when it
 * logs the given message.
 */
export class ServiceProcess {
  readonly child: ChildProcess;
  readonly lines: Record<string, unknown>[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private stderr = '';

  /** The end of what the process wrote to stderr (a crash's stack). */
  stderrTail(chars = 4000): string {
    return this.stderr.slice(-chars);
  }

  /** `script` (default: the service) runs with `args`; tests use it for small single-purpose processes. */
  constructor(env: Record<string, string>, script = MAIN, args: string[] = []) {
    this.child = spawn(process.execPath, [script, ...args], {
      env: { PATH: process.env.PATH ?? '', QUEEN_LOG_LEVEL: 'info', QUEEN_HTTP_PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    this.child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        try {
          this.lines.push(JSON.parse(line));
        } catch {
          this.lines.push({ msg: line });
        }
      }
    });
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })));
  }

  async ready(msg = 'consuming', timeoutMs = 60_000): Promise<void> {
    let exited = false;
    void this.exited.then(() => (exited = true));
    await waitFor(
      `service to log "${msg}"`,
      () => {
        if (exited) throw new Error(`service exited before "${msg}": ${this.stderr}\n${JSON.stringify(this.lines.slice(-5))}`);
        return this.lines.some((l) => l.msg === msg);
      },
      timeoutMs,
      50,
    );
  }

  kill(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Ends the process if it still runs (test teardown). */
  async ensureDead(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }
}
