import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/**
 * The CPUs this process may use: the smallest of what the scheduler lets it
 * run on (os.availableParallelism(): the affinity mask) and the CFS quota of
 * its cgroup (v2 `cpu.max`, v1 `cpu.cfs_quota_us / cpu.cfs_period_us`), at
 * least 1. A quota of 1.5 CPUs counts as 1: a second worker would spend its
 * time throttled, not running. The default of QUEEN_WORKERS.
 *
 * The cgroup files are read at the root of the process's cgroup namespace
 * (/sys/fs/cgroup), which is the container's own cgroup in Kubernetes and
 * Docker; on a host without a namespace that is the root group, whose quota
 * is "max", and the affinity mask decides.
 */
export function availableCpus(read: (path: string) => string | undefined = readText, parallelism = availableParallelism()): number {
  let cpus = parallelism;
  const quota = cgroupQuota(read);
  if (quota !== undefined) cpus = Math.min(cpus, quota);
  return Math.max(1, Math.floor(cpus));
}

/** CPUs the cgroup's CFS quota allows, or undefined when there is no quota (or no readable cgroup file). */
export function cgroupQuota(read: (path: string) => string | undefined): number | undefined {
  // v2: "<quota> <period>" or "max <period>".
  const v2 = read('/sys/fs/cgroup/cpu.max')?.trim().split(/\s+/);
  if (v2?.length === 2) {
    if (v2[0] === 'max') return undefined;
    return ratio(Number(v2[0]), Number(v2[1]));
  }
  // v1: the controller is mounted as cpu or cpu,cpuacct; quota -1 means none.
  for (const dir of ['/sys/fs/cgroup/cpu', '/sys/fs/cgroup/cpu,cpuacct']) {
    const q = read(`${dir}/cpu.cfs_quota_us`);
    const p = read(`${dir}/cpu.cfs_period_us`);
    if (q === undefined || p === undefined) continue;
    const quota = Number(q.trim());
    if (quota < 0) return undefined;
    return ratio(quota, Number(p.trim()));
  }
  return undefined;
}

function ratio(quota: number, period: number): number | undefined {
  if (!Number.isFinite(quota) || !Number.isFinite(period) || quota <= 0 || period <= 0) return undefined;
  return quota / period;
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
