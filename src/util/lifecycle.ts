import { LifecycleError } from '../errors.js';

/**
 * The one start/stop contract every long-lived component follows.
 *
 * States and transitions:
 *
 *   idle --start()--> starting --(onStart ok)--> running --stop()--> stopping --> stopped
 *                        |                                                ^
 *                        +--(onStart throws)--> stopped ------------------+
 *
 * start() on a component that is not idle throws; stop() is idempotent and
 * may be called in any state (stop() during starting waits for the start to
 * settle, then stops). Every running component is listed in a process-wide
 * registry so tests can fail when one is leaked.
 */
export type LifecycleState = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped';

const live = new Set<Component>();

/** Components started and not yet stopped (tests assert this is empty). */
export function liveComponents(): string[] {
  return [...live].map((c) => c.componentName);
}

export abstract class Component {
  private stateValue: LifecycleState = 'idle';
  private starting: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(readonly componentName: string) {}

  get state(): LifecycleState {
    return this.stateValue;
  }

  protected abstract onStart(): Promise<void>;
  protected abstract onStop(): Promise<void>;

  async start(): Promise<void> {
    if (this.stateValue !== 'idle') throw new LifecycleError(`${this.componentName}: start() in state ${this.stateValue}`);
    this.stateValue = 'starting';
    live.add(this);
    this.starting = (async () => {
      try {
        await this.onStart();
        this.stateValue = 'running';
      } catch (err) {
        this.stateValue = 'stopping';
        try {
          await this.onStop();
        } catch {
          // The start failure is the error worth reporting.
        }
        this.stateValue = 'stopped';
        live.delete(this);
        throw err;
      }
    })();
    return this.starting;
  }

  stop(): Promise<void> {
    if (this.stopping) return this.stopping;
    this.stopping = (async () => {
      if (this.stateValue === 'idle' || this.stateValue === 'stopped') {
        this.stateValue = 'stopped';
        return;
      }
      if (this.starting) await this.starting.catch(() => undefined);
      if (this.stateValue !== 'running') return;
      this.stateValue = 'stopping';
      try {
        await this.onStop();
      } finally {
        this.stateValue = 'stopped';
        live.delete(this);
      }
    })();
    return this.stopping;
  }

  protected assertRunning(): void {
    if (this.stateValue !== 'running') throw new LifecycleError(`${this.componentName} is ${this.stateValue}, not running`);
  }
}
