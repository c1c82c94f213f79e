import test from 'ava';
import { availableParallelism } from 'node:os';
import { workerConfig } from '../../src/cluster/share.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { availableCpus, cgroupQuota } from '../../src/util/cpus.js';

/** A fake /sys/fs/cgroup: the files given, nothing else. */
const fs =
  (files: Record<string, string>) =>
  (path: string): string | undefined =>
    files[path];

test('cgroup v2 cpu.max: a quota caps the CPUs, "max" does not', (t) => {
  t.is(cgroupQuota(fs({ '/sys/fs/cgroup/cpu.max': '200000 100000\n' })), 2);
  t.is(cgroupQuota(fs({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' })), 1.5);
  t.is(cgroupQuota(fs({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' })), undefined);
  t.is(availableCpus(fs({ '/sys/fs/cgroup/cpu.max': '200000 100000\n' }), 8), 2, 'the quota, below the 8 CPUs the mask allows');
  t.is(availableCpus(fs({ '/sys/fs/cgroup/cpu.max': '800000 100000\n' }), 2), 2, 'the mask, below the quota');
  t.is(availableCpus(fs({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' }), 8), 1, 'a fractional quota rounds down');
  t.is(availableCpus(fs({ '/sys/fs/cgroup/cpu.max': '50000 100000\n' }), 8), 1, 'never below 1');
});

test('cgroup v1 cfs_quota_us / cfs_period_us, under cpu or cpu,cpuacct; -1 is no quota', (t) => {
  t.is(cgroupQuota(fs({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '300000', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' })), 3);
  t.is(
    cgroupQuota(fs({ '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '100000', '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000' })),
    1,
  );
  t.is(cgroupQuota(fs({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' })), undefined);
  t.is(cgroupQuota(fs({})), undefined, 'no cgroup files: no quota');
  t.is(availableCpus(fs({}), 4), 4);
});

test('QUEEN_WORKERS: default is the CPUs the process may use; 1..256', (t) => {
  const dflt = loadConfig({}).workers;
  t.true(dflt >= 1 && dflt <= availableParallelism());
  t.is(dflt, availableCpus());
  t.is(loadConfig({ QUEEN_WORKERS: '1' }).workers, 1);
  t.is(loadConfig({ QUEEN_WORKERS: '3' }).workers, 3);
  t.throws(() => loadConfig({ QUEEN_WORKERS: '0' }), {
    instanceOf: ConfigError,
    message: /QUEEN_WORKERS must be an integer between 1 and 256/,
  });
  t.is(loadConfig({}).workerSlot, undefined, 'no slot outside a worker');
  t.is(loadConfig({ QUEEN_WORKER_SLOT: '1' }).workerSlot, 1);
});

test("a worker's share: the dedup budget and the pool split over the workers, the rest whole", (t) => {
  const pod = loadConfig({ QUEEN_WORKERS: '3', QUEEN_DEDUP_CACHE_MB: '512', QUEEN_PG_POOL_SIZE: '10', QUEEN_MAX_PAYLOAD_BYTES: '2048' });
  const w = workerConfig(pod, 2);
  t.is(w.workerSlot, 2);
  t.is(Math.floor(w.dedupCacheMb * 1024 * 1024), Math.floor((512 * 1024 * 1024) / 3), 'a third of the bytes, nothing rounded to whole MB');
  t.is(w.pgPoolSize, 3, 'floor(10 / 3): the pod holds at most the configured pool');
  t.is(w.maxPayloadBytes, 2048);
  t.is(workerConfig(loadConfig({ QUEEN_WORKERS: '4', QUEEN_PG_POOL_SIZE: '2' }), 0).pgPoolSize, 1, 'at least one connection');
});
