/**
 * What webhook endpoints cost a create: POST /plants on SQLite (full durability), measured with
 * wrk against two servers of this tree in interleaved rounds:
 *   events    — every create writes its event, no webhook endpoints
 *   10 hooks  — the same with 10 endpoints of the user, delivering to a local receiver
 * Each server runs on core 0 alone (the other is stopped while one is measured); wrk and the
 * receiver run on core 1. With `--deliver process`, the 10-hooks server sends no deliveries itself
 * (`serve --no-webhook-delivery`) and a `plantstore deliver` process on core 1 sends them; the
 * figures are then given both ways (delivery in the server, and in its own process).
 *
 * After the rounds, the 10-hooks server (and its deliverer) run on with no load until every queued
 * delivery is delivered: the backlog left when the load stopped, how long it took to drain, and
 * the deliveries per second the receiver acknowledged meanwhile.
 *
 *   npx tsx bench/events-cost.ts [--write] [--rounds 5] [--duration 5] [--deliver server|process|both] [--profile DIR]
 *   (needs wrk: apt-get install wrk)
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BENCH_SERVE_FLAGS, freePort, waitReady } from './ports.js';
import { printed, writeSection } from './report.js';

/** What the run prints to stdout, kept to be written into docs/benchmarks.md with --write. */
const { say, lines: report } = printed();

const { values: opt } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    // Writes the table between docs/benchmarks.md's `webhooks` markers.
    write: { type: 'boolean', default: false },
    duration: { type: 'string', default: '5' },
    // Where the 10-hooks server's deliveries are sent from: the server itself, a `deliver` process, or both (two servers).
    deliver: { type: 'string', default: 'server' },
    // Writes the (first) 10-hooks server's CPU profile (--cpu-prof) into this folder.
    profile: { type: 'string' },
    // Longest wait for the backlog to drain after the load, in seconds.
    'drain-limit': { type: 'string', default: '120' },
  },
});
if (!['server', 'process', 'both'].includes(opt.deliver!))
  throw new Error('--deliver: server, process or both');
const ROOT = resolve(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin/plantstore');
const tmp = mkdtempSync(join(tmpdir(), 'plantstore-events-cost-'));
const SERVER_CORE = '0';
const LOAD_CORE = '1';

interface Target {
  name: string;
  url: string;
  token: string;
  file: string;
  hooks: number;
  /** Its endpoints' URLs start with /{tag}/ at the receiver, which counts deliveries by it. */
  tag: string;
  /** Plants created on it so far (warm-up included): what its endpoints are owed, × hooks. */
  created: number;
  /** The server, and the `deliver` process when it has one: stopped and resumed together. */
  procs: ChildProcess[];
}

let started = 0;
async function start(name: string, hooks: number, receiver: string, deliverer: boolean, profile?: string) {
  const tag = `t${started++}`;
  const file = join(tmp, `${name.replace(/\W/g, '')}.db`);
  const env = { ...process.env, DATABASE_URL: `sqlite:${file}`, WEBHOOK_ALLOW_PRIVATE: 'true' };
  const token = execFileSync(process.execPath, [BIN, 'token', 'create', '--user', 'bench'], {
    env,
    encoding: 'utf8',
  }).trim();
  const port = await freePort();
  const prof = profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(profile)}`] : [];
  const serverArgs = [...prof, BIN, 'serve', '--port', String(port), ...BENCH_SERVE_FLAGS];
  if (deliverer) serverArgs.push('--no-webhook-delivery');
  const child = spawn('taskset', ['-c', SERVER_CORE, process.execPath, ...serverArgs], {
    env,
    stdio: 'inherit',
  });
  const procs = [child];
  if (deliverer) {
    procs.push(
      spawn('taskset', ['-c', LOAD_CORE, process.execPath, BIN, 'deliver', '--log-level', 'warn'], {
        env,
        stdio: 'inherit',
      }),
    );
  }
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/readyz');
  for (let i = 0; i < hooks; i++) {
    const res = await fetch(`${url}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${receiver}/${tag}/${i}` }),
    });
    if (res.status !== 201) throw new Error(`webhook registration: ${res.status} ${await res.text()}`);
  }
  for (const p of procs) p.kill('SIGSTOP');
  return { name, url, token, file, hooks, tag, created: 0, procs } satisfies Target;
}

const signal = (t: Target, s: NodeJS.Signals) => {
  for (const p of t.procs) p.kill(s);
};

/** One wrk run of creates on `t`, which are added to its `created`. */
function wrk(t: Target, seconds: number): { rps: number; p50: number; p99: number } {
  const out = execFileSync(
    'taskset',
    [
      '-c',
      LOAD_CORE,
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
  t.created += r.total;
  return { rps: r.rps, p50: r.p50, p99: r.p99 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// The receiver runs in a process of its own, on core 1 with wrk: this script blocks while wrk runs
// (execFileSync), and a receiver in it would answer nothing, so deliveries would time out. GET
// answers how many deliveries it has acknowledged (GET /{tag}: to that target's endpoints). The
// backlog is counted here, not in the store, so that it means the same whatever the store keeps.
const receiverCode = `
  let n = 0;
  const by = new Map();
  const s = require('node:http').createServer((req, res) => {
    const tag = req.url.split('/')[1];
    if (req.method === 'GET') return res.end(String(tag ? (by.get(tag) ?? 0) : n));
    req.resume().on('end', () => { n++; by.set(tag, (by.get(tag) ?? 0) + 1); res.writeHead(204).end(); });
  });
  s.keepAliveTimeout = 60_000;
  s.listen(0, '127.0.0.1', () => console.log(s.address().port));
  process.on('SIGTERM', () => { console.log('delivered ' + n); process.exit(0); });`;
const receiverProc = spawn('taskset', ['-c', LOAD_CORE, process.execPath, '-e', receiverCode], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
let receiverOut = '';
receiverProc.stdout!.on('data', (d) => (receiverOut += d));
while (!/\n/.test(receiverOut)) await sleep(20);
const receiverUrl = `http://127.0.0.1:${receiverOut.trim()}`;
const acknowledged = async (tag = '') => Number(await (await fetch(`${receiverUrl}/${tag}`)).text());
process.on('exit', () => receiverProc.kill('SIGKILL'));
process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));

const hooked: Target[] = [];
if (opt.deliver !== 'process')
  hooked.push(await start('10 hooks, delivered by the server', 10, receiverUrl, false, opt.profile));
if (opt.deliver !== 'server') {
  const profile = hooked.length === 0 ? opt.profile : undefined;
  hooked.push(await start('10 hooks, delivered by a deliver process', 10, receiverUrl, true, profile));
}
const targets = [await start('events, no endpoints', 0, receiverUrl, false), ...hooked];
const cores = `cores: each server on core ${SERVER_CORE} alone (the others stopped); wrk, the receiver${
  opt.deliver === 'server' ? '' : ' and the deliver process'
} on core ${LOAD_CORE}`;
console.error(cores);
const results = new Map<string, { rps: number; p50: number; p99: number }[]>();
try {
  for (const t of targets) {
    signal(t, 'SIGCONT');
    wrk(t, 2); // warm-up
    signal(t, 'SIGSTOP');
  }
  for (let round = 0; round < Number(opt.rounds); round++) {
    for (const t of round % 2 ? [...targets].reverse() : targets) {
      signal(t, 'SIGCONT');
      const before = await acknowledged();
      const r = wrk(t, Number(opt.duration));
      const during = (await acknowledged()) - before;
      signal(t, 'SIGSTOP');
      results.set(t.name, [...(results.get(t.name) ?? []), r]);
      console.error(
        `round ${round + 1} ${t.name}: ${r.rps.toFixed(0)} req/s, p99 ${r.p99.toFixed(2)} ms${
          t.hooks ? `; ${(during / Number(opt.duration)).toFixed(0)} deliveries/s acknowledged meanwhile` : ''
        }`,
      );
    }
  }
} catch (err) {
  for (const t of targets) signal(t, 'SIGKILL');
  throw err;
}

// The backlog: each 10-hooks server resumed alone, no load, until its endpoints have been sent a
// delivery of every plant created on it (counted at the receiver).
const drains = new Map<string, { backlog: number; seconds: number; rate: number }>();
for (const t of hooked) {
  const owed = t.created * t.hooks;
  const ack0 = await acknowledged(t.tag);
  const backlog = Math.max(0, owed - ack0);
  const t0 = performance.now();
  signal(t, 'SIGCONT');
  let left = backlog;
  while (left > 0 && performance.now() - t0 < Number(opt['drain-limit']) * 1000) {
    await sleep(50);
    left = owed - (await acknowledged(t.tag));
  }
  const seconds = (performance.now() - t0) / 1000;
  const delivered = (await acknowledged(t.tag)) - ack0;
  signal(t, 'SIGSTOP');
  if (left > 0) console.error(`${t.name}: ${left} deliveries still pending after ${seconds.toFixed(0)} s`);
  drains.set(t.name, { backlog, seconds, rate: delivered / seconds });
}

for (const t of targets) {
  signal(t, 'SIGCONT');
  for (const p of t.procs) p.kill('SIGTERM');
}
await Promise.all(targets.flatMap((t) => t.procs.map((p) => new Promise((r) => p.once('exit', r)))));

const base = results.get(targets[0]!.name)!;
say(
  `${new Date().toISOString().slice(0, 10)}, ${availableParallelism()} cores, Node ${process.version}, POST /plants on SQLite (full durability), wrk 50 connections, ${opt.rounds} rounds × ${opt.duration} s; × no endpoints is the median of the per-round ratios; ${cores}\n`,
);
say(
  `| server (core ${SERVER_CORE}) | create req/s (median of ${opt.rounds}) | × no endpoints | p50 | p99 | backlog at the end | drained in | deliveries/s draining |`,
);
say('|---|---|---|---|---|---|---|---|');
for (const t of targets) {
  const rs = results.get(t.name)!;
  const rps = median(rs.map((r) => r.rps));
  const d = drains.get(t.name);
  const ratio = median(rs.map((r, i) => r.rps / base[i]!.rps));
  say(
    `| ${t.name} | ${rps.toFixed(0)} | ${ratio.toFixed(2)} | ${median(rs.map((r) => r.p50)).toFixed(2)} ms | ${median(rs.map((r) => r.p99)).toFixed(2)} ms | ${
      d ? `${d.backlog} | ${d.seconds.toFixed(1)} s | ${d.rate.toFixed(0)}` : '– | – | –'
    } |`,
  );
}
receiverProc.kill('SIGTERM');
await new Promise((r) => receiverProc.once('exit', r));
say(`\nwebhook deliveries acknowledged by the receiver: ${receiverOut.trim().split('\n').pop()}`);
if (opt.write) writeSection(join(ROOT, 'docs/benchmarks.md'), 'webhooks', report.join('\n').trim());
