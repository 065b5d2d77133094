/**
 * What a create, a change and a delete cost over HTTP, in server CPU per request, on two trees
 * side by side (issue 54's target: at most 10 % more than the tree before it). Each round starts
 * `bin/plantstore serve` of each tree on a fresh SQLite file (durability full), pinned to core 0,
 * and drives it from core 1 with wrk (bench/wrk.mjs): N creates, then a PATCH of each (If-Match: *),
 * then a DELETE of each (with the trash on, its default, in trees that have one), 20 connections.
 * The trees alternate, the order reversed every other round; the medians are printed, with the
 * median of each round's ratio (after / before) and each thread's share (by its name in /proc: the
 * event loop's MainThread, the SQLite writer's and checkpointer's WorkerThread, V8's helpers).
 *
 *   git worktree add /tmp/before 7600937 && ln -s "$PWD/node_modules" /tmp/before/node_modules
 *   (cd /tmp/before && npm run build)
 *   npx tsx bench/write-cost.ts /tmp/before . [rounds=5] [N=20000]
 *
 * Needs wrk (apt-get install wrk). On a shared machine, compare CPU per request, not req/s.
 *
 * With PROFILE=1 every server runs under `node --cpu-prof` (all threads, 100 µs interval) and, for
 * each operation, the functions whose self time a request differs most between the trees are
 * printed with the µs each thread spent (summed over the rounds, per request; idle left out).
 * Profiling costs CPU itself, so the costs printed beside are the profiled servers', not the
 * benchmark's figures. Functions are matched by name and file, not line. The event loop and the
 * writer share core 0, and V8 weighs a sample by the time to the next, so a thread that waited for
 * the core has the wait counted in whatever it ran (bench/flame.ts says the same): read the
 * profile for where to look, the thread split for how much.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type CpuProfile, selfTimes } from './flame-svg.js';
import { BENCH_SERVE_FLAGS, freePort, waitReady } from './ports.js';
import { cpuTicks, stopAll, TICK_US, threadTicks } from './procs.js';

const trees = [resolve(process.argv[2] ?? '.'), resolve(process.argv[3] ?? '.')];
const ROUNDS = Number(process.argv[4] ?? 5);
const N = Number(process.argv[5] ?? 20_000);
const WRK = join(import.meta.dirname, 'wrk.mjs');
const tmp = mkdtempSync(join(tmpdir(), 'plantstore-write-cost-'));
const OPS = ['create', 'change', 'delete'] as const;
type Costs = Record<(typeof OPS)[number], number>;
/** Per tree, per operation: CPU µs a request by thread name (each task's stat under /proc), per round. */
const byThread = trees.map(() => Object.fromEntries(OPS.map((op) => [op, [] as Map<string, number>[]])));

const PROFILE = process.env.PROFILE === '1';
/** Per tree, per operation: self µs by thread and function over all rounds, and the answers. */
const profiled = trees.map(() =>
  Object.fromEntries(OPS.map((op) => [op, { self: new Map<string, number>(), answers: 0 }])),
);
const now = () => Number(process.hrtime.bigint() / 1000n);

function wrk(spec: Record<string, unknown>): { total: number; non2xx: number; errors: number } {
  const out = execFileSync('taskset', ['-c', '1', process.execPath, WRK, JSON.stringify(spec)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return JSON.parse(out.trim().split('\n').at(-1)!);
}

async function round(t: number, k: number): Promise<Costs> {
  const tree = trees[t]!;
  const bin = join(tree, 'bin/plantstore');
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: `sqlite:${join(tmp, `r${k}.db`)}` };
  execFileSync(bin, ['migrate'], { env, stdio: 'ignore' });
  const token = execFileSync(bin, ['token', 'create', '--user', 'bench'], { env, encoding: 'utf8' }).trim();
  const port = await freePort();
  const profiles = join(tmp, `prof-${k}`);
  if (PROFILE) {
    mkdirSync(profiles);
    const flags = `--cpu-prof --cpu-prof-dir=${profiles} --cpu-prof-interval=100`;
    env.NODE_OPTIONS = `${env.NODE_OPTIONS ?? ''} ${flags}`.trim();
  }
  const windows = {} as Record<keyof Costs, { from: number; to: number; answers: number }>;
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
      const threadsBefore = threadTicks(server.pid!);
      const from = now();
      const r = wrk({ urls: [url], connections: 20, token, ...spec });
      windows[op] = { from, to: now(), answers: r.total };
      const split = new Map<string, number>();
      for (const [comm, ticks] of threadTicks(server.pid!))
        split.set(comm, ((ticks - (threadsBefore.get(comm) ?? 0)) * TICK_US) / r.total);
      byThread[t]![op]!.push(split);
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
  if (PROFILE) {
    for (const f of readdirSync(profiles).filter((f) => f.endsWith('.cpuprofile'))) {
      const profile = JSON.parse(readFileSync(join(profiles, f), 'utf8')) as CpuProfile;
      // CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile: thread 0 is the event loop's.
      const thread = Number(f.split('.')[4]) === 0 ? 'loop' : 'worker';
      for (const op of OPS) {
        const into = profiled[t]![op]!;
        const w = windows[op];
        if (!w) continue;
        for (const [fn, us] of selfTimes(profile, w.from, w.to)) {
          const key = `${thread} ${fn}`;
          into.self.set(key, (into.self.get(key) ?? 0) + us);
        }
      }
    }
    for (const op of OPS) if (windows[op]) profiled[t]![op]!.answers += windows[op].answers;
  }
  return costs;
}

const results: Costs[][] = [[], []];
try {
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? [0, 1] : [1, 0];
    for (const t of order) {
      const c = await round(t, r * 2 + t);
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
// Each round's pair ran back to back: the median of their ratios is less moved by a machine whose
// speed drifts over the run than the ratio of the two medians.
const paired = Object.fromEntries(
  OPS.map((op) => {
    const ratios = results[0]!.map((c, r) => results[1]![r]![op] / c[op]);
    return [op, `${((median(ratios) - 1) * 100).toFixed(1)} %`];
  }),
);
console.log(
  JSON.stringify(
    { trees, rounds: ROUNDS, requests: N, cpuMicrosPerRequest: summary, pairedChange: paired },
    null,
    2,
  ),
);
for (const op of OPS) {
  const names = new Set(byThread.flatMap((t) => t[op]!.flatMap((m) => [...m.keys()])));
  const line = [...names]
    .map((name) => {
      const [a, b] = byThread.map((t) => median(t[op]!.map((m) => m.get(name) ?? 0)));
      return { name, a: a!, b: b! };
    })
    .filter((x) => x.a + x.b >= 0.5)
    .map((x) => `${x.name} ${x.a.toFixed(1)} → ${x.b.toFixed(1)}`);
  console.log(`${op} by thread (median µs a request): ${line.join(', ')}`);
}
if (PROFILE) {
  for (const op of OPS) {
    const [a, b] = profiled.map((p) => p[op]!);
    const per = (m: Map<string, number>, n: number, key: string) => (m.get(key) ?? 0) / n;
    const keys = new Set([...a!.self.keys(), ...b!.self.keys()]);
    const rows = [...keys].map((key) => {
      const x = per(a!.self, a!.answers, key);
      const y = per(b!.self, b!.answers, key);
      return { key, x, y, d: y - x };
    });
    const total = (thread: string, m: Map<string, number>, n: number) =>
      [...m].filter(([k]) => k.startsWith(thread)).reduce((s, [, us]) => s + us, 0) / n;
    console.log(`\n${op}: profiled µs a request, before → after`);
    for (const thread of ['loop', 'worker'])
      console.log(
        `  ${thread} total ${total(thread, a!.self, a!.answers).toFixed(1)} → ${total(thread, b!.self, b!.answers).toFixed(1)}`,
      );
    for (const r of rows.sort((p, q) => Math.abs(q.d) - Math.abs(p.d)).slice(0, 30))
      console.log(
        `  ${r.d >= 0 ? '+' : ''}${r.d.toFixed(2).padStart(6)}  ${r.x.toFixed(2).padStart(6)} → ${r.y.toFixed(2).padStart(6)}  ${r.key}`,
      );
  }
}
