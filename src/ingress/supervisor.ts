import type { Consumer } from 'kafkajs';
import type { Logger } from '../telemetry/logger.js';
import type { Counter, MetricsRegistry } from '../telemetry/metrics.js';
import { backoffMs } from '../util/backoff.js';

/**
 * Watches the Kafka consumer and restarts it after a crash, so no input can
 * stop ingest silently.
 *
 * States and transitions (status().state):
 *
 *   joining --GROUP_JOIN--> member --CRASH--> crashed --backoff--> restarting --ok--> joining
 *      ^                      |                                       |
 *      |                      +--REBALANCING--> joining               +--throws--> crashed (longer backoff)
 *      +--------------------------------------------------------------+
 *   any --stop()--> stopped
 *
 * A crash is logged once with its cause, counted
 * (queen_ingress_consumer_crashes_total) and makes readiness false until the
 * restarted consumer has joined its group again. Backoff grows with
 * consecutive crashes and resets once a consumer stayed a member for a
 * minute. "Stuck" means a member that cannot make progress: a batch has
 * waited longer than stuckAfterMs for its verdicts, or no heartbeat went out
 * for a whole session timeout. A halted partition also makes readiness false,
 * from the moment it halts, naming the partition, the offset and the cause.
 */
export type SupervisorState = 'joining' | 'member' | 'crashed' | 'restarting' | 'stopped';

export interface HaltedPartition {
  topic: string;
  partition: number;
  /** The record it stopped at. */
  offset: string;
  reason: string;
  /** When it halted (ms since the epoch), or last failed again. */
  at: number;
  /**
   * bad-record: QUEEN_INGRESS_ERRORS_TOLERANCE=none or QUEEN_INGRESS_MISSING_ID=fail; stays until a restart.
   * dead-letter-write: the record's dead-letter write failed; retried with backoff, resumes by itself once it succeeds.
   * schema-registry: the registry did not answer for a framed value's schema; retried with backoff, resumes by itself once it answers.
   */
  cause: 'bad-record' | 'dead-letter-write' | 'schema-registry';
}

export interface IngressStatus {
  state: SupervisorState;
  /** A live group member (joined, not crashed, not rebalancing). */
  member: boolean;
  /** A member that makes no progress (see above). */
  stuck: boolean;
  /** member && !stuck && no halted partition. */
  ready: boolean;
  /** Why not ready, for /health/ready (empty when ready). */
  reasons: string[];
  crashes: number;
  restarts: number;
  lastCrash: { at: string; error: string } | undefined;
  lastHeartbeatAt: string | undefined;
  halted: HaltedPartition[];
}

export interface SupervisedIngress {
  /** Replaces the crashed consumer with a fresh one and runs it; throws when that fails. */
  restart(): Promise<void>;
  /** Start time of the oldest batch in flight, if any. */
  activeBatchSince(): number | undefined;
  halted(): HaltedPartition[];
}

const STABLE_AFTER_MS = 60_000;
/** A consumer that crashes again right after each restart must not flicker ready in between. */
const RECOVERED_AFTER_MS = 10_000;

export class ConsumerSupervisor {
  private stateValue: SupervisorState = 'joining';
  private crashes = 0;
  private restarts = 0;
  private consecutive = 0;
  private memberSince = 0;
  private lastHeartbeat = 0;
  private lastCrash: { at: string; error: string } | undefined;
  /** Set by a crash; cleared when a restarted consumer finishes a chunk or stays a member for RECOVERED_AFTER_MS. */
  private recovering = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void)[] = [];
  private readonly crashCounter: Counter | undefined;
  private readonly restartCounter: Counter | undefined;

  constructor(
    private readonly ingress: SupervisedIngress,
    private readonly opts: { stuckAfterMs: number; sessionTimeoutMs: number; backoffMaxMs: number },
    private readonly log: Logger,
    metrics?: MetricsRegistry,
  ) {
    this.crashCounter = metrics?.counter(
      'queen_ingress_consumer_crashes_total',
      'Kafka consumer crashes (each is followed by a restart with backoff)',
    );
    this.restartCounter = metrics?.counter('queen_ingress_consumer_restarts_total', 'Kafka consumer restarts by the supervisor');
    metrics
      ?.gauge('queen_ingress_consumer_stuck', '1 while the Kafka consumer is a member that makes no progress')
      .collect(() => (this.status().stuck ? 1 : 0));
    metrics
      // min over a pod's workers, as readiness: 1 only when every worker's consumer is ready.
      ?.gauge(
        'queen_ingress_consumer_ready',
        '1 while the Kafka consumer is a live group member, not stuck, no partition halted',
        [],
        'min',
      )
      .collect(() => (this.status().ready ? 1 : 0));
    metrics
      ?.gauge(
        'queen_ingress_halted_partitions',
        'Kafka partitions halted: a record that cannot be stored under QUEEN_INGRESS_ERRORS_TOLERANCE=none or QUEEN_INGRESS_MISSING_ID=fail, or a failing dead-letter write',
      )
      .collect(() => this.ingress.halted().length);
  }

  /** Follows a (new) consumer's events. */
  watch(consumer: Consumer): void {
    for (const off of this.unsubscribe) off();
    const e = consumer.events;
    this.stateValue = 'joining';
    this.unsubscribe = [
      consumer.on(e.GROUP_JOIN, () => {
        if (this.stateValue === 'stopped') return;
        this.stateValue = 'member';
        this.memberSince = Date.now();
        this.lastHeartbeat = Date.now();
      }),
      consumer.on(e.HEARTBEAT, () => {
        this.lastHeartbeat = Date.now();
        if (this.stateValue === 'member' && this.consecutive > 0 && Date.now() - this.memberSince > STABLE_AFTER_MS) this.consecutive = 0;
      }),
      consumer.on(e.REBALANCING, () => {
        if (this.stateValue === 'member') this.stateValue = 'joining';
      }),
      consumer.on(e.CRASH, (event) => this.onCrash(event.payload.error)),
    ];
  }

  /** A batch started: counts as a sign of life for the heartbeat check. */
  progress(): void {
    this.lastHeartbeat = Date.now();
  }

  /** A chunk got its verdicts: the consumer is demonstrably working again. */
  chunkDone(): void {
    if (this.stateValue === 'member') this.recovering = false;
  }

  /**
   * A failure outside kafkajs's own loop that needs a fresh consumer (a
   * pipelined chunk failing non-retriably): handled exactly like a crash.
   */
  fail(error: Error): void {
    this.onCrash(error);
  }

  private onCrash(error: Error): void {
    if (this.stateValue === 'stopped' || this.stateValue === 'crashed') return;
    this.stateValue = 'crashed';
    this.recovering = true;
    this.crashes++;
    this.crashCounter?.inc();
    const wait = backoffMs(this.consecutive++, 1_000, this.opts.backoffMaxMs);
    const cause = causeOf(error);
    this.lastCrash = { at: new Date().toISOString(), error: `${cause.name}: ${cause.message}` };
    this.log.error(
      { err: { name: cause.name, message: cause.message, stack: cause.stack }, crashes: this.crashes, restartInMs: wait },
      'Kafka consumer crashed; restarting',
    );
    this.schedule(wait);
  }

  private schedule(wait: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.restart(), wait);
  }

  private async restart(): Promise<void> {
    if (this.stateValue !== 'crashed') return;
    this.stateValue = 'restarting';
    this.restarts++;
    this.restartCounter?.inc();
    try {
      await this.ingress.restart();
      if ((this.stateValue as SupervisorState) === 'restarting') this.stateValue = 'joining';
    } catch (err) {
      if ((this.stateValue as SupervisorState) === 'stopped') return;
      this.stateValue = 'crashed';
      const wait = backoffMs(this.consecutive++, 1_000, this.opts.backoffMaxMs);
      this.log.warn({ err: (err as Error).message, restartInMs: wait }, 'Kafka consumer restart failed; retrying');
      this.schedule(wait);
    }
  }

  stop(): void {
    this.stateValue = 'stopped';
    clearTimeout(this.timer);
    for (const off of this.unsubscribe) off();
    this.unsubscribe = [];
  }

  status(): IngressStatus {
    const now = Date.now();
    const member = this.stateValue === 'member';
    const reasons: string[] = [];
    if (!member) reasons.push(`consumer is ${this.stateValue}, not a group member`);
    if (member && this.recovering && now - this.memberSince >= RECOVERED_AFTER_MS) this.recovering = false;
    if (member && this.recovering) reasons.push(`consumer restarted after a crash (${this.lastCrash?.error}); not yet shown to work`);
    let stuck = false;
    const since = this.ingress.activeBatchSince();
    if (member && since !== undefined && now - since > this.opts.stuckAfterMs) {
      stuck = true;
      reasons.push(`a batch has waited ${now - since} ms for its verdicts (limit ${this.opts.stuckAfterMs} ms)`);
    }
    if (member && now - this.lastHeartbeat > this.opts.sessionTimeoutMs) {
      stuck = true;
      reasons.push(`no heartbeat for ${now - this.lastHeartbeat} ms (session timeout ${this.opts.sessionTimeoutMs} ms)`);
    }
    const halted = this.ingress.halted();
    for (const h of halted) reasons.push(`partition ${h.topic}[${h.partition}] halted at offset ${h.offset} (${h.cause}): ${h.reason}`);
    return {
      state: this.stateValue,
      member,
      stuck,
      ready: reasons.length === 0,
      reasons,
      crashes: this.crashes,
      restarts: this.restarts,
      lastCrash: this.lastCrash,
      lastHeartbeatAt: this.lastHeartbeat ? new Date(this.lastHeartbeat).toISOString() : undefined,
      halted,
    };
  }
}

function causeOf(err: Error): Error {
  let e = err as Error | undefined;
  for (let i = 0; i < 10 && e && (e as { cause?: unknown }).cause instanceof Error; i++) e = (e as { cause: Error }).cause;
  return e ?? err;
}
