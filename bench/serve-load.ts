// One measured run of GET requests against a served plantstore: wrk (Debian's package, through
// bench/wrk.mjs: latency measured in C, one thread) when it is installed, pinned to core 1 when
// `pin`; otherwise fetch from this process (whose own queueing then shows in the latency). Shared
// by bench/history-pages.ts and bench/changes.ts.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpuTicks, postgresTicks, TICK_US } from './procs.js';

export const WRK = spawnSync('wrk', ['-v']).error === undefined;
export const LOADGEN = WRK ? 'wrk' : 'fetch';

export interface Target {
  /** The server's pid, whose CPU time is read from /proc. */
  pid: number;
  url: string;
  token: string;
  /** A directory for wrk's list of paths. */
  dir: string;
  pin: boolean;
  connections: number;
  seconds: number;
}

/** `paths` cycled through for `seconds`: req/s, p50 and p99 latency and the server's CPU µs per request. */
export async function drive(target: Target, name: string, paths: string[]) {
  const ticks = cpuTicks(target.pid);
  const pgTicks = postgresTicks();
  const start = performance.now();
  let requests: number;
  let p50: number;
  let p99: number;
  if (WRK) {
    // Each path is one "id" of wrk.lua's rotation: the path template is just {id}.
    const idsFile = join(target.dir, 'paths.json');
    writeFileSync(idsFile, JSON.stringify(paths));
    const spec = {
      urls: [target.url],
      connections: target.connections,
      duration: target.seconds,
      method: 'GET',
      path: '{id}',
      token: target.token,
      idsFile,
      rotation: 'all',
    };
    const pin = target.pin ? ['taskset', '-c', '1'] : [];
    const run = spawnSync(
      pin[0] ?? process.execPath,
      [
        ...pin.slice(1),
        ...(target.pin ? [process.execPath] : []),
        join(import.meta.dirname, 'wrk.mjs'),
        JSON.stringify(spec),
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const out = JSON.parse(run.stdout.trim().split('\n').at(-1)!);
    if (out.non2xx > 0 || out.errors > 0)
      throw new Error(`${name}: ${out.non2xx} answers not 2xx, ${out.errors} errors`);
    ({ total: requests, p50, p99 } = out);
  } else {
    const headers = { authorization: `Bearer ${target.token}` };
    const latencies: number[] = [];
    const end = performance.now() + target.seconds * 1000;
    let k = 0;
    await Promise.all(
      Array.from({ length: target.connections }, async () => {
        while (performance.now() < end) {
          const path = paths[k++ % paths.length]!;
          const t = performance.now();
          const res = await fetch(`${target.url}${path}`, { headers });
          const body = await res.arrayBuffer();
          if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
          if (body.byteLength < 20) throw new Error(`${path}: a short answer`);
          latencies.push(performance.now() - t);
        }
      }),
    );
    latencies.sort((a, b) => a - b);
    const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!;
    requests = latencies.length;
    p50 = q(0.5);
    p99 = q(0.99);
  }
  const seconds = (performance.now() - start) / 1000;
  const cpu = (cpuTicks(target.pid) - ticks) * TICK_US;
  const pgCpu = (postgresTicks() - pgTicks) * TICK_US;
  return {
    name,
    requests,
    perSecond: Math.round(requests / seconds),
    p50ms: Number(p50.toFixed(2)),
    p99ms: Number(p99.toFixed(2)),
    cpuMicrosPerRequest: Math.round(cpu / requests),
    // PostgreSQL's processes meanwhile (0 on SQLite, or nothing else of PostgreSQL's running).
    postgresCpuMicrosPerRequest: Math.round(pgCpu / requests),
  };
}
