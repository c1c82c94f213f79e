import { QUEUE_MODE_GROUP, type AckItem } from '../../src/engine/acks.js';
import type { PopRequest } from '../../src/engine/pop.js';
import { ReadPath } from '../../src/read/readPath.js';
import { drainJobs, enqueueJobs, JOB_TABLE_SQL } from '../baselines/skipLockedJobs.js';
import { checkpoint, createBenchDatabase } from '../lib/db.js';
import { provisionQueue, pushAll, startEngineRig, type EngineRig } from '../lib/engine.js';
import { fmt, median, percentile } from '../lib/stats.js';
import { bulkLoad, makeItems, MessageFactory, spread, type PartitionCursor } from '../lib/synth.js';
import { target, type Suite, type SuiteContext, type SuiteResult } from '../lib/types.js';

/**
 * Suite: the read side. Everything in-process on the engine (no HTTP: the
 * same ReadPath the routes call), on one private database:
 *
 *  1. push rate: N messages over P partitions, the writer as the service
 *     runs it (dedup on, warm cache);
 *  2. pop+ack rate of the same N, C consumers, batch 1000, ack by
 *     transactionId (the client's ack) -> ratio to (1), and end-to-end
 *     push -> pop -> ack throughput with both running at once;
 *  3. the SKIP LOCKED job-table baseline on the same messages, same
 *     consumers and batch -> ratio;
 *  4. push-commit -> pop-delivery latency: single-message pushes paced at half
 *     the measured end-to-end rate's interval budget, one long-polling consumer;
 *  5. consumer cost as the log grows: (2) again, repeated, after bulk-loading
 *     M more messages into the same partitions (the consumer reads at the
 *     tail);
 *  6. ack -> waiting pop hand-off: one consumer holds a partition's lease,
 *     another long-polls the same group; the time from the first one's
 *     completed ack to the second one's pop answer (the ack's wake-up; the
 *     long poll's safety re-check is 1 s).
 */
export const consume: Suite = {
  name: 'consume',
  async run(ctx: SuiteContext): Promise<SuiteResult> {
    const p = ctx.quick
      ? {
          n: 200_000,
          partitions: 8,
          consumers: 2,
          batch: 1_000,
          pushBundle: 1_000,
          grownBy: 200_000,
          latencySamples: 200,
          latencyRate: 200,
          payloadBytes: 200,
          reps: 2,
          handoffTrials: 200,
        }
      : {
          n: 500_000,
          partitions: 8,
          consumers: 4,
          batch: 1_000,
          pushBundle: 1_000,
          grownBy: 10_000_000,
          latencySamples: 2_000,
          latencyRate: 500,
          payloadBytes: 200,
          reps: 3,
          handoffTrials: 200,
        };
    const db = await createBenchDatabase(ctx.adminUrl, 'consume');
    let rig: EngineRig | undefined;
    let read: ReadPath | undefined;
    try {
      const admin = db.pool(4, 'queen-bench-load');
      const pool = db.pool(p.consumers + 4, 'queen-bench-engine');
      rig = await startEngineRig(pool, { cacheMb: 512 });
      read = new ReadPath(rig.engine, rig.writer, { connectionString: db.url, metrics: rig.metrics });
      await read.start();
      const factory = new MessageFactory('cs', p.payloadBytes);
      const steps = 6;

      // Two writers on disjoint halves of the partitions (a partition is
      // flushed single-flight, as the fusion layer guarantees in the service).
      const pushRate = async (queue: string, cursors: PartitionCursor[]): Promise<number> => {
        const halves = [cursors.slice(0, Math.ceil(cursors.length / 2)), cursors.slice(Math.ceil(cursors.length / 2))];
        const lists = halves.map((cs) => {
          const per = Math.max(1, Math.floor(p.pushBundle / cs.length));
          const out: ReturnType<typeof makeItems>[] = [];
          for (let done = 0; done < p.n / 2; done += per * cs.length) out.push(makeItems(queue, cs, per, factory));
          return out;
        });
        const total = lists.flat().reduce((k, b) => k + b.length, 0);
        const t = performance.now();
        await pushAll(rig!.writer, lists);
        return total / ((performance.now() - t) / 1000);
      };
      const drain = async (queue: string, group: string, expect: number): Promise<number> => {
        let got = 0;
        const t = performance.now();
        await Promise.all(
          Array.from({ length: p.consumers }, async () => {
            for (;;) {
              const req: PopRequest = { queue, consumerGroup: group, batch: p.batch, subscriptionMode: 'all', autoAck: false };
              const r = await read!.pop(req, got >= expect ? 0 : 200);
              if (r.messages.length === 0) {
                if (got >= expect) return;
                continue;
              }
              for (const m of r.messages) JSON.parse(m.payload.toString('utf8'));
              const acks: AckItem[] = r.messages.map((m) => ({
                consumerGroup: group,
                status: 'completed',
                partitionId: m.partitionId,
                transactionId: m.transactionId,
                leaseId: r.leaseId!,
              }));
              const out = await read!.ack(acks);
              const bad = out.find((o) => o.result !== 'acked');
              if (bad) throw new Error(`consume bench: ack answered ${bad.result}`);
              got += r.messages.length;
            }
          }),
        );
        return got / ((performance.now() - t) / 1000);
      };

      // 1 + 2: push, then pop+ack the same messages; repeated on fresh queues.
      const pushRates: number[] = [];
      const popRates: number[] = [];
      for (let r = 0; r < p.reps; r++) {
        ctx.progress.step(
          1,
          steps,
          `rep ${r + 1}/${p.reps}: push ${fmt(p.n)} then pop+ack them (batch ${p.batch}, ${p.consumers} consumers)`,
        );
        const q = `cs_${r}`;
        const cursors = await provisionQueue(admin, rig.engine, q, 3600, p.partitions);
        pushRates.push(await pushRate(q, cursors));
        popRates.push(await drain(q, QUEUE_MODE_GROUP, p.n));
      }
      const push = median(pushRates);
      const pop = median(popRates);

      // End to end: pushing and consuming at once.
      ctx.progress.step(2, steps, 'end to end: push and pop+ack at once');
      const e2eQ = 'cs_e2e';
      const e2eCursors = await provisionQueue(admin, rig.engine, e2eQ, 3600, p.partitions);
      const t0 = performance.now();
      await Promise.all([pushRate(e2eQ, e2eCursors), drain(e2eQ, 'e2e', p.n)]);
      const e2e = p.n / ((performance.now() - t0) / 1000);

      // 3: the SKIP LOCKED job table, same messages, same consumers and batch.
      ctx.progress.step(3, steps, `SKIP LOCKED job table: enqueue ${fmt(p.n)}, drain with ${p.consumers} workers`);
      await admin.query(JOB_TABLE_SQL);
      const jobRates: number[] = [];
      for (let r = 0; r < p.reps; r++) {
        const payloads = Array.from({ length: p.n }, (_, i) => factory.payload(i % p.partitions, i));
        for (let i = 0; i < payloads.length; i += 5_000) await enqueueJobs(admin, 'jobs', payloads.slice(i, i + 5_000));
        await admin.query('VACUUM ANALYZE bench_jobs');
        const t = performance.now();
        const counts = await Promise.all(Array.from({ length: p.consumers }, () => drainJobs(pool, 'jobs', p.batch, () => false)));
        jobRates.push(counts.reduce((a, b) => a + b, 0) / ((performance.now() - t) / 1000));
      }
      const jobs = median(jobRates);

      // 4: push-commit -> pop-delivery latency under light load.
      ctx.progress.step(4, steps, `latency: ${p.latencySamples} single pushes at ${p.latencyRate}/s, one long-polling consumer`);
      const latQ = 'cs_latency';
      const latCursors = await provisionQueue(admin, rig.engine, latQ, 3600, 1);
      const committedAt = new Map<string, number>();
      const lat: number[] = [];
      let stop = false;
      const consumer = (async () => {
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- set by the producer task while this loop awaits
        while (!stop || lat.length < committedAt.size) {
          const r = await read.pop({ queue: latQ, consumerGroup: 'lat', batch: 1_000, subscriptionMode: 'all', autoAck: true }, 1_000);
          const now = performance.now();
          for (const m of r.messages) {
            const c = committedAt.get(m.transactionId);
            if (c !== undefined) lat.push(now - c);
          }
          // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- set by the producer task while this loop awaits
          if (stop && r.messages.length === 0) break;
        }
      })();
      const interval = 1000 / p.latencyRate;
      const tStart = performance.now();
      for (let i = 0; i < p.latencySamples; i++) {
        const due = tStart + i * interval;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((res) => setTimeout(res, wait));
        const items = makeItems(latQ, latCursors, 1, factory);
        await rig.writer.push(items);
        committedAt.set(items[0]!.transactionId!, performance.now());
      }
      stop = true;
      await consumer;
      const p50 = percentile(lat, 50);
      const p99 = percentile(lat, 99);

      // 5: consumer cost as the log grows.
      ctx.progress.step(5, steps, `grow the log by ${fmt(p.grownBy)} messages, then ${p.reps}x push + pop+ack ${fmt(p.n)} at its tail`);
      const grownQ = 'cs_grown';
      const grownCursors = await provisionQueue(admin, rig.engine, grownQ, 3600, p.partitions);
      await bulkLoad(admin, {
        partitions: grownCursors.map((cursor) => ({ cursor, nextOffset: 0 })),
        counts: spread(p.grownBy, grownCursors.length),
        factory,
        segFrames: 1000,
        createdMs: Date.now() - 1000,
        engine: true,
        onProgress: (d, total) => ctx.progress.note(`loaded ${fmt(d)}/${fmt(total)}`),
      });
      await admin.query('ANALYZE queen.log_segments; ANALYZE queen.log_txns; ANALYZE queen.log_partitions');
      await checkpoint(admin);
      // The group starts at the end of the grown log (subscriptionMode new).
      await read.pop({ queue: grownQ, consumerGroup: 'tail', batch: 1, subscriptionMode: 'new', autoAck: false }, 0);
      // Repeated like (2): one drain swung 0.84x-1.22x of the median at 0 over five runs.
      const grownRates: number[] = [];
      for (let r = 0; r < p.reps; r++) {
        await pushRate(grownQ, grownCursors);
        grownRates.push(await drain(grownQ, 'tail', p.n));
      }
      const grown = median(grownRates);

      // 6: a completed ack hands the partition to a long poll waiting on it.
      ctx.progress.step(6, steps, `ack -> waiting pop hand-off: ${p.handoffTrials} trials`);
      const handQ = 'cs_handoff';
      const handCursors = await provisionQueue(admin, rig.engine, handQ, 3600, 1);
      const handoff: number[] = [];
      const popOne = (wait: number) =>
        read!.pop({ queue: handQ, consumerGroup: 'hand', batch: 1, subscriptionMode: 'all', autoAck: false }, wait);
      const ackAll = async (r: Awaited<ReturnType<typeof popOne>>): Promise<void> => {
        const out = await read!.ack(
          r.messages.map((m) => ({
            consumerGroup: 'hand',
            status: 'completed',
            partitionId: m.partitionId,
            transactionId: m.transactionId,
            leaseId: r.leaseId!,
          })),
        );
        if (out.some((o) => o.result !== 'acked')) throw new Error('consume bench: hand-off ack not acked');
      };
      for (let i = 0; i < p.handoffTrials; i++) {
        await rig.writer.push(makeItems(handQ, handCursors, 2, factory));
        const held = await popOne(0);
        if (held.messages.length !== 1) throw new Error('consume bench: hand-off pop found no message');
        const waiting = popOne(30_000);
        // The second pop has found the partition leased and waits for a wake.
        while (read.waiters.parkedOn(handQ) < 1) await new Promise((res) => setImmediate(res));
        const t = performance.now();
        await ackAll(held);
        const got = await waiting;
        handoff.push(performance.now() - t);
        if (got.messages.length !== 1) throw new Error('consume bench: the waiting pop timed out instead of being handed the partition');
        await ackAll(got);
      }
      const handP50 = percentile(handoff, 50);
      const handP99 = percentile(handoff, 99);

      return {
        name: 'consume',
        params: p,
        results: {
          pushMsgPerS: push,
          popAckMsgPerS: pop,
          endToEndMsgPerS: e2e,
          skipLockedMsgPerS: jobs,
          latencyMs: { p50, p99, samples: lat.length },
          grownPopAckMsgPerS: grown,
          ackHandoffMs: { p50: handP50, p99: handP99, samples: handoff.length },
        },
        samples: { pushRates, popRates, jobRates, grownRates, latencyMs: lat, ackHandoffMs: handoff },
        targets: [
          target('pop+ack (batch 1000) / push, same run', pop / push, '>=', 0.8, {
            ratio: true,
            value: `${fmt(pop)} msg/s`,
            baseline: `${fmt(push)} msg/s`,
          }),
          target('push -> pop -> ack end to end', e2e, '>=', 100_000, { value: `${fmt(e2e)} msg/s`, unit: 'msg/s' }),
          target('pop+ack / SKIP LOCKED job table', pop / jobs, '>=', 3, {
            ratio: true,
            value: `${fmt(pop)} msg/s`,
            baseline: `${fmt(jobs)} msg/s`,
          }),
          target('push commit -> pop delivery p99 (light load)', p99, '<=', 50, { value: `${fmt(p99)} ms`, unit: 'ms' }),
          target(`pop+ack at the tail of a log grown by ${fmt(p.grownBy)} / at 0`, grown / pop, '>=', 0.9, {
            ratio: true,
            value: `${fmt(grown)} msg/s`,
            baseline: `${fmt(pop)} msg/s`,
          }),
          target(`completed ack -> waiting pop answer p99 (${p.handoffTrials} trials)`, handP99, '<=', 100, {
            value: `${fmt(handP99)} ms`,
            unit: 'ms',
          }),
        ],
        info: [
          { name: 'push -> pop latency p50', value: `${fmt(p50)} ms` },
          { name: 'completed ack -> waiting pop answer p50', value: `${fmt(handP50)} ms` },
        ],
        notes: [
          "in process, no HTTP: ReadPath.pop / ReadPath.ack are what the routes call; acks by transactionId (the client's ack), one batch call per pop",
          `latency: single-message pushes paced at ${p.latencyRate}/s (light load), one consumer long-polling with autoAck; measured from push commit to pop return`,
          'SKIP LOCKED baseline: claim (UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING) then DELETE, same batch and workers',
        ],
      };
    } finally {
      await read?.stop();
      await rig?.stop();
      await db.drop();
    }
  },
};
