/**
 * Webhooks from the log on PostgreSQL, roughly: POST /plants throughput of a `serve` with no
 * endpoint against one with 10 endpoints of the caller whose deliveries a separate `deliver`
 * process sends (`serve --no-webhook-delivery`), each on a database of its own; then the deliveries per second of the
 * one `deliver` process draining what the rounds left, and a backlog of --backlog events × 10
 * endpoints written with the deliverer stopped, drained alone. The receiver answers 204 at once.
 * The targets run one after the other (no interleaving: a client stopped with SIGSTOP times its
 * queries out when continued); PostgreSQL runs on the same machine, unpinned: rough figures.
 *
 *   npx tsx bench/pg-webhooks.ts [--rounds 3] [--duration 5] [--backlog 10000]
 *   (needs wrk and PostgreSQL at PG_URL, default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { BENCH_SERVE_FLAGS, freePort, waitReady } from './ports.js';

const { values: opt } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '5' },
    backlog: { type: 'string', default: '10000' },
    'drain-limit': { type: 'string', default: '180' },
  },
});
const ROOT = resolve(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin/plantstore');
const ADMIN_URL = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const HOOKS = 10;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const admin = new pg.Client({ connectionString: ADMIN_URL });
await admin.connect();
const databases: string[] = [];
async function database(): Promise<string> {
  const name = `plantstore_bench_hooks_${process.pid}_${databases.length}`;
  await admin.query(`CREATE DATABASE ${name}`);
  databases.push(name);
  const u = new URL(ADMIN_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

// The receiver: a process of its own (this script blocks while wrk runs); GET answers how many
// deliveries it has acknowledged.
const receiverCode = `
  let n = 0;
  const s = require('node:http').createServer((req, res) => {
    if (req.method === 'GET') return res.end(String(n));
    req.resume().on('end', () => { n++; res.writeHead(204).end(); });
  });
  s.keepAliveTimeout = 60_000;
  s.listen(0, '127.0.0.1', () => console.log(s.address().port));`;
const receiverProc = spawn(process.execPath, ['-e', receiverCode], { stdio: ['ignore', 'pipe', 'inherit'] });
let receiverOut = '';
receiverProc.stdout!.on('data', (d) => {
  receiverOut += d;
});
while (!/\n/.test(receiverOut)) await sleep(20);
const receiverUrl = `http://127.0.0.1:${receiverOut.trim()}`;
const acknowledged = async () => Number(await (await fetch(receiverUrl)).text());

interface Target {
  name: string;
  url: string;
  db: string;
  token: string;
  server: ChildProcess;
  deliverer: ChildProcess | null;
}

async function start(name: string, hooks: number): Promise<Target> {
  const db = await database();
  const env = { ...process.env, DATABASE_URL: db, WEBHOOK_ALLOW_PRIVATE: 'true' };
  execFileSync(process.execPath, [BIN, 'migrate'], { env, stdio: 'ignore' });
  const token = execFileSync(process.execPath, [BIN, 'token', 'create', '--user', 'bench'], {
    env,
    encoding: 'utf8',
  }).trim();
  const port = await freePort();
  const args = [BIN, 'serve', '--port', String(port), ...BENCH_SERVE_FLAGS];
  if (hooks > 0) args.push('--no-webhook-delivery');
  const server = spawn(process.execPath, args, { env, stdio: 'inherit' });
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/readyz');
  for (let i = 0; i < hooks; i++) {
    const res = await fetch(`${url}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${receiverUrl}/${i}` }),
    });
    if (res.status !== 201) throw new Error(`webhook registration: ${res.status} ${await res.text()}`);
  }
  const deliverer =
    hooks > 0
      ? spawn(process.execPath, [BIN, 'deliver', '--log-level', 'warn'], { env, stdio: 'inherit' })
      : null;
  return { name, url, db, token, server, deliverer };
}

const procs = (t: Target) => [t.server, ...(t.deliverer ? [t.deliverer] : [])];
const signal = (t: Target, s: NodeJS.Signals) => {
  for (const p of procs(t)) p.kill(s);
};

function wrk(t: Target, seconds: number) {
  const out = execFileSync(
    process.execPath,
    [
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
  return r as { rps: number; p50: number; p99: number };
}

async function events(t: Target): Promise<number> {
  const c = new pg.Client({ connectionString: t.db });
  await c.connect();
  try {
    return Number((await c.query('SELECT count(*) AS n FROM events')).rows[0].n);
  } finally {
    await c.end();
  }
}

// Waits until the receiver has acknowledged `want` more deliveries than `from`; how long it took.
async function drain(from: number, want: number): Promise<{ seconds: number; got: number }> {
  const t0 = performance.now();
  let got = 0;
  while (got < want && performance.now() - t0 < Number(opt['drain-limit']) * 1000) {
    await sleep(50);
    got = (await acknowledged()) - from;
  }
  return { seconds: (performance.now() - t0) / 1000, got };
}

// One target at a time (a process stopped with SIGSTOP would time its PostgreSQL queries out when
// continued), the other not yet started or stopped for good.
const results = new Map<string, { rps: number; p50: number; p99: number }[]>();
const targets: Target[] = [];
async function measure(name: string, hooks: number): Promise<Target> {
  const t = await start(name, hooks);
  targets.push(t);
  wrk(t, 2);
  for (let round = 0; round < Number(opt.rounds); round++) {
    const before = await acknowledged();
    const r = wrk(t, Number(opt.duration));
    const during = (await acknowledged()) - before;
    results.set(t.name, [...(results.get(t.name) ?? []), r]);
    console.error(
      `round ${round + 1} ${t.name}: ${r.rps.toFixed(0)} creates/s, p99 ${r.p99.toFixed(2)} ms${
        t.deliverer
          ? `; ${(during / Number(opt.duration)).toFixed(0)} deliveries/s acknowledged meanwhile`
          : ''
      }`,
    );
  }
  return t;
}
const none = await measure('no endpoints', 0);
signal(none, 'SIGTERM');
const hooked = await measure(`${HOOKS} endpoints, a deliver process`, HOOKS);
try {
  // What the rounds left: the deliverer alone, until every event went to every endpoint.
  const left = (await events(hooked)) * HOOKS - (await acknowledged());
  const d1 = await drain(await acknowledged(), left);
  // A backlog written with the deliverer stopped (nothing in flight: it has drained), then drained alone.
  hooked.deliverer!.kill('SIGSTOP');
  const n = Number(opt.backlog);
  const c = new pg.Client({ connectionString: hooked.db });
  await c.connect();
  const g = (await c.query(`SELECT garden_id FROM garden_members WHERE user_id = 'bench'`)).rows[0].garden_id;
  await c.query(
    `INSERT INTO events (id, type, owner, garden, data, created_at)
     SELECT 'evt_bench' || i, 'plant.created', 'bench', $1, json_build_object('id', i, 'name', 'b', 'garden', $1::text)::text, now()
     FROM generate_series(1, $2::int) i`,
    [g, n],
  );
  await c.end();
  hooked.deliverer!.kill('SIGCONT');
  const d2 = await drain(await acknowledged(), n * HOOKS);
  const base = results.get(none.name)!;
  console.log(
    `${new Date().toISOString().slice(0, 10)}, ${availableParallelism()} cores, Node ${process.version}, PostgreSQL on the same machine, unpinned; wrk 50 connections, ${opt.rounds} rounds × ${opt.duration} s, medians`,
  );
  console.log('| target | creates/s | × no endpoints | p99 ms |');
  console.log('|---|---:|---:|---:|');
  for (const t of targets) {
    const rs = results.get(t.name)!;
    console.log(
      `| ${t.name} | ${median(rs.map((r) => r.rps)).toFixed(0)} | ${(median(rs.map((r) => r.rps)) / median(base.map((r) => r.rps))).toFixed(2)} | ${median(rs.map((r) => r.p99)).toFixed(2)} |`,
    );
  }
  console.log(
    `left by the rounds: ${left} deliveries, ${d1.got} drained in ${d1.seconds.toFixed(1)} s (${(d1.got / d1.seconds).toFixed(0)}/s)`,
  );
  console.log(
    `backlog of ${n * HOOKS} (${n} events × ${HOOKS} endpoints): ${d2.got} drained in ${d2.seconds.toFixed(1)} s (${(d2.got / d2.seconds).toFixed(0)}/s), one deliver process`,
  );
} finally {
  for (const t of targets) {
    signal(t, 'SIGCONT');
    signal(t, 'SIGTERM');
  }
  await Promise.all(
    targets.flatMap((t) =>
      procs(t).map((p) => new Promise((r) => (p.exitCode !== null ? r(0) : p.once('exit', r)))),
    ),
  );
  receiverProc.kill('SIGKILL');
  for (const name of databases) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
}
