import type { Progress } from './types.js';

/**
 * Progress lines on stderr: "[+12.3s] suite 2/5 dedup-cost | step 3/12 | measuring ...".
 * Plain lines (no carriage returns) so a log file or CI output stays readable.
 */
export class StderrProgress implements Progress {
  private readonly t0 = Date.now();
  private suiteLabel = '';
  private stepLabel = '';

  setSuite(i: number, n: number, name: string): void {
    this.suiteLabel = `suite ${i}/${n} ${name}`;
    this.stepLabel = '';
    this.line('starting');
  }

  step(i: number, n: number, what: string): void {
    this.stepLabel = `step ${i}/${n}`;
    this.line(what);
  }

  note(what: string): void {
    this.line(what);
  }

  private line(what: string): void {
    const t = ((Date.now() - this.t0) / 1000).toFixed(1);
    const parts = [`[+${t}s]`, this.suiteLabel, this.stepLabel, what].filter(Boolean);
    process.stderr.write(parts.join(' | ') + '\n');
  }
}
