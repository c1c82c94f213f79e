import test from 'ava';
import type { PrimaryMessage, WorkerMessage } from '../../src/cluster/protocol.js';
import { STOPPING } from '../../src/cluster/protocol.js';
import { WorkerFleet, type FleetCluster, type FleetWorker } from '../../src/cluster/workerFleet.js';
import { WorkerLink, type WorkerChannel } from '../../src/cluster/workerLink.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { waitFor } from '../helpers/leaks.js';

/**
 * The pod's two-phase stop (docs/scaling.md, "Stopping") as a state machine,
 * without processes: the fleet runs on a stand-in for node:cluster whose
 * workers record what the primary sent them, and the test plays each
 * worker's side (started, drained, exit); the worker's link runs on a
 * stand-in IPC channel.
 */

class FakeWorker implements FleetWorker {
  readonly sent: PrimaryMessage[] = [];
  readonly signals: NodeJS.Signals[] = [];
  connected = true;
  readonly process: FleetWorker['process'];

  constructor(
    private readonly cluster: FakeCluster,
    pid: number,
  ) {
    this.process = {
      pid,
      kill: (signal) => {
        this.signals.push(signal);
        // SIGKILL cannot be refused: the worker is gone, and node:cluster reports its exit.
        if (signal === 'SIGKILL' && this.connected) queueMicrotask(() => this.cluster.exit(this, null, 'SIGKILL'));
        return true;
      },
    };
  }

  isConnected(): boolean {
    return this.connected;
  }

  send(m: PrimaryMessage): boolean {
    this.sent.push(m);
    return true;
  }

  /** What stop() told this worker, in order (readiness asks left out). */
  get told(): string[] {
    return this.sent.filter((m) => m.type === 'queen:drain' || m.type === 'queen:leave').map((m) => m.type);
  }
}

class FakeCluster implements FleetCluster {
  readonly isPrimary = true;
  readonly forked: FakeWorker[] = [];
  private onMsg: ((w: FleetWorker, m: unknown) => void) | undefined;
  private onEnd: ((w: FleetWorker, code: number | null, signal: string | null) => void) | undefined;

  fork(): FakeWorker {
    const w = new FakeWorker(this, 1000 + this.forked.length);
    this.forked.push(w);
    return w;
  }
  onMessage(listener: (w: FleetWorker, m: unknown) => void): void {
    this.onMsg = listener;
  }
  onExit(listener: (w: FleetWorker, code: number | null, signal: string | null) => void): void {
    this.onEnd = listener;
  }
  say(w: FakeWorker, m: WorkerMessage): void {
    this.onMsg!(w, m);
  }
  exit(w: FakeWorker, code: number | null, signal: string | null = null): void {
    w.connected = false;
    this.onEnd!(w, code, signal);
  }
}

async function fleetOf(opts: { drainTimeoutMs?: number; leaveTimeoutMs?: number; start?: boolean } = {}) {
  const cluster = new FakeCluster();
  const fleet = new WorkerFleet({
    workers: 2,
    logger: silentLogger,
    readinessTimeoutMs: 1_000,
    drainTimeoutMs: opts.drainTimeoutMs ?? 60_000,
    leaveTimeoutMs: opts.leaveTimeoutMs ?? 60_000,
    cluster,
  });
  await fleet.start();
  const [w0, w1] = cluster.forked as [FakeWorker, FakeWorker];
  if (opts.start !== false) {
    cluster.say(w0, { type: 'queen:started' });
    cluster.say(w1, { type: 'queen:started' });
    await fleet.up;
  }
  return { cluster, fleet, w0, w1 };
}

/** Lets the fleet act on what it was just told (its waits wake through promises and timers). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

test('stop(): every worker drains first, and only when all have drained are they told to leave', async (t) => {
  const { cluster, fleet, w0, w1 } = await fleetOf();
  const stopped = fleet.stop();
  await waitFor('both workers told to drain', () => w0.told.length === 1 && w1.told.length === 1);
  t.deepEqual([w0.told, w1.told], [['queen:drain'], ['queen:drain']]);
  t.deepEqual(await fleet.readiness(), { ready: false, reasons: [STOPPING], workers: [] }, 'not ready at once');

  cluster.say(w0, { type: 'queen:drained' });
  await settle();
  t.deepEqual(w0.told, ['queen:drain'], 'a drained worker stays in the group while another still drains');
  cluster.say(w1, { type: 'queen:drained' });
  await waitFor('both workers told to leave', () => w0.told.length === 2 && w1.told.length === 2);
  t.deepEqual(
    [w0.told, w1.told],
    [
      ['queen:drain', 'queen:leave'],
      ['queen:drain', 'queen:leave'],
    ],
  );

  cluster.exit(w0, 0);
  cluster.exit(w1, 0);
  await stopped;
  t.true(fleet.clean);
  t.is(cluster.forked.length, 2, 'no worker replaced during the stop');
  t.deepEqual([w0.signals, w1.signals], [[], []]);
});

test('a worker that dies mid-drain is not replaced; the others leave once drained, and the stop is not clean', async (t) => {
  const { cluster, fleet, w0, w1 } = await fleetOf();
  const stopped = fleet.stop();
  await waitFor('both workers told to drain', () => w0.told.length === 1 && w1.told.length === 1);
  cluster.exit(w1, 1);
  await settle();
  t.deepEqual(w0.told, ['queen:drain'], 'a death does not end phase 1 for the workers still draining');
  cluster.say(w0, { type: 'queen:drained' });
  await waitFor('the survivor told to leave', () => w0.told.length === 2);
  t.deepEqual(w1.told, ['queen:drain']);
  // A drained report racing its worker's exit changes nothing.
  cluster.say(w1, { type: 'queen:drained' });
  cluster.exit(w0, 0);
  await stopped;
  t.false(fleet.clean, 'a worker exited 1');
  t.is(cluster.forked.length, 2);
});

test('a drained report that comes after its worker exited is ignored, and a worker exiting 0 before it drained ends phase 1 for it', async (t) => {
  const { cluster, fleet, w0, w1 } = await fleetOf();
  const stopped = fleet.stop();
  await waitFor('both workers told to drain', () => w0.told.length === 1 && w1.told.length === 1);
  cluster.exit(w0, 0);
  cluster.say(w0, { type: 'queen:drained' });
  await settle();
  t.deepEqual(w1.told, ['queen:drain'], 'worker 1 has not drained: no leave yet');
  cluster.say(w1, { type: 'queen:drained' });
  await waitFor('worker 1 told to leave', () => w1.told.length === 2);
  t.deepEqual(w0.told, ['queen:drain'], 'an exited worker is told nothing more');
  cluster.exit(w1, 0);
  await stopped;
  t.true(fleet.clean);
});

test('stop() before any worker started: each gets its drain once it has started, then all leave', async (t) => {
  const { cluster, fleet, w0, w1 } = await fleetOf({ start: false });
  const stopped = fleet.stop();
  await t.throwsAsync(fleet.up, { message: 'stopped before every worker started' });
  await settle();
  t.deepEqual([w0.told, w1.told], [[], []], 'a worker still starting cannot be told yet');
  cluster.say(w0, { type: 'queen:started' });
  t.deepEqual(w0.told, ['queen:drain']);
  cluster.say(w0, { type: 'queen:drained' });
  await settle();
  t.deepEqual(w0.told, ['queen:drain'], 'worker 1 is still to start and drain');
  cluster.say(w1, { type: 'queen:started' });
  cluster.say(w1, { type: 'queen:drained' });
  await waitFor('both workers told to leave', () => w0.told.length === 2 && w1.told.length === 2);
  cluster.exit(w0, 0);
  cluster.exit(w1, 0);
  await stopped;
  t.true(fleet.clean);
  t.is(cluster.forked.length, 2);
});

test('the drain bound: past drainTimeoutMs all leave anyway; one that never started gets SIGTERM, and no drain when it starts late', async (t) => {
  const { cluster, fleet, w0, w1 } = await fleetOf({ start: false, drainTimeoutMs: 50 });
  cluster.say(w0, { type: 'queen:started' });
  const stopped = fleet.stop();
  await waitFor('worker 0 told to drain', () => w0.told.length === 1);
  // Neither worker reports drained: phase 2 starts at the bound.
  await waitFor('worker 0 told to leave', () => w0.told.length === 2, 5_000);
  t.deepEqual(w0.told, ['queen:drain', 'queen:leave']);
  t.deepEqual(w1.signals, ['SIGTERM'], 'a worker still starting stops as a single process does');
  cluster.say(w1, { type: 'queen:started' });
  t.deepEqual(w1.told, [], 'phase 2 began: a late start is told nothing');
  cluster.exit(w0, 0);
  cluster.exit(w1, 0);
  await stopped;
  t.true(fleet.clean, 'both exited 0');
});

test('the leave bound: a worker still running leaveTimeoutMs after leave is SIGKILLed, and the stop is not clean', async (t) => {
  const { cluster, fleet, w0, w1 } = await fleetOf({ leaveTimeoutMs: 50 });
  const stopped = fleet.stop();
  await waitFor('both workers told to drain', () => w0.told.length === 1 && w1.told.length === 1);
  cluster.say(w0, { type: 'queen:drained' });
  cluster.say(w1, { type: 'queen:drained' });
  await waitFor('both workers told to leave', () => w0.told.length === 2 && w1.told.length === 2);
  cluster.exit(w0, 0);
  await stopped;
  t.deepEqual([w0.signals, w1.signals], [[], ['SIGKILL']]);
  t.false(fleet.clean);
  t.is(cluster.forked.length, 2);
});

test('killAll(): the forced stop SIGKILLs every worker still running', async (t) => {
  const { cluster, fleet, w0, w1 } = await fleetOf();
  const stopped = fleet.stop();
  await waitFor('both workers told to drain', () => w0.told.length === 1 && w1.told.length === 1);
  fleet.killAll();
  await stopped;
  t.deepEqual([w0.signals, w1.signals], [['SIGKILL'], ['SIGKILL']]);
  t.false(fleet.clean);
  t.is(cluster.forked.length, 2);
});

test('outside a stop, a dead worker is replaced (the stop is what turns replacement off)', async (t) => {
  const { cluster, fleet, w1 } = await fleetOf();
  cluster.exit(w1, 1);
  await waitFor('worker 1 replaced', () => cluster.forked.length === 3);
  const stopped = fleet.stop();
  const w2 = cluster.forked[2]!;
  cluster.say(w2, { type: 'queen:started' });
  await waitFor('the replacement told to drain', () => w2.told.length === 1);
  for (const w of [cluster.forked[0]!, w2]) cluster.say(w, { type: 'queen:drained' });
  await waitFor('both told to leave', () => w2.told.length === 2);
  for (const w of [cluster.forked[0]!, w2]) cluster.exit(w, 0);
  await stopped;
  t.true(fleet.clean);
});

class FakeChannel implements WorkerChannel {
  readonly sent: WorkerMessage[] = [];
  private listener: ((m: unknown) => void) | undefined;
  onMessage(listener: (m: unknown) => void): void {
    this.listener = listener;
  }
  send(m: WorkerMessage): boolean {
    this.sent.push(m);
    return true;
  }
  deliver(m: PrimaryMessage): void {
    this.listener!(m);
  }
  types(): string[] {
    return this.sent.map((m) => m.type);
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

test('WorkerLink: drain answers not ready at once, runs the drain once, and says drained only when it has settled', async (t) => {
  const channel = new FakeChannel();
  const link = new WorkerLink(1, 1_000, channel);
  const drain = deferred();
  let drains = 0;
  let leaves = 0;
  link.onStop({
    drain: () => {
      drains++;
      return drain.promise;
    },
    leave: () => leaves++,
  });
  link.serve(() => Promise.resolve({ ready: true, reasons: [] }));
  t.false(link.stopping);

  channel.deliver({ type: 'queen:drain' });
  channel.deliver({ type: 'queen:drain' });
  t.true(link.stopping);
  t.is(drains, 1, 'a repeated drain is ignored');
  t.deepEqual(
    await link.readiness(),
    { ready: false, reasons: [STOPPING], workers: [] },
    'the pod is not ready, without asking the primary',
  );
  channel.deliver({ type: 'queen:ready-ask', id: 7 });
  await waitFor('the ready answer', () => channel.sent.some((m) => m.type === 'queen:ready-answer'));
  const answer = channel.sent.find((m) => m.type === 'queen:ready-answer');
  t.like(answer, { id: 7, answer: { slot: 1, ready: false, reasons: [STOPPING] } }, 'its own answer to the primary is not ready either');
  await settle();
  t.false(channel.types().includes('queen:drained'), 'not drained while the drain runs');
  t.false(channel.types().includes('queen:fleet-ready'));

  drain.resolve();
  await waitFor('drained', () => channel.types().includes('queen:drained'));
  t.is(leaves, 0, 'drained is not leaving: the primary says when');
  channel.deliver({ type: 'queen:leave' });
  channel.deliver({ type: 'queen:leave' });
  t.is(leaves, 1, 'a repeated leave is ignored');
  t.is(channel.types().filter((x) => x === 'queen:drained').length, 1);
});

test('WorkerLink: a failed drain still says drained (phase 2 must not wait for it), and a leave during the drain runs at once', async (t) => {
  const channel = new FakeChannel();
  const link = new WorkerLink(0, 1_000, channel);
  const drain = deferred();
  let leaves = 0;
  link.onStop({ drain: () => drain.promise, leave: () => leaves++ });
  channel.deliver({ type: 'queen:drain' });
  channel.deliver({ type: 'queen:leave' });
  t.is(leaves, 1, 'leave does not wait for the drain: the primary has given up on it');
  drain.reject(new Error('boom'));
  await waitFor('drained', () => channel.types().includes('queen:drained'));
  t.true(link.stopping);
  channel.deliver({ type: 'queen:drain' });
  t.is(channel.types().filter((x) => x === 'queen:drained').length, 1, 'no second drain after leaving');
});
