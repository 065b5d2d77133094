/**
 * What a create, a change and a delete cost over HTTP, in server CPU per request, on two trees
 * side by side (issue 54's target: at most 10 % more than the tree before it). Each round starts
 * `bin/plantstore serve` of each tree on a fresh SQLite file (durability full), pinned to core 0,
 * and drives it from core 1 with wrk (bench/wrk.mjs): N creates, then a PATCH of each (If-Match: *),
 * then a DELETE of each (with the trash on, its default, in trees that have one), 20 connections.
 * The trees alternate, the order reversed every other round; the medians are printed.
 *
 *   git worktree add /tmp/before 7600937 && ln -s "$PWD/node_modules" /tmp/before/node_modules
 *   (cd /tmp/before && npm run build)
 *   npx tsx bench/write-cost.ts /tmp/before . [rounds=5] [N=20000]
 *
 * Needs wrk (apt-get install wrk). On a shared machine, compare CPU per request, not req/s.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BENCH_SERVE_FLAGS, freePort, waitReady } from './ports.js';
import { cpuTicks, stopAll, TICK_US } from './procs.js';

const trees = [resolve(process.argv[2] ?? '.'), resolve(process.argv[3] ?? '.')];
const ROUNDS = Number(process.argv[4] ?? 5);
const N = Number(process.argv[5] ?? 20_000);
const WRK = join(import.meta.dirname, 'wrk.mjs');
const tmp = mkdtempSync(join(tmpdir(), 'plantstore-write-cost-'));
const OPS = ['create', 'change', 'delete'] as const;
type Costs = Record<(typeof OPS)[number], number>;

function wrk(spec: Record<string, unknown>): { total: number; non2xx: number; errors: number } {
  const out = execFileSync('taskset', ['-c', '1', process.execPath, WRK, JSON.stringify(spec)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return JSON.parse(out.trim().split('\n').at(-1)!);
}

async function round(tree: string, k: number): Promise<Costs> {
  const bin = join(tree, 'bin/plantstore');
  const env = { ...process.env, DATABASE_URL: `sqlite:${join(tmp, `r${k}.db`)}` };
  execFileSync(bin, ['migrate'], { env, stdio: 'ignore' });
  const token = execFileSync(bin, ['token', 'create', '--user', 'bench'], { env, encoding: 'utf8' }).trim();
  const port = await freePort();
  const server = spawn('taskset', ['-c', '0', bin, 'serve', '--port', String(port), ...BENCH_SERVE_FLAGS], {
    env,
    stdio: 'inherit',
  });
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/readyz');
  const ids = join(tmp, `ids-${k}.json`);
  const costs = {} as Costs;
  try {
    const measure = (op: keyof Costs, spec: Record<string, unknown>) => {
      // taskset execs bin/plantstore, which replaces itself with node (process.execve): one pid.
      const before = cpuTicks(server.pid!);
      const r = wrk({ urls: [url], connections: 20, token, ...spec });
      if (r.non2xx > 0 || r.errors > 0)
        throw new Error(`${tree} ${op}: ${r.non2xx} not 2xx, ${r.errors} errors`);
      costs[op] = ((cpuTicks(server.pid!) - before) * TICK_US) / r.total;
    };
    writeFileSync(ids, JSON.stringify(Array.from({ length: N }, (_, i) => i + 1)));
    measure('create', {
      method: 'POST',
      path: '/plants',
      body: { name: 'Benchmark fern', tag: 'bench' },
      idsFile: ids,
      eachOnce: true,
      idsOut: ids,
    });
    const made = JSON.parse(readFileSync(ids, 'utf8')) as string[];
    if (made.length !== N) throw new Error(`${tree}: ${made.length} of ${N} creates answered 201`);
    measure('change', {
      method: 'PATCH',
      path: '/plants/{id}',
      body: { name: 'Boston fern' },
      ifMatch: '*',
      idsFile: ids,
      eachOnce: true,
    });
    measure('delete', { method: 'DELETE', path: '/plants/{id}', idsFile: ids, eachOnce: true });
  } finally {
    await stopAll([server]);
  }
  return costs;
}

const results: Costs[][] = [[], []];
try {
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? [0, 1] : [1, 0];
    for (const t of order) {
      const c = await round(trees[t]!, r * 2 + t);
      results[t]!.push(c);
      console.error(
        `round ${r + 1} ${trees[t]}: ${OPS.map((op) => `${op} ${c[op].toFixed(0)} µs`).join(', ')}`,
      );
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const summary = Object.fromEntries(
  OPS.map((op) => {
    const [a, b] = results.map((rs) => median(rs.map((c) => c[op])));
    return [
      op,
      { before: Math.round(a!), after: Math.round(b!), change: `${(((b! - a!) / a!) * 100).toFixed(1)} %` },
    ];
  }),
);
console.log(JSON.stringify({ trees, rounds: ROUNDS, requests: N, cpuMicrosPerRequest: summary }, null, 2));
