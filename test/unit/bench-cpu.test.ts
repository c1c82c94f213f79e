import test from 'ava';
import net from 'node:net';
import { cpuSince, cpuSnapshot, listenerPid, processCpuMs, watchBroker, watchPod } from '../../bench/lib/cpu.js';
import { sizeOverride } from '../../bench/lib/servicePod.js';

// The bench's per-process CPU attribution (bench/lib/cpu.ts) that the
// service-pod rows rely on: a pod's pids and the Kafka broker found by its port.

/** Burns this process's CPU until it has used `ms` more (not wall time: a loaded host must not shorten it). */
function burn(ms: number): void {
  const start = process.cpuUsage();
  let x = 0;
  for (;;) {
    for (let i = 0; i < 100_000; i++) x += Math.sqrt(i);
    const u = process.cpuUsage(start);
    if ((u.user + u.system) / 1000 >= ms) break;
  }
  if (x < 0) throw new Error('unreachable');
}

test.serial('listenerPid finds the process listening on a local port, and nothing for a free port or a remote host', async (t) => {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  try {
    t.is(listenerPid('127.0.0.1', port), process.pid);
    t.is(listenerPid('localhost', port), process.pid);
    t.is(listenerPid('kafka.example.com', port), undefined, 'a remote broker is not looked for');
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  t.is(listenerPid('127.0.0.1', port), undefined, 'nobody listens there any more');
});

test.serial('a watched pod and broker are counted by pid in podMs and brokerMs; unwatched, podMs is 0 and brokerMs NaN', (t) => {
  const unwatched = cpuSnapshot();
  burn(50);
  const d0 = cpuSince(unwatched);
  t.is(d0.podMs, 0);
  t.true(Number.isNaN(d0.brokerMs));

  const stop = watchPod(() => [process.pid]);
  watchBroker(process.pid);
  try {
    const a = cpuSnapshot();
    burn(300);
    const d = cpuSince(a);
    // /proc counts in 10 ms ticks; this process used at least 300 ms between the snapshots.
    t.true(d.podMs >= 250, `podMs ${d.podMs}`);
    t.true(d.brokerMs >= 250, `brokerMs ${d.brokerMs}`);
    t.true(d.clientMs >= 300, `clientMs ${d.clientMs}`);
  } finally {
    stop();
    watchBroker(undefined);
  }
  t.true(processCpuMs(process.pid)! > 0);
  t.is(processCpuMs(2 ** 22 + 1), undefined, 'a pid above pid_max is no process');
});

test.serial('sizeOverride reads a whole number or keeps the default', (t) => {
  const before = process.env.QUEEN_BENCH_RECORDS;
  try {
    delete process.env.QUEEN_BENCH_RECORDS;
    t.is(sizeOverride('QUEEN_BENCH_RECORDS', 100_000), 100_000);
    process.env.QUEEN_BENCH_RECORDS = '20000';
    t.is(sizeOverride('QUEEN_BENCH_RECORDS', 100_000), 20_000);
    process.env.QUEEN_BENCH_RECORDS = '2e';
    t.throws(() => sizeOverride('QUEEN_BENCH_RECORDS', 100_000), { message: /whole number/ });
  } finally {
    if (before === undefined) delete process.env.QUEEN_BENCH_RECORDS;
    else process.env.QUEEN_BENCH_RECORDS = before;
  }
});
