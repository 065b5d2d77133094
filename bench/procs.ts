// The servers bench/run.ts and bench/peer.ts measure: how they are started and stopped, what is
// read of them from /proc (Linux), and how one server's measurement is kept from another's
// housekeeping.
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** One clock tick of /proc's CPU times, in µs (USER_HZ is 100 on Linux). */
export const TICK_US = 10_000;

/** Busy and total ticks of one core, from /proc/stat. */
export function coreTimes(core: number): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${core} `));
  if (!line) return { busy: 0, total: 0 };
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  // idle and iowait are not busy
  return { busy: total - f[3]! - f[4]!, total };
}

export const coreBusy = (a: { busy: number; total: number }, b: { busy: number; total: number }) =>
  b.total > a.total ? (b.busy - a.busy) / (b.total - a.total) : 0;

/** utime + stime of a /proc stat line (a process's or one of its threads'), in clock ticks. */
function statTicks(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

export function cpuTicks(pid: number): number {
  try {
    return statTicks(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return 0;
  }
}

/**
 * The CPU ticks of every PostgreSQL process on the machine (its backends, WAL writer, …): whatever
 * else uses PostgreSQL meanwhile is counted too, so measure with nothing else using it.
 */
export function postgresTicks(): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) === 'postgres') ticks += statTicks(stat);
    } catch {
      // gone meanwhile
    }
  }
  return ticks;
}

/** The process's CPU ticks by thread name (V8's and libuv's helper threads each under theirs). */
export function threadTicks(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      out.set(comm, (out.get(comm) ?? 0) + statTicks(stat));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out;
}

/**
 * Waits until none of the servers is still busy with a previous phase's backlog (a slow target
 * keeps working after its load generator stops), so one target's leftovers never slow the next.
 */
export async function waitIdle(pids: number[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  let before = pids.map(cpuTicks);
  while (Date.now() < deadline) {
    await sleep(300);
    const after = pids.map(cpuTicks);
    // Under 2 ticks (20 ms of CPU) in 300 ms for every process: idle enough.
    if (after.every((t, i) => t - before[i]! < 2)) return;
    before = after;
  }
}

/**
 * Runs `fn` with the other targets' processes stopped (SIGSTOP), then resumes them. They all share
 * the pinned core, and an idle server still does housekeeping there: V8's memory reducer compacts
 * an idle heap some seconds after its last load (json-server's, with 100,000 plants in memory, took
 * tens of milliseconds at a time), and a SQLite server checkpoints. Measured with them running,
 * the p99 of whichever target was under load at that moment took the hit.
 */
export async function withOthersStopped<T>(others: number[], fn: () => Promise<T>): Promise<T> {
  const signal = (sig: NodeJS.Signals) => {
    for (const pid of others) {
      try {
        process.kill(pid, sig);
      } catch {}
    }
  };
  signal('SIGSTOP');
  try {
    return await fn();
  } finally {
    signal('SIGCONT');
  }
}

// Every server started, so an interrupted run can stop them all.
const servers = new Set<ChildProcess>();

/**
 * Starts a server in a process group of its own: the benchmark stops idle servers with SIGSTOP
 * (withOthersStopped), and a stopped process left in the benchmark's own group would make the
 * kernel hang up on the whole group should the shell that started it go away.
 */
export function spawnServer(args: string[], pin: boolean): ChildProcess {
  const [cmd, ...rest] = pin ? ['taskset', '-c', '0', ...args] : args;
  const child = spawn(cmd!, rest, { stdio: 'inherit', detached: true });
  servers.add(child);
  child.once('exit', () => servers.delete(child));
  return child;
}

/** Stops `children` (every server started and still running, by default) and waits for them. */
export async function stopAll(children: ChildProcess[] = [...servers]): Promise<void> {
  for (const c of children) {
    c.kill('SIGCONT');
    c.kill('SIGTERM');
  }
  await Promise.all(
    children.map(
      (c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(null) : c.once('exit', r))),
    ),
  );
}
