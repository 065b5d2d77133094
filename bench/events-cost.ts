/**
 * What events cost a create (issue 14): POST /plants on SQLite (full durability), measured with wrk
 * against three servers in interleaved rounds, each alone on core 0 while wrk runs on core 1:
 *   before    — the service as it was before events (a git worktree of BASE, built), no event log
 *   events    — this tree: every create writes its event, no webhook endpoints
 *   10 hooks  — this tree with 10 endpoints of the user, delivering to a local receiver
 *
 *   npx tsx bench/events-cost.ts [--base <commit>] [--rounds 5] [--duration 5]     (needs wrk: apt-get install wrk)
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BENCH_SERVE_FLAGS, freePort, waitReady } from './ports.js';

const { values: opt } = parseArgs({
  options: {
    base: { type: 'string', default: '456ab85' },
    rounds: { type: 'string', default: '5' },
    duration: { type: 'string', default: '5' },
  },
});
const ROOT = resolve(import.meta.dirname, '..');
const tmp = mkdtempSync(join(tmpdir(), 'plantstore-events-cost-'));

/** The BASE commit, built, in a worktree that shares this tree's node_modules. */
function baseTree(): string {
  const dir = join(tmp, 'base');
  execFileSync('git', ['-C', ROOT, 'worktree', 'add', '--detach', dir, opt.base!], { stdio: 'ignore' });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.build.json'], {
    cwd: dir,
    stdio: 'inherit',
  });
  return dir;
}

interface Target {
  name: string;
  url: string;
  token: string;
  child: ChildProcess;
}

async function start(name: string, tree: string, hooks: number, receiver: string): Promise<Target> {
  const db = `sqlite:${join(tmp, `${name.replace(/\W/g, '')}.db`)}`;
  const env = { ...process.env, DATABASE_URL: db, WEBHOOK_ALLOW_PRIVATE: 'true' };
  const token = execFileSync(
    process.execPath,
    [join(tree, 'bin/plantstore'), 'token', 'create', '--user', 'bench'],
    {
      env,
      encoding: 'utf8',
    },
  ).trim();
  const port = await freePort();
  const args = ['-c', '0', process.execPath, join(tree, 'bin/plantstore'), 'serve', '--port', String(port)];
  const child = spawn('taskset', [...args, ...BENCH_SERVE_FLAGS], {
    env,
    stdio: 'inherit',
  });
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/readyz');
  for (let i = 0; i < hooks; i++) {
    const res = await fetch(`${url}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${receiver}/${i}` }),
    });
    if (res.status !== 201) throw new Error(`webhook registration: ${res.status} ${await res.text()}`);
  }
  child.kill('SIGSTOP');
  return { name, url, token, child };
}

function wrk(t: Target, seconds: number): { rps: number; p50: number; p99: number } {
  const out = execFileSync(
    'taskset',
    [
      '-c',
      '1',
      process.execPath,
      join(ROOT, 'bench/wrk.mjs'),
      JSON.stringify({
        urls: [t.url],
        connections: 50,
        duration: seconds,
        method: 'POST',
        path: '/plants',
        body: { name: 'Benchmark fern', tag: 'bench' },
        token: t.token,
      }),
    ],
    { encoding: 'utf8' },
  );
  const r = JSON.parse(out.trim().split('\n').pop()!);
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${t.name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.rps, p50: r.p50, p99: r.p99 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// The receiver runs in a process of its own, on core 1 with wrk: this script blocks while wrk runs
// (execFileSync), and a receiver in it would answer nothing, so deliveries would time out.
const receiverCode = `
  let n = 0;
  const s = require('node:http').createServer((req, res) => req.resume().on('end', () => { n++; res.writeHead(204).end(); }));
  s.listen(0, '127.0.0.1', () => console.log(s.address().port));
  process.on('SIGTERM', () => { console.log('delivered ' + n); process.exit(0); });`;
const receiverProc = spawn('taskset', ['-c', '1', process.execPath, '-e', receiverCode], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
let receiverOut = '';
receiverProc.stdout!.on('data', (d) => (receiverOut += d));
while (!/\n/.test(receiverOut)) await new Promise((r) => setTimeout(r, 20));
const receiverUrl = `http://127.0.0.1:${receiverOut.trim()}`;
process.on('exit', () => receiverProc.kill('SIGKILL'));

const base = baseTree();
process.on('exit', () => {
  // Also when a run fails: leave no worktree behind.
  spawnSync('git', ['-C', ROOT, 'worktree', 'remove', '--force', base]);
  rmSync(tmp, { recursive: true, force: true });
});
const targets = [
  await start(`before (${opt.base})`, base, 0, receiverUrl),
  await start('events, no endpoints', ROOT, 0, receiverUrl),
  await start('events, 10 endpoints', ROOT, 10, receiverUrl),
];
const results = new Map<string, { rps: number; p50: number; p99: number }[]>();
try {
  for (const t of targets) {
    t.child.kill('SIGCONT');
    wrk(t, 2); // warm-up
    t.child.kill('SIGSTOP');
  }
  for (let round = 0; round < Number(opt.rounds); round++) {
    for (const t of round % 2 ? [...targets].reverse() : targets) {
      t.child.kill('SIGCONT');
      const r = wrk(t, Number(opt.duration));
      t.child.kill('SIGSTOP');
      results.set(t.name, [...(results.get(t.name) ?? []), r]);
      console.error(`round ${round + 1} ${t.name}: ${r.rps.toFixed(0)} req/s, p99 ${r.p99.toFixed(2)} ms`);
    }
  }
} finally {
  for (const t of targets) {
    t.child.kill('SIGCONT');
    t.child.kill('SIGTERM');
  }
}
const baseRps = median(results.get(targets[0]!.name)!.map((r) => r.rps));
console.log(`| server | create req/s (median of ${opt.rounds}) | vs before | p50 | p99 |`);
console.log('|---|---|---|---|---|');
for (const t of targets) {
  const rs = results.get(t.name)!;
  const rps = median(rs.map((r) => r.rps));
  console.log(
    `| ${t.name} | ${rps.toFixed(0)} | ${((rps / baseRps - 1) * 100).toFixed(1)} % | ${median(rs.map((r) => r.p50)).toFixed(2)} ms | ${median(rs.map((r) => r.p99)).toFixed(2)} ms |`,
  );
}
receiverProc.kill('SIGTERM');
await new Promise((r) => receiverProc.once('exit', r));
console.log(`\nwebhook deliveries acknowledged by the receiver: ${receiverOut.trim().split('\n').pop()}`);
await new Promise((r) => setTimeout(r, 500));
