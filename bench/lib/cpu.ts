import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { benchDatabaseNames } from './db.js';

/**
 * Where the CPU went during a measured interval: this process (the client:
 * engine writer, kafkajs, baselines' client side), every postgres process on
 * this host (only meaningful when PostgreSQL is local; includes other
 * databases' backends), every java process (the local Kafka broker), and the
 * whole machine. Linux /proc only; elsewhere the host numbers are NaN.
 */
export interface CpuSnapshot {
  wall: number;
  self: NodeJS.CpuUsage;
  host: { busy: number; total: number; steal: number } | undefined;
  postgres: Map<string, number>;
  java: Map<string, number>;
  /** The watched service pod's processes (primary and workers), see watchPod. */
  pod: Map<string, number>;
  /** The watched Kafka broker process, see watchBroker. */
  broker: Map<string, number>;
}

export interface CpuDelta {
  wallMs: number;
  /** CPU ms used by this Node process. */
  clientMs: number;
  /** CPU ms used by the backends of this run's databases (new backends counted from 0). */
  postgresMs: number;
  /** CPU ms used by java processes (Kafka) on this host. */
  kafkaMs: number;
  /**
   * CPU ms of the service pod being measured (`node dist/src/main.js`: its
   * primary and every worker, lib/servicePod.ts), 0 when none is watched. Not
   * part of clientMs: the pod is its own processes.
   */
  podMs: number;
  /**
   * CPU ms of the one process listening on the bench's Kafka port (the
   * broker alone, where kafkaMs counts every java process on the host: other
   * sessions' brokers and Connect workers too); NaN when none is watched.
   */
  brokerMs: number;
  /** CPU ms used by the whole machine (all cores), steal included. */
  machineMs: number;
  /**
   * CPU ms the hypervisor gave to other guests while ours wanted it (steal):
   * part of machineMs. A run with much of it measured a slower machine.
   */
  stealMs: number;
  /** Machine CPU capacity in the interval (wall x cores). */
  capacityMs: number;
}

/** CPU used by everything else on the machine (other sessions' tests, builds): noise, recorded so it can be seen. */
export function externalMs(d: CpuDelta): number {
  return d.machineMs - d.stealMs - d.clientMs - d.postgresMs - d.kafkaMs - d.podMs;
}

const TICK_MS = 10; // USER_HZ = 100 on Linux

function hostStat(): { busy: number; total: number; steal: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = (v[3] ?? 0) + (v[4] ?? 0);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: (total - idle) * TICK_MS, total: total * TICK_MS, steal: (v[7] ?? 0) * TICK_MS };
  } catch {
    return undefined;
  }
}

function readTicks(pid: string): { comm: string; ticks: number } | undefined {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = st.lastIndexOf(')');
    const comm = st.slice(st.indexOf('(') + 1, close);
    const f = st.slice(close + 2).split(' ');
    return { comm, ticks: (Number(f[11]) + Number(f[12])) * TICK_MS };
  } catch {
    return undefined; // process went away
  }
}

/** Per-process CPU (ms) of our PostgreSQL backends and of java processes, keyed by pid. */
function processTicks(): { postgres: Map<string, number>; java: Map<string, number> } {
  const postgres = new Map<string, number>();
  const java = new Map<string, number>();
  let dirs: string[];
  try {
    dirs = readdirSync('/proc');
  } catch {
    return { postgres, java };
  }
  const names = benchDatabaseNames();
  for (const d of dirs) {
    if (!/^\d+$/.test(d)) continue;
    const t = readTicks(d);
    if (!t) continue;
    if (t.comm === 'java') java.set(d, t.ticks);
    else if (t.comm.startsWith('postgres') && names.length > 0) {
      let cmd: string;
      try {
        cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      } catch {
        continue;
      }
      if (names.some((n) => cmd.includes(` ${n} `))) postgres.set(d, t.ticks);
    }
  }
  return { postgres, java };
}

/**
 * The processes cpuSnapshot also reads by pid: the service pod the bench
 * spawned (its pids are known only once its workers are up, so a getter) and
 * the Kafka broker. One pod at a time: the suites run one after another.
 */
let podPids: () => readonly number[] = () => [];
let brokerPid: number | undefined;

/** Counts these pids' CPU as `podMs` in every snapshot from now on; the returned function stops it. */
export function watchPod(pids: () => readonly number[]): () => void {
  podPids = pids;
  return () => {
    if (podPids === pids) podPids = () => [];
  };
}

/** Counts this pid's CPU as `brokerMs` (undefined: not watched, brokerMs NaN). */
export function watchBroker(pid: number | undefined): void {
  brokerPid = pid;
}

/** CPU ms (user + system) one process has used so far; undefined when it is gone. */
export function processCpuMs(pid: number): number | undefined {
  return readTicks(String(pid))?.ticks;
}

function ticksOf(pids: readonly number[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const pid of pids) {
    const t = readTicks(String(pid));
    if (t) m.set(String(pid), t.ticks);
  }
  return m;
}

/** A TCP port's listening sockets' inodes, from /proc/net/tcp and tcp6. */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(f, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const c = line.trim().split(/\s+/);
      // c[1] local address "ADDR:PORT" (hex), c[3] state (0A = LISTEN), c[9] inode.
      if (c.length < 10 || c[3] !== '0A') continue;
      if (parseInt(c[1]!.split(':').pop()!, 16) === port) inodes.add(c[9]!);
    }
  }
  return inodes;
}

/**
 * The pid of the process listening on this host's `port` (the local Kafka
 * broker of the bench, when KAFKA_BROKERS names this host), or undefined: a
 * remote broker, or a process whose file descriptors this user may not read.
 */
export function listenerPid(host: string, port: number): number | undefined {
  if (!['127.0.0.1', 'localhost', '::1', '0.0.0.0'].includes(host)) return undefined;
  const inodes = listeningInodes(port);
  if (inodes.size === 0) return undefined;
  let dirs: string[];
  try {
    dirs = readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const d of dirs) {
    if (!/^\d+$/.test(d)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${d}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${d}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m && inodes.has(m[1]!)) return Number(d);
    }
  }
  return undefined;
}

/** CPU of processes alive at the end, since the start (0 for a process's time before it was first seen). */
function since(a: Map<string, number>, b: Map<string, number>): number {
  let n = 0;
  for (const [pid, t] of b) n += t - (a.get(pid) ?? 0);
  return n;
}

export function cpuSnapshot(): CpuSnapshot {
  const p = processTicks();
  return {
    wall: performance.now(),
    self: process.cpuUsage(),
    host: hostStat(),
    postgres: p.postgres,
    java: p.java,
    pod: ticksOf(podPids()),
    broker: ticksOf(brokerPid === undefined ? [] : [brokerPid]),
  };
}

export function cpuSince(a: CpuSnapshot): CpuDelta {
  const b = cpuSnapshot();
  const self = process.cpuUsage(a.self);
  const wallMs = b.wall - a.wall;
  return {
    wallMs,
    clientMs: (self.user + self.system) / 1000,
    postgresMs: since(a.postgres, b.postgres),
    kafkaMs: since(a.java, b.java),
    podMs: since(a.pod, b.pod),
    brokerMs: a.broker.size > 0 && b.broker.size > 0 ? since(a.broker, b.broker) : NaN,
    machineMs: a.host && b.host ? b.host.busy - a.host.busy : NaN,
    stealMs: a.host && b.host ? b.host.steal - a.host.steal : NaN,
    capacityMs: a.host && b.host ? b.host.total - a.host.total : NaN,
  };
}

/** Sums deltas (e.g. over repetitions). */
export function addCpu(xs: readonly CpuDelta[]): CpuDelta {
  const z: CpuDelta = { wallMs: 0, clientMs: 0, postgresMs: 0, kafkaMs: 0, podMs: 0, brokerMs: 0, machineMs: 0, stealMs: 0, capacityMs: 0 };
  for (const x of xs) for (const k of Object.keys(z) as (keyof CpuDelta)[]) z[k] += x[k];
  return z;
}

/** "client 45% / postgres 50% / kafka 3% of 2 cores" style summary (shares of capacity). */
export function cpuShares(d: CpuDelta): {
  client: number;
  postgres: number;
  kafka: number;
  pod: number;
  external: number;
  steal: number;
  machine: number;
} {
  const cap = d.capacityMs;
  return {
    pod: d.podMs / cap,
    client: d.clientMs / cap,
    postgres: d.postgresMs / cap,
    kafka: d.kafkaMs / cap,
    external: externalMs(d) / cap,
    steal: d.stealMs / cap,
    machine: d.machineMs / cap,
  };
}

/** "client 45%, pg 50%, kafka 3%, other 2%, steal 0%" of the machine's capacity ("pod x%" first when a service pod was watched). */
export function fmtShares(d: CpuDelta, kafka = false): string {
  const s = cpuShares(d);
  const pc = (x: number): string => `${Math.round(x * 100)}%`;
  return `${d.podMs > 0 ? `pod ${pc(s.pod)}, ` : ''}client ${pc(s.client)}, pg ${pc(s.postgres)}${kafka ? `, kafka ${pc(s.kafka)}` : ''}, other ${pc(s.external + (kafka ? 0 : s.kafka))}, steal ${pc(s.steal)}`;
}
