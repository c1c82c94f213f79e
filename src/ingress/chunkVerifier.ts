import type { KafkaMessage } from 'kafkajs';
import { trace, type SpanContext } from '@opentelemetry/api';
import { isRetriable, LifecycleError } from '../errors.js';
import type { PushItem, PushResult } from '../engine/writer.js';
import type { Fusion } from '../fusion/fusion.js';
import type { Logger } from '../telemetry/logger.js';
import { inSpan, parentOrLinks, recording, spanContextOf, SpanKind } from '../telemetry/tracing.js';
import { backoffMs, pause } from '../util/backoff.js';
import type { QueuedChunk } from './batchIntake.js';
import { undecodableReason } from './codecs.js';
import { DeadLetterWriteError, type DeadLetter, type DeadLetterProducer } from './deadLetter.js';
import type { HaltedPartitions } from './haltedPartitions.js';
import type { IngressMetrics } from './ingressMetrics.js';
import type { KafkaIngressOptions } from './ingressOptions.js';
import { mapRecord, type MappingOptions } from './recordMapping.js';
import { originSource } from '../engine/frames.js';
import type { ConsumerSupervisor } from './supervisor.js';
import type { VerdictCommits } from './verdictCommits.js';

/** The chunks one lane step verifies together: their records as one submission, committed as one. */
interface Submission {
  topic: string;
  partition: number;
  messages: KafkaMessage[];
  isRunning: () => boolean;
  isStale: () => boolean;
  /** Of its oldest chunk: what the commit latency is measured from. */
  fetchedAt: bigint;
  fetchedAtMs: number;
}

/** What verification needs of the component around it. */
export interface VerifierHost {
  /** Set by stop(): no new chunk starts; retry loops give up (uncommitted, hence redelivered later). */
  draining(): boolean;
  /** Aborted by stop(): ends every backoff at once. */
  readonly signal: AbortSignal;
  /** A chunk failed non-retriably: the consumer restarts from its commits (batchIntake.ts). */
  failed(err: Error): void;
  /** Each topic's queue and mapping (QUEEN_INGRESS_MAPPING, the missing-id policy). */
  queueOf(topic: string): string;
  mappingOf(topic: string): MappingOptions;
}

/**
 * Verification: one lane step's records get their verdicts, and only then is
 * their commit advanced. Every record is mapped; the good ones go to the
 * fusion layer (retried while the failure is retriable); the rest, and every
 * item the engine answers `failed`, become dead letters, written to the
 * dead-letter topic and acknowledged before the commit. Nothing is committed
 * past a record without a PostgreSQL verdict (queued/duplicate) or an
 * acknowledged dead-letter write.
 *
 * States of one submission: mapping -> pushing (untilDone) -> dead-lettering
 * (writeDeadLetters) -> verified (commit advanced: verdictCommits.ts), or
 * abandoned from any of them (shutdown, a rebalance, a stale batch: nothing
 * committed, so the records are redelivered and come back as duplicates), or
 * halted: a record under errorsTolerance 'none' or missingId 'fail' halts its
 * partition before dead-lettering, uncommitted; a dead-letter write that
 * fails halts it from the first failure and retries with backoff, and the
 * partition resumes once the write succeeds (haltedPartitions.ts). Under
 * deadLetterErrorsTolerance 'all' such records are skipped instead, logged
 * and counted.
 */
export class ChunkVerifier {
  constructor(
    private readonly host: VerifierHost,
    private readonly fusion: Fusion,
    private readonly opts: KafkaIngressOptions,
    private readonly deadLetters: DeadLetterProducer,
    private readonly halted: HaltedPartitions,
    private readonly supervisor: ConsumerSupervisor,
    private readonly commits: VerdictCommits,
    private readonly log: Logger,
    private readonly m: IngressMetrics,
  ) {}

  /** One lane step: its chunks' records as one submission, in a consumer span. False = abandoned (not committed). */
  async verify(chunks: QueuedChunk[]): Promise<boolean> {
    const first = chunks[0]!;
    const messages = chunks.length === 1 ? first.messages : chunks.flatMap((c) => c.messages);
    const sub: Submission = {
      topic: first.payload.batch.topic,
      partition: first.payload.batch.partition,
      messages,
      isRunning: () => chunks.every((c) => c.payload.isRunning()),
      isStale: () => chunks.some((c) => c.payload.isStale()),
      fetchedAt: first.fetchedAt,
      fetchedAtMs: first.fetched.at,
    };
    try {
      const { parent, links } = parentOrLinks(producerContexts(messages));
      return await inSpan(
        `process ${sub.topic}`,
        { kind: SpanKind.CONSUMER, parent, links, attributes: this.chunkAttributes(sub.topic, sub.partition, messages) },
        () => this.handleChunk(sub),
      );
    } catch (err) {
      this.host.failed(err as Error);
      return false;
    }
  }

  /** One submission of a lane: verdicts for all, then advance its commit. False = abandoned (not committed). */
  private async handleChunk(sub: Submission): Promise<boolean> {
    const startedAtMs = Date.now();
    const { messages, isRunning, isStale, fetchedAt, fetchedAtMs } = sub;
    const batch = { topic: sub.topic, partition: sub.partition };
    if (this.host.draining() || !isRunning() || isStale()) return false;
    const queue = this.host.queueOf(batch.topic);
    const letters: DeadLetter[] = [];
    const items: PushItem[] = [];
    const itemRecords: KafkaMessage[] = [];
    const mapping = this.host.mappingOf(batch.topic);
    /** The first record that must halt the partition instead of being dead-lettered. */
    let haltAt: DeadLetter | undefined;
    const mustHalt = (l: DeadLetter, halt: boolean) => {
      if ((halt || this.opts.errorsTolerance === 'none') && (!haltAt || BigInt(l.record.offset) < BigInt(haltAt.record.offset))) haltAt = l;
    };
    // Framed values' schemas not cached yet (a loop, no await, when there are none); an unreachable registry halts the partition until it answers.
    const registry = this.opts.schemaRegistry;
    const toFetch = registry ? registry.firstToFetch(messages) : -1;
    if (registry && toFetch >= 0) {
      const { topic, partition } = batch;
      const offset = messages[toFetch]!.offset;
      const fetched = await registry.fetchUntilDone(topic, messages, {
        isRunning,
        isStale,
        signal: this.host.signal,
        halt: (reason) => this.halted.halt({ topic, partition, offset, reason, at: Date.now(), cause: 'schema-registry' }),
        resume: () => this.halted.resume(topic, partition, 'written'),
      });
      if (!fetched) return false;
    }
    // Every record of the chunk shares its topic-partition: that part of the origin is encoded once.
    const source = mapping.keepOrigin ? originSource(batch.topic, batch.partition) : undefined;
    for (const m of messages) {
      const undecodable = undecodableReason(m);
      if (undecodable) {
        const l: DeadLetter = {
          topic: batch.topic,
          partition: batch.partition,
          record: m,
          reason: undecodable,
          errorClass: 'UndecodableBatchError',
          stage: 'KAFKA_CONSUME',
          className: 'queen.ingress.Codecs',
        };
        letters.push(l);
        mustHalt(l, false);
        continue;
      }
      const mapped = mapRecord(batch.topic, queue, batch.partition, m, mapping, source);
      if (mapped.ok) {
        items.push(mapped.item);
        itemRecords.push(m);
      } else {
        const l: DeadLetter = {
          topic: batch.topic,
          partition: batch.partition,
          record: m,
          reason: mapped.reason,
          errorClass: 'ValidationError',
          stage: mapped.stage,
          className: 'queen.ingress.RecordMapping',
        };
        letters.push(l);
        mustHalt(l, mapped.halt);
      }
    }

    if (haltAt) {
      // Halting: store nothing past the first halting record (records before it are stored, not committed: duplicates later).
      const firstBad = BigInt(haltAt.record.offset);
      const keep = itemRecords.findIndex((m) => BigInt(m.offset) > firstBad);
      if (keep >= 0) {
        items.length = keep;
        itemRecords.length = keep;
      }
    }
    const results = await this.untilDone(() => this.fusion.submit(items), isRunning, isStale, 'pushing a batch');
    if (!results) return false; // abandoned: not committed, will be redelivered
    let queued = 0;
    let duplicates = 0;
    // Each record's verdict, only for an observer (tests, benchmarks): a Map
    // entry and an object per record that the commit itself does not need.
    const observed = this.opts.onCommitted !== undefined;
    const statusOf = new Map<string, 'queued' | 'duplicate' | 'skipped'>();
    results.forEach((r: PushResult, i) => {
      if (r.status === 'failed') {
        const l: DeadLetter = {
          topic: batch.topic,
          partition: batch.partition,
          record: itemRecords[i]!,
          reason: r.error ?? 'rejected by the log',
          errorClass: 'RejectedByLog',
          stage: 'TASK_PUT',
          className: 'queen.engine.LogWriter',
        };
        letters.push(l);
        mustHalt(l, false);
      } else {
        if (observed) statusOf.set(itemRecords[i]!.offset, r.status);
        if (r.status === 'queued') queued++;
        else duplicates++;
      }
    });
    if (haltAt) {
      // Halt instead of dead-lettering: nothing of this chunk is committed
      // (verdicts already stored come back as duplicates after the fix).
      this.halted.halt({
        topic: batch.topic,
        partition: batch.partition,
        offset: haltAt.record.offset,
        reason: haltAt.reason,
        at: Date.now(),
        cause: 'bad-record',
      });
      return false;
    }
    let skipped = 0;
    if (letters.length > 0) {
      const outcome = await this.writeDeadLetters(batch, letters, isRunning, isStale);
      if (!outcome) return false;
      skipped = outcome.skipped.length;
      for (const l of outcome.skipped) if (observed) statusOf.set(l.record.offset, 'skipped');
      const written = letters.length - skipped;
      if (written > 0) {
        this.m.dead?.inc(written);
        this.log.warn(
          { topic: batch.topic, partition: batch.partition, count: written, first: letters[0]!.reason },
          'records dead-lettered',
        );
      }
    }
    this.m.records?.inc(queued, 'queued');
    this.m.records?.inc(duplicates, 'duplicate');
    this.m.records?.inc(letters.length - skipped, 'dead_lettered');
    this.m.records?.inc(skipped, 'skipped');
    this.m.messages?.inc(queued, { source: 'kafka', status: 'queued' });
    this.m.messages?.inc(duplicates, { source: 'kafka', status: 'duplicate' });
    this.m.messages?.inc(letters.length, { source: 'kafka', status: 'failed' });
    const span = trace.getActiveSpan();
    if (recording(span))
      span.setAttributes({ 'queen.verdict.queued': queued, 'queen.verdict.duplicate': duplicates, 'queen.verdict.failed': letters.length });

    // Every record of the chunk now has a verdict or an acknowledged dead letter.
    this.supervisor.chunkDone();
    const verdictsAtMs = Date.now();
    const last = messages[messages.length - 1]!.offset;
    const records = observed
      ? messages.map((m) => ({
          offset: m.offset,
          timestamp: m.timestamp,
          status: statusOf.get(m.offset) ?? ('dead_lettered' as const),
        }))
      : [];
    this.commits.advance(batch.topic, batch.partition, (BigInt(last) + 1n).toString(), {
      records,
      fetchedAt,
      fetchedAtMs,
      startedAtMs,
      verdictsAtMs,
    });
    return true;
  }

  /**
   * Writes a submission's dead letters. A failed write (after kafkajs's own
   * retries) re-reads the dead-letter topics' limits (a raised
   * max.message.bytes is seen at once), then, under deadLetterErrorsTolerance
   * 'none', halts the partition visibly from this first failure and retries
   * with backoff until the write succeeds (the partition resumes) or the chunk
   * is abandoned (shutdown, rebalance, restart: nothing committed, so a
   * restarted service reads the record again and halts again at once).
   * Under 'all' the unwritten records are skipped: each is logged and counted.
   * Undefined: abandoned.
   */
  private async writeDeadLetters(
    batch: { topic: string; partition: number },
    letters: DeadLetter[],
    isRunning: () => boolean,
    isStale: () => boolean,
  ): Promise<{ skipped: DeadLetter[] } | undefined> {
    let pending = letters;
    let since: string | undefined;
    for (let attempt = 0; ; attempt++) {
      if (this.host.draining() || !isRunning() || isStale() || this.host.signal.aborted) {
        this.halted.resume(batch.topic, batch.partition, 'abandoned');
        return undefined;
      }
      try {
        await this.deadLetters.send(pending);
        this.halted.resume(batch.topic, batch.partition, 'written');
        return { skipped: [] };
      } catch (err) {
        if (err instanceof LifecycleError) {
          this.halted.resume(batch.topic, batch.partition, 'abandoned');
          return undefined;
        }
        if (err instanceof DeadLetterWriteError) pending = err.remaining;
        const dlqTopic = err instanceof DeadLetterWriteError ? err.dlqTopic : this.deadLetters.topicFor(batch.topic);
        this.m.deadFailures?.inc();
        const limitBefore = this.deadLetters.maxMessageBytes(dlqTopic);
        await this.deadLetters.refreshLimits([dlqTopic]);
        const limitChanged = this.deadLetters.maxMessageBytes(dlqTopic) !== limitBefore;
        const message = (err as Error).message;
        if (this.opts.deadLetterErrorsTolerance === 'all') {
          if (attempt === 0 && limitChanged) continue; // cut again to the limit now in force, once
          for (const l of pending)
            this.log.error(
              { topic: l.topic, partition: l.partition, offset: l.record.offset, reason: l.reason, err: message },
              'record skipped: its dead-letter write failed (QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE=all); it is in neither the log nor the dead-letter topic',
            );
          this.m.deadSkips?.inc(pending.length);
          return { skipped: pending };
        }
        since ??= new Date().toISOString();
        const first = pending[0]!;
        this.halted.halt({
          topic: batch.topic,
          partition: batch.partition,
          offset: first.record.offset,
          reason: `dead-letter write to ${dlqTopic} failing since ${since} (${attempt + 1} attempts, retrying with backoff): ${message}; the record was being dead-lettered because: ${first.reason}`,
          at: Date.now(),
          cause: 'dead-letter-write',
        });
        if (attempt > 0 && attempt % 10 === 0)
          this.log.warn(
            { topic: batch.topic, partition: batch.partition, attempt, err: message },
            'dead-letter write still failing; retrying',
          );
        await pause(backoffMs(attempt, 500, 10_000), this.host.signal);
      }
    }
  }

  /** Messaging semantic conventions for a chunk's consumer span; the per-record ones only for a single record. */
  private chunkAttributes(topic: string, partition: number, messages: KafkaMessage[]): Record<string, string | number> {
    const a: Record<string, string | number> = {
      'messaging.system': 'kafka',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': topic,
      'messaging.destination.partition.id': String(partition),
      'messaging.consumer.group.name': this.opts.groupId,
      'messaging.batch.message_count': messages.length,
      'messaging.kafka.offset': Number(messages[0]!.offset),
    };
    if (messages.length === 1 && messages[0]!.key) a['messaging.kafka.message.key'] = messages[0]!.key.toString();
    return a;
  }

  /**
   * Runs `op` until it succeeds, retrying retriable failures with backoff.
   * Returns undefined when the consumer stops or the batch goes stale first.
   * A non-retriable failure is a bug here (bad input is answered per item),
   * so it is rethrown and kafkajs restarts the consumer from the last commit.
   */
  private async untilDone<T>(op: () => Promise<T>, isRunning: () => boolean, isStale: () => boolean, what: string): Promise<T | undefined> {
    for (let attempt = 0; ; attempt++) {
      if (!isRunning() || isStale()) return undefined;
      try {
        return await op();
      } catch (err) {
        // The fusion layer stopping under us means shutdown: abandon, uncommitted.
        if (err instanceof LifecycleError) return undefined;
        if (!isRetriable(err)) throw err;
        this.m.retries?.inc();
        const wait = backoffMs(attempt, 200, 5_000);
        if (attempt === 0 || attempt % 10 === 0) this.log.warn({ err: (err as Error).message, attempt, wait }, `${what} failed; retrying`);
        await pause(wait, this.host.signal);
        if (this.host.signal.aborted) return undefined;
      }
    }
  }
}

/** The producers' span contexts carried in the records' traceparent headers, in offset order. */
function producerContexts(messages: KafkaMessage[]): SpanContext[] {
  const out: SpanContext[] = [];
  for (const m of messages) {
    const tp = m.headers?.traceparent;
    if (!tp) continue;
    const ts = m.headers?.tracestate;
    const sc = spanContextOf(ts ? `${tp.toString()};${ts.toString()}` : tp.toString());
    if (sc) out.push(sc);
  }
  return out;
}
