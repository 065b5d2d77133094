/**
 * Events at scale: thousands of open `GET /events` streams with plants created at a steady rate,
 * and webhook throughput with a `deliver` process of its own. Everything runs against the built
 * CLI (`bin/plantstore`, or another tree's with --bin) and is bounded in time: a server that falls
 * behind makes the figures bad, never the run endless.
 *
 * Streams (for each N of --streams, on each engine of --engine):
 *   A fresh store; N/10 users, each with a token (made over HTTP by an admin token) and its home
 *   garden; `serve` pinned to core 0 (on PostgreSQL two instances on one fresh database, both on
 *   core 0, N/2 streams each, every user's streams split between them); this script — the streams
 *   and the creates — pinned to core 1. Phases: no stream open (--quiet s), N streams opened
 *   (10 per user) and idle (--idle s), then creates at --rate per second (default 50 below 10,000
 *   streams, 100 from 10,000), spread over the users and the instances, for --load s, then a
 *   drain of at most --drain s. Figures: the latency from a create being sent to its event's
 *   arrival on each stream of its owner (and on the last of them), events missing on an owner's
 *   stream at the end, events on a stream of anyone else (foreign), the server's CPU share
 *   (utime+stime from /proc) and RSS in each phase, RSS per open stream, and what the servers ask
 *   of the store: store calls per second from /metrics and, on PostgreSQL, transactions per second
 *   from pg_stat_database.
 *
 * Webhooks (on each engine of --engine): a receiver that answers 204 at once (or after --receiver-ms; node:http,
 * keep-alive) on core 1; `serve --no-webhook-delivery` on core 0 on a fresh store; POST /plants
 * by wrk (bench/wrk.mjs; autocannon, bench/load.mjs, when wrk is not installed), 50 connections,
 * --rounds interleaved rounds of --duration s (the servers not measured stopped), with 0 endpoints, with --endpoints
 * endpoints and no deliverer running (delivery off), and with them and a `deliver` process on
 * core 1 (delivery on). Then a backlog of --backlog deliveries (--backlog / --endpoints creates
 * made with no deliverer running), the server stopped, and one `deliver` process started on
 * core 0 alone: how long until the receiver has them all, and the rate. With --slow-endpoints K, only
 * the first K endpoints answer after --receiver-ms, and the drain says besides when the other
 * endpoints had all of theirs: what slow receivers cost the fast ones behind the same process.
 *
 *   npx tsx bench/events-scale.ts [--streams 1000,10000] [--engine sqlite|postgres|sqlite,postgres]
 *       [--only streams|webhooks|drain] [--quiet 10] [--idle 20] [--load 20] [--drain 20] [--rate N]
 *       [--rounds 3] [--duration 5] [--endpoints 10] [--backlog 100000] [--receiver-ms 0] [--slow-endpoints K] [--drain-limit 120]
 *       [--deliver-durability full|normal] [--pg URL] [--bin OTHER/bin/plantstore] [--write]
 *   (npx tsx bench/run.ts --events-scale … runs the same; needs a build: npm run build; wrk for
 *   the webhook part: apt-get install wrk)
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { BENCH_PG, BENCH_SERVE_FLAGS, freePort, waitReady } from './ports.js';
import { printed, writeSection } from './report.js';

const { values: opt } = parseArgs({
  options: {
    streams: { type: 'string', default: '1000,10000' },
    engine: { type: 'string', default: 'sqlite' },
    only: { type: 'string' },
    quiet: { type: 'string', default: '10' },
    idle: { type: 'string', default: '20' },
    load: { type: 'string', default: '20' },
    drain: { type: 'string', default: '20' },
    rate: { type: 'string' },
    // Longest wait for N streams to open, in seconds.
    'open-limit': { type: 'string', default: '180' },
    instances: { type: 'string', default: '2' },
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    endpoints: { type: 'string', default: '10' },
    // How long the webhook receiver takes to answer each delivery, in ms.
    'receiver-ms': { type: 'string', default: '0' },
    // How many of the endpoints answer after --receiver-ms (the others at once); default: all.
    'slow-endpoints': { type: 'string' },
    backlog: { type: 'string', default: '100000' },
    'drain-limit': { type: 'string', default: '120' },
    // The deliver process's --durability (SQLite): full (the default) or normal.
    'deliver-durability': { type: 'string' },
    pg: { type: 'string', default: BENCH_PG },
    bin: { type: 'string' },
    // With --write: the sections' markers get this suffix (events-streams-sqlite-NAME …), so that the
    // figures of another tree are written beside the others, not over them.
    label: { type: 'string' },
    // What --bin is, for the headings (like "main at 1a2b3c4"), when its folder is not a git checkout.
    tree: { type: 'string' },
    write: { type: 'boolean', default: false },
  },
});
const ENGINES = opt.engine!.split(',');
if (ENGINES.some((e) => e !== 'sqlite' && e !== 'postgres'))
  throw new Error('--engine: sqlite, postgres or sqlite,postgres');
if (opt.only !== undefined && opt.only !== 'streams' && opt.only !== 'webhooks' && opt.only !== 'drain')
  throw new Error('--only: streams, webhooks or drain');
// --only drain: the webhooks scenario's backlog drain alone (no create rounds).
const DRAIN_ONLY = opt.only === 'drain';
const SIZES = opt.streams!.split(',').map(Number);
const ROOT = resolve(import.meta.dirname, '..');
const BIN = opt.bin ? resolve(opt.bin) : join(ROOT, 'bin/plantstore');
const STREAMS_PER_USER = 10;
const SERVER_CORE = '0';
const LOAD_CORE = '1';
const CORES = availableParallelism();
// wrk when it is installed (Debian's package), else autocannon, as in bench/run.ts.
const LOADER = spawnSync('wrk', ['-v']).error === undefined ? 'bench/wrk.mjs' : 'bench/load.mjs';
const LOAD_NAME = LOADER === 'bench/wrk.mjs' ? 'wrk' : 'autocannon';
const PIN = CORES >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;

// Descriptors: every stream is a socket here and one in a server. A child gets the hard limit
// (`ulimit -n` in the shell that starts it); this process re-runs itself with it when the soft one is short.
const limit = (flag: string) => {
  const v = execFileSync('bash', ['-c', `ulimit ${flag}`], { encoding: 'utf8' }).trim();
  return v === 'unlimited' ? 1_048_576 : Number(v);
};
const FD_LIMIT = Math.min(limit('-Hn'), 1_048_576);
const needed = Math.max(...SIZES) + 2_000;
if (limit('-Sn') < needed && FD_LIMIT >= needed && process.env.EVENTS_SCALE_ULIMIT === undefined) {
  const again = spawnSync(
    'bash',
    [
      '-c',
      `ulimit -n ${FD_LIMIT} && exec "$0" "$@"`,
      process.execPath,
      ...process.execArgv,
      ...process.argv.slice(1),
    ],
    { stdio: 'inherit', env: { ...process.env, EVENTS_SCALE_ULIMIT: '1' } },
  );
  process.exit(again.status ?? 1);
}
if (limit('-Sn') < needed) console.error(`ulimit -n is ${limit('-Sn')}: ${needed} descriptors may be needed`);
if (PIN) execFileSync('taskset', ['-cp', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });

const tmp = mkdtempSync(join(tmpdir(), 'plantstore-events-scale-'));
const children = new Set<ChildProcess>();
const cleanups: (() => Promise<void>)[] = [];

/** A child with the descriptor limit raised, pinned to `core` when the machine allows it. */
function spawnPinned(core: string, args: string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const pin = PIN ? `taskset -c ${core} ` : '';
  const child = spawn('bash', ['-c', `ulimit -n ${FD_LIMIT} 2>/dev/null; exec ${pin}"$0" "$@"`, ...args], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env,
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGCONT');
  child.kill('SIGTERM');
  const late = setTimeout(() => child.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(late);
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, async () => {
    for (const c of children) c.kill('SIGKILL');
    for (const c of cleanups.splice(0)) await c().catch(() => {});
    rmSync(tmp, { recursive: true, force: true });
    process.exit(130);
  });
}

/** A fresh store: a SQLite file in the run's folder, or a PostgreSQL database of its own. */
async function freshStore(
  engine: string,
  name: string,
): Promise<{ url: string; db: string | null; drop(): Promise<void> }> {
  if (engine === 'sqlite')
    return { url: `sqlite:${join(tmp, `${name}.db`)}`, db: null, drop: async () => {} };
  const db = `bench_events_${name}_${process.pid}_${Date.now()}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: opt.pg });
    await c.connect();
    await c.query(sql);
    await c.end();
  };
  await admin(`CREATE DATABASE ${db}`);
  const url = new URL(opt.pg!);
  url.pathname = `/${db}`;
  const drop = () => admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
  cleanups.push(drop);
  return { url: url.toString(), db, drop };
}

const cli = (url: string, ...args: string[]) =>
  execFileSync(process.execPath, [BIN, ...args, '--database', url], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();

async function startServe(url: string, extra: string[] = [], env?: NodeJS.ProcessEnv) {
  const port = await freePort();
  const child = spawnPinned(
    SERVER_CORE,
    [
      process.execPath,
      BIN,
      'serve',
      '--port',
      String(port),
      '--database',
      url,
      ...BENCH_SERVE_FLAGS,
      ...extra,
    ],
    env,
  );
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base, '/readyz');
  return { base, port, child, pid: child.pid! };
}

// ---- /proc --------------------------------------------------------------------------------------

/** CPU time of a process so far (all its threads, utime + stime), in ms. */
/**
 * PostgreSQL's own CPU while `fn` runs: utime+stime (from /proc) of the backends connected to the
 * database `db` (pg_stat_activity, sampled every 100 ms so that a backend opened meanwhile is
 * counted from its start; the sampling connection itself left out), and of every postgres process
 * of the machine (other databases' work too, when the machine is shared). Null when /proc cannot
 * be read for them (PostgreSQL on another host).
 */
async function pgCpuDuring<T>(
  db: string,
  fn: () => Promise<T>,
): Promise<{ result: T; dbMs: number | null; allMs: number | null }> {
  const c = new pg.Client({ connectionString: opt.pg });
  await c.connect();
  const self = Number((await c.query('SELECT pg_backend_pid() AS p')).rows[0].p);
  const backends = async () =>
    (await c.query('SELECT pid FROM pg_stat_activity WHERE datname = $1', [db])).rows
      .map((r) => Number(r.pid))
      .filter((p) => p !== self);
  const postgresPids = () => {
    try {
      return execFileSync('pgrep', ['-x', 'postgres'], { encoding: 'utf8' }).trim().split('\n').map(Number);
    } catch {
      return [];
    }
  };
  // Each pid: its CPU when first seen (0 if it started after the window opened), and the last read.
  const seen = new Map<number, { from: number; last: number }>();
  const all = new Map<number, { from: number; last: number }>();
  const sample = (map: typeof seen, pids: number[], first: boolean) => {
    for (const p of pids) {
      const ms = cpuMs(p);
      if (Number.isNaN(ms)) continue;
      const x = map.get(p);
      if (x) x.last = ms;
      else map.set(p, { from: first ? ms : 0, last: ms });
    }
  };
  sample(seen, await backends(), true);
  sample(all, postgresPids(), true);
  let done = false;
  const poller = (async () => {
    while (!done) {
      await sleep(100);
      sample(seen, await backends(), false);
      sample(all, postgresPids(), false);
    }
  })();
  try {
    const result = await fn();
    done = true;
    await poller;
    sample(seen, await backends(), false);
    sample(all, postgresPids(), false);
    const sum = (m: typeof seen) =>
      m.size === 0 ? null : [...m.values()].reduce((n, x) => n + x.last - x.from, 0);
    return { result, dbMs: sum(seen), allMs: sum(all) };
  } finally {
    done = true;
    await c.end();
  }
}

function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return Number.NaN;
  }
}
function rssMb(pid: number): number {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+([0-9]+) kB/.exec(s)?.[1]) / 1024;
  } catch {
    return Number.NaN;
  }
}

// ---- HTTP ---------------------------------------------------------------------------------------

const agents = new Map<string, Agent>();
const agentFor = (base: string) => {
  let a = agents.get(base);
  if (!a) {
    a = new Agent({ keepAlive: true, maxSockets: 64 });
    agents.set(base, a);
  }
  return a;
};

function call(
  base: string,
  method: string,
  path: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  return new Promise((ok, fail) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      `${base}${path}`,
      {
        method,
        agent: agentFor(base),
        headers: {
          authorization: `Bearer ${token}`,
          ...(data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => ok({ status: res.statusCode!, headers: res.headers, text }));
        res.on('error', fail);
      },
    );
    req.on('error', fail);
    req.end(data);
  });
}

/** Runs `fn` over `items`, `width` at a time. */
async function pool<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/** Store calls so far by operation, summed over the servers' /metrics. */
async function storeCalls(bases: string[], token: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const base of bases) {
    const r = await call(base, 'GET', '/metrics', token);
    for (const line of r.text.split('\n')) {
      if (!line.startsWith('plantstore_store_operation_duration_seconds_count{')) continue;
      const op = /operation="([^"]+)"/.exec(line)?.[1] ?? '?';
      out.set(op, (out.get(op) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
    }
  }
  return out;
}
const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/** Transactions of one PostgreSQL database so far (every statement outside a transaction is one). */
async function pgTransactions(url: string): Promise<number> {
  const name = new URL(url).pathname.slice(1);
  const c = new pg.Client({ connectionString: opt.pg });
  await c.connect();
  try {
    const r = await c.query(
      'SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1',
      [name],
    );
    return Number(r.rows[0]?.n ?? Number.NaN);
  } finally {
    await c.end();
  }
}

// ---- figures ------------------------------------------------------------------------------------

const pctl = (sorted: number[], q: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
const ms = (x: number) =>
  Number.isNaN(x) ? '–' : x >= 1000 ? `${(x / 1000).toFixed(1)} s` : `${x.toFixed(0)} ms`;
const pct = (x: number) => (Number.isNaN(x) ? '–' : `${(x * 100).toFixed(1)} %`);
const mb = (x: number) => (Number.isNaN(x) ? '–' : `${x.toFixed(0)} MB`);
const date = new Date().toISOString().slice(0, 10);
let commit = opt.tree ?? (opt.bin ? `of ${opt.bin}` : '?');
if (opt.tree === undefined)
  try {
    const git = (...args: string[]) =>
      execFileSync('git', ['-C', resolve(BIN, '../..'), ...args], { encoding: 'utf8' }).trim();
    // The commit, and the last one that changed the service itself (src/), which is what is measured.
    commit = `${git('rev-parse', '--short', 'HEAD')} (src/ as of ${git('log', '-1', '--format=%h', '--', 'src')})`;
  } catch {}
const machine = `${date}, tree ${commit}, ${CORES} cores (shared), Node ${process.version}; ${
  PIN
    ? `server on core ${SERVER_CORE}, load on core ${LOAD_CORE}`
    : 'not pinned (taskset or a second core missing)'
}`;

// ---- streams ------------------------------------------------------------------------------------

interface Stream {
  user: number;
  inst: number;
  open: boolean;
  closed: boolean;
}

interface PhaseCpu {
  cpu: number[];
  seconds: number;
}

async function streamsScenario(engine: string, n: number, say: (l: string) => void): Promise<void> {
  const users = Math.max(1, Math.ceil(n / STREAMS_PER_USER));
  const instances = engine === 'postgres' ? Number(opt.instances) : 1;
  const rate = opt.rate ? Number(opt.rate) : n >= 10_000 ? 100 : 50;
  const log = (m: string) =>
    console.error(`[${new Date().toISOString().slice(11, 19)}] ${engine} ${n}: ${m}`);
  const store = await freshStore(engine, `streams${n}`);
  cli(store.url, 'migrate');
  const admin = cli(
    store.url,
    'token',
    'create',
    '--user',
    'bench-admin',
    '--scopes',
    'plants:read,plants:write,plants:admin,tokens:manage',
  );
  const servers: Awaited<ReturnType<typeof startServe>>[] = [];
  // Keep-alive longer than the default 5 s: at 50-100 creates/s over 64 sockets per instance, a
  // socket idle for 5 s is sometimes reused by this client just as the server closes it (ECONNRESET).
  for (let i = 0; i < instances; i++)
    servers.push(await startServe(store.url, ['--keep-alive-timeout', '65000']));
  const pids = servers.map((s) => s.pid);
  const bases = servers.map((s) => s.base);
  try {
    // Users: a token each, made over HTTP, and the home garden (made on a user's first request).
    log(`making ${users} users`);
    const tokens: string[] = new Array(users);
    await pool(
      Array.from({ length: users }, (_, u) => u),
      16,
      async (u) => {
        const base = bases[u % instances]!;
        const r = await call(base, 'POST', '/tokens', admin, {
          user: `scale-${u}`,
          scopes: ['plants:read', 'plants:write'],
          name: 'bench',
        });
        if (r.status !== 201) throw new Error(`POST /tokens: ${r.status} ${r.text}`);
        tokens[u] = JSON.parse(r.text).token;
        const g = await call(base, 'GET', '/gardens', tokens[u]!);
        if (g.status !== 200) throw new Error(`GET /gardens: ${g.status} ${g.text}`);
      },
    );

    // What the store is asked, and the servers' CPU, over a phase.
    const pgUrl = engine === 'postgres' ? store.url : null;
    // A phase starts once the counters are read and ends before they are (a busy server answers
    // /metrics late), so that its CPU and time are the phase's own.
    const mark = async (edge: 'start' | 'end') => {
      const proc = () => ({ at: performance.now(), cpu: pids.map(cpuMs) });
      const before = edge === 'end' ? proc() : null;
      const calls = await storeCalls(bases, admin);
      const xacts = pgUrl ? await pgTransactions(pgUrl) : Number.NaN;
      return { ...(before ?? proc()), calls, xacts };
    };
    type Mark = Awaited<ReturnType<typeof mark>>;
    const between = (a: Mark, b: Mark) => {
      const s = (b.at - a.at) / 1000;
      const reads = (b.calls.get('readEvents') ?? 0) - (a.calls.get('readEvents') ?? 0);
      return {
        seconds: s,
        cpu: pids.map((_, i) => (b.cpu[i]! - a.cpu[i]!) / (b.at - a.at)),
        callsPerS: (total(b.calls) - total(a.calls)) / s,
        readsPerS: reads / s,
        xactsPerS: (b.xacts - a.xacts) / s,
      } satisfies PhaseCpu & Record<string, unknown>;
    };
    // PostgreSQL's statistics of a backend left idle reach pg_stat_database up to 10 s later: the
    // users' setup must not be counted in the first phase.
    await sleep(engine === 'postgres' ? 11_000 : 2000);

    // No stream open.
    const q0 = await mark('start');
    await sleep(Number(opt.quiet) * 1000);
    const q1 = await mark('end');
    const quiet = between(q0, q1);
    const rssBefore = pids.map(rssMb);

    // The streams: user u's go to the instances in turn.
    const streams: Stream[] = [];
    const arrivals = new Map<number, Map<number, number>>(); // plant id → stream → first arrival
    let duplicates = 0;
    let otherEvents = 0;
    const sockets: { destroy(): void }[] = [];
    const onMessage = (s: number, msg: string, now: number) => {
      const line = msg.split('\n').find((l) => l.startsWith('data:'));
      if (!line) return;
      const ev = JSON.parse(line.slice(5));
      if (ev.type !== 'plant.created') {
        otherEvents++;
        return;
      }
      const id = Number(ev.data.id);
      let per = arrivals.get(id);
      if (!per) {
        per = new Map();
        arrivals.set(id, per);
      }
      if (per.has(s)) duplicates++;
      else per.set(s, now);
    };
    const open = (s: number) =>
      new Promise<void>((ok, fail) => {
        const st = streams[s]!;
        const req = request(
          `${bases[st.inst]}/events`,
          {
            agent: false,
            headers: { authorization: `Bearer ${tokens[st.user]}`, accept: 'text/event-stream' },
          },
          (res) => {
            if (res.statusCode !== 200) {
              res.resume();
              fail(new Error(`GET /events: ${res.statusCode}`));
              return;
            }
            st.open = true;
            ok();
            res.setEncoding('utf8');
            let buf = '';
            res.on('data', (chunk: string) => {
              const now = performance.now();
              buf += chunk;
              for (let k = buf.indexOf('\n\n'); k >= 0; k = buf.indexOf('\n\n')) {
                onMessage(s, buf.slice(0, k), now);
                buf = buf.slice(k + 2);
              }
            });
            res.on('close', () => (st.closed = true));
            res.on('error', () => {});
          },
        );
        req.on('error', (err) => {
          st.closed = true;
          fail(err);
        });
        sockets.push(req);
        req.end();
      });
    for (let i = 0; i < n; i++) {
      const user = i % users;
      streams.push({ user, inst: Math.floor(i / users) % instances, open: false, closed: false });
    }
    log(`opening ${n} streams`);
    const openStart = performance.now();
    let refused = 0;
    // Why streams were refused and creates failed: status codes and errors, counted.
    const reasons = new Map<string, number>();
    const openDeadline = openStart + Number(opt['open-limit']) * 1000;
    await pool(
      streams.map((_, i) => i),
      100,
      async (i) => {
        if (performance.now() > openDeadline) return;
        await open(i).catch((err: Error) => {
          refused++;
          reasons.set(err.message, (reasons.get(err.message) ?? 0) + 1);
        });
      },
    );
    const openSeconds = (performance.now() - openStart) / 1000;
    const opened = streams.filter((s) => s.open).length;
    log(`${opened} open in ${openSeconds.toFixed(1)} s (${refused} refused)`);
    const ownerStreams: number[][] = Array.from({ length: users }, () => []);
    streams.forEach((s, i) => {
      if (s.open) ownerStreams[s.user]!.push(i);
    });

    // Idle, every stream open.
    await sleep(3000);
    const i0 = await mark('start');
    await sleep(Number(opt.idle) * 1000);
    const i1 = await mark('end');
    const idle = between(i0, i1);
    const rssIdle = pids.map(rssMb);
    log(`idle: server CPU ${idle.cpu.map(pct).join(', ')}`);

    // Loaded: creates at `rate` per second, spread over the users and the instances.
    const creates = new Map<number, { user: number; sent: number; inst: number }>();
    const answered: number[] = [];
    let failed = 0;
    let sent = 0;
    const loadMs = Number(opt.load) * 1000;
    const rssPeak = [...rssIdle];
    const l0 = await mark('start');
    const loadStart = performance.now();
    const inflight = new Set<Promise<void>>();
    await new Promise<void>((done) => {
      const tick = setInterval(() => {
        const elapsed = performance.now() - loadStart;
        const due = Math.min(Math.floor((elapsed / 1000) * rate), Math.floor((loadMs / 1000) * rate));
        while (sent < due) {
          const k = sent++;
          const user = (k * 7919) % users;
          const t0 = performance.now();
          const p = call(bases[k % instances]!, 'POST', '/plants', tokens[user]!, {
            name: `scale ${k}`,
          }).then(
            (r) => {
              const id = /\/plants\/([0-9]+)$/.exec(String(r.headers.location ?? ''))?.[1];
              answered.push(performance.now() - t0);
              if (r.status === 201 && id) creates.set(Number(id), { user, sent: t0, inst: k % instances });
              else {
                failed++;
                const why = `POST /plants: ${r.status}`;
                reasons.set(why, (reasons.get(why) ?? 0) + 1);
              }
            },
            (err: Error) => {
              failed++;
              const why = `POST /plants: ${err.message}`;
              reasons.set(why, (reasons.get(why) ?? 0) + 1);
            },
          );
          inflight.add(p);
          void p.finally(() => inflight.delete(p));
        }
        if (elapsed >= loadMs) {
          clearInterval(tick);
          done();
        }
      }, 5);
      const rssTick = setInterval(() => {
        pids.forEach((p, i) => {
          rssPeak[i] = Math.max(rssPeak[i]!, rssMb(p));
        });
        if (performance.now() - loadStart >= loadMs) clearInterval(rssTick);
      }, 1000);
    });
    // The drain is timed from the last create sent (the end mark waits for a busy server's /metrics).
    const drainStart = performance.now();
    const l1 = await mark('end');
    const loaded = between(l0, l1);
    log(`loaded: ${sent} creates sent, server CPU ${loaded.cpu.map(pct).join(', ')}`);

    // Drain: until every owner stream has every event, for at most --drain seconds.
    const expected = () => {
      let want = 0;
      let got = 0;
      for (const [id, c] of creates) {
        const per = arrivals.get(id);
        for (const s of ownerStreams[c.user]!) {
          want++;
          if (per?.has(s)) got++;
        }
      }
      return { want, got };
    };
    const drainLeft = () => Number(opt.drain) * 1000 - (performance.now() - drainStart);
    // The creates still unanswered first (an event may come before its create's answer names it).
    await Promise.race([Promise.all([...inflight]), sleep(Math.max(0, drainLeft()))]);
    while (drainLeft() > 0) {
      const e = expected();
      if (e.got >= e.want) break;
      await sleep(250);
    }
    const drainSeconds = (performance.now() - drainStart) / 1000;

    // Figures.
    const each: number[] = [];
    // With several instances: arrivals on a stream of the instance that wrote the event, and of another.
    const sameInst: number[] = [];
    const otherInst: number[] = [];
    const last: number[] = [];
    let missing = 0;
    let foreign = 0;
    let unknown = 0;
    for (const [id, c] of creates) {
      const per = arrivals.get(id);
      let worst = 0;
      let all = true;
      for (const s of ownerStreams[c.user]!) {
        const t = per?.get(s);
        if (t === undefined) {
          missing++;
          all = false;
        } else {
          each.push(t - c.sent);
          (streams[s]!.inst === c.inst ? sameInst : otherInst).push(t - c.sent);
          worst = Math.max(worst, t - c.sent);
        }
      }
      if (all) last.push(worst);
      for (const s of per?.keys() ?? []) if (streams[s]!.user !== c.user) foreign++;
    }
    for (const id of arrivals.keys()) if (!creates.has(id)) unknown++;
    each.sort((a, b) => a - b);
    last.sort((a, b) => a - b);
    const closed = streams.filter((s) => s.open && s.closed).length;
    for (const s of sockets) s.destroy();

    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const perStreamKb = ((sum(rssIdle) - sum(rssBefore)) * 1024) / Math.max(1, opened);
    const cpuCell = (c: number[]) =>
      instances > 1 ? `${pct(sum(c))} (${c.map(pct).join(' + ')})` : pct(c[0]!);
    const rssCell = (r: number[]) => (instances > 1 ? `${mb(sum(r))} (${r.map(mb).join(' + ')})` : mb(r[0]!));
    say(
      `**${engine === 'sqlite' ? 'SQLite' : `PostgreSQL, ${instances} instances on one database`}, ${opened.toLocaleString('en')} streams over ${users.toLocaleString('en')} users, ${rate} creates/s** (${machine}; quiet ${opt.quiet} s, idle ${opt.idle} s, load ${opt.load} s, drain ≤ ${opt.drain} s)`,
    );
    say('');
    say('| figure | measured | target |');
    say('|---|---|---|');
    say(
      `| streams open | ${opened.toLocaleString('en')} of ${n.toLocaleString('en')} in ${openSeconds.toFixed(1)} s (${refused} refused); ${closed} closed by the server before the end | – |`,
    );
    say(
      `| creates | ${sent} sent in ${(loadMs / 1000).toFixed(0)} s, ${creates.size} answered 201, ${failed} failed | – |`,
    );
    answered.sort((a, b) => a - b);
    say(
      `| create answered (send → 201) | p50 ${ms(pctl(answered, 0.5))}, p99 ${ms(pctl(answered, 0.99))}, max ${ms(pctl(answered, 1))} | – |`,
    );
    say(
      `| latency, send → each owner stream | p50 ${ms(pctl(each, 0.5))}, p90 ${ms(pctl(each, 0.9))}, p99 ${ms(pctl(each, 0.99))}, max ${ms(pctl(each, 1))} (${each.length.toLocaleString('en')} arrivals) | p99 ≤ 250 ms |`,
    );
    if (instances > 1) {
      sameInst.sort((a, b) => a - b);
      otherInst.sort((a, b) => a - b);
      say(
        `| latency by instance: stream on the writing one / on another | p50 ${ms(pctl(sameInst, 0.5))}, p99 ${ms(pctl(sameInst, 0.99))}, max ${ms(pctl(sameInst, 1))} / p50 ${ms(pctl(otherInst, 0.5))}, p99 ${ms(pctl(otherInst, 0.99))}, max ${ms(pctl(otherInst, 1))} | – |`,
      );
    }
    say(
      `| latency, send → the last of the owner's streams | p50 ${ms(pctl(last, 0.5))}, p99 ${ms(pctl(last, 0.99))}, max ${ms(pctl(last, 1))} (${last.length} events on every owner stream) | – |`,
    );
    say(
      `| missing (owner stream never got it ${drainSeconds.toFixed(1)} s after the last create was sent) | ${missing.toLocaleString('en')} of ${(missing + each.length).toLocaleString('en')} | 0 |`,
    );
    say(`| foreign (on a stream of another user) | ${foreign} | 0 |`);
    if (reasons.size > 0)
      say(`| refusals and failures | ${[...reasons].map(([why, k]) => `${why} × ${k}`).join('; ')} | – |`);
    if (duplicates + unknown + otherEvents > 0)
      say(
        `| other: duplicates, unknown plants, other types | ${duplicates}, ${unknown}, ${otherEvents} | – |`,
      );
    say(`| server CPU, no stream open | ${cpuCell(quiet.cpu)} | – |`);
    say(`| server CPU, every stream open and idle | ${cpuCell(idle.cpu)} | ≤ 5 % |`);
    say(`| server CPU, loaded | ${cpuCell(loaded.cpu)} | – |`);
    say(
      `| RSS: no stream → streams idle → peak loaded | ${rssCell(rssBefore)} → ${rssCell(rssIdle)} → ${rssCell(rssPeak)} | ≤ 400 MB |`,
    );
    say(`| RSS per idle stream | ${perStreamKb.toFixed(1)} KB | ≤ 20 KB |`);
    const perS = (x: number) => (Number.isNaN(x) ? '–' : x.toFixed(1));
    say(
      `| store calls/s (/metrics): no stream, idle, loaded | ${perS(quiet.callsPerS)}, ${perS(idle.callsPerS)}, ${perS(loaded.callsPerS)} (of which readEvents ${perS(quiet.readsPerS)}, ${perS(idle.readsPerS)}, ${perS(loaded.readsPerS)}) | grow with events, not streams |`,
    );
    if (pgUrl)
      say(
        `| PostgreSQL transactions/s (pg_stat_database): no stream, idle, loaded | ${perS(quiet.xactsPerS)}, ${perS(idle.xactsPerS)}, ${perS(loaded.xactsPerS)} | grow with events, not streams |`,
      );
    say('');
  } finally {
    for (const a of agents.values()) a.destroy();
    agents.clear();
    await Promise.all(servers.map((s) => stop(s.child)));
    await store.drop();
  }
}

// ---- webhooks -----------------------------------------------------------------------------------

// The receiver answers each delivery after RECEIVER_MS (0: at once) when its endpoint (the URL's
// path, /0, /1, …) is below SLOW_ENDPOINTS (unset: every endpoint), else at once; GET / answers
// how many deliveries it acknowledged, how many of them were an event it had already been sent, and
// how many it acknowledged at once (the fast endpoints').
const receiverCode = `
  let n = 0, again = 0, fast = 0;
  const seen = new Set();
  const ms = Number(process.env.RECEIVER_MS || 0);
  const slowBelow = process.env.SLOW_ENDPOINTS ? Number(process.env.SLOW_ENDPOINTS) : Infinity;
  const s = require('node:http').createServer((req, res) => {
    if (req.method === 'GET') return res.end(n + ' ' + again + ' ' + fast);
    req.resume().on('end', () => {
      const id = req.url + ' ' + req.headers['webhook-id'];
      if (seen.has(id)) again++; else seen.add(id);
      const slow = ms > 0 && Number(req.url.slice(1)) < slowBelow;
      const answer = () => { n++; if (!slow) fast++; res.writeHead(204).end(); };
      if (slow) setTimeout(answer, ms); else answer();
    });
  });
  s.keepAliveTimeout = 60_000;
  s.listen(0, '127.0.0.1', () => console.log(s.address().port));
  process.on('SIGTERM', () => process.exit(0));`;

async function webhooksScenario(engine: string, say: (l: string) => void): Promise<void> {
  const log = (m: string) =>
    console.error(`[${new Date().toISOString().slice(11, 19)}] ${engine} webhooks: ${m}`);
  const receiver = spawn(
    PIN ? 'taskset' : process.execPath,
    [...(PIN ? ['-c', LOAD_CORE, process.execPath] : []), '-e', receiverCode],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        RECEIVER_MS: opt['receiver-ms'],
        ...(opt['slow-endpoints'] === undefined ? {} : { SLOW_ENDPOINTS: opt['slow-endpoints'] }),
      },
    },
  );
  children.add(receiver);
  let out = '';
  receiver.stdout!.on('data', (d) => (out += d));
  while (!out.includes('\n')) await sleep(20);
  const receiverUrl = `http://127.0.0.1:${out.trim()}`;
  const counts = async () =>
    (await (await fetch(receiverUrl)).text()).split(' ').map(Number) as [number, number, number];
  const acknowledged = async () => (await counts())[0];
  const endpoints = Number(opt.endpoints);
  const env = { ...process.env, WEBHOOK_ALLOW_PRIVATE: 'true' };

  /** A fresh store and `serve --no-webhook-delivery` on core 0, with `hooks` endpoints of user `bench`. */
  const target = async (name: string, hooks: number) => {
    const store = await freshStore(engine, name);
    cli(store.url, 'migrate');
    const token = cli(store.url, 'token', 'create', '--user', 'bench');
    const server = await startServe(store.url, ['--no-webhook-delivery'], env);
    for (let i = 0; i < hooks; i++) {
      const r = await call(server.base, 'POST', '/webhooks', token, { url: `${receiverUrl}/${i}` });
      if (r.status !== 201) throw new Error(`POST /webhooks: ${r.status} ${r.text}`);
    }
    return { store, token, server };
  };
  const deliver = (url: string, core: string) =>
    spawnPinned(
      core,
      [
        process.execPath,
        BIN,
        'deliver',
        '--database',
        url,
        '--log-level',
        'warn',
        ...(opt['deliver-durability'] ? ['--durability', opt['deliver-durability']] : []),
      ],
      env,
    );
  const load = (base: string, token: string, seconds: number) => {
    const r = JSON.parse(
      execFileSync(
        process.execPath,
        [
          join(ROOT, LOADER),
          JSON.stringify({
            urls: [base],
            connections: 50,
            duration: seconds,
            method: 'POST',
            path: '/plants',
            body: { name: 'Benchmark fern', tag: 'bench' },
            token,
          }),
        ],
        { encoding: 'utf8' },
      )
        .trim()
        .split('\n')
        .pop()!,
    );
    return r as { rps: number; p50: number; p99: number; non2xx: number; errors: number };
  };

  const rows: string[] = [];
  const rounds = Number(opt.rounds);
  const seconds = Number(opt.duration);
  try {
    // The three servers (and the deliverer) are started once and measured in turn, rounds
    // interleaved (the order reversed every other round); the ones not measured are stopped
    // (SIGSTOP), so each runs on core 0 alone and a drift of the machine favours none.
    const targets: {
      name: string;
      hooks: number;
      t: Awaited<ReturnType<typeof target>>;
      d: ChildProcess | null;
      runs: { rps: number; p50: number; p99: number; bad: number }[];
      cpu: number;
      dcpu: number;
      delivered: number;
      ms: number;
    }[] = [];
    const signal = (x: (typeof targets)[number], sig: NodeJS.Signals) => {
      x.t.server.child.kill(sig);
      x.d?.kill(sig);
    };
    try {
      for (const [name, hooks, withDeliver] of DRAIN_ONLY
        ? []
        : ([
            ['0 endpoints', 0, false],
            [`${endpoints} endpoints, no deliver process (delivery off)`, endpoints, false],
            [`${endpoints} endpoints, a deliver process on core ${LOAD_CORE} (delivery on)`, endpoints, true],
          ] as const)) {
        const t = await target(`hooks${hooks}${withDeliver ? 'd' : ''}`, hooks);
        const d = withDeliver ? deliver(t.store.url, LOAD_CORE) : null;
        const x = { name, hooks, t, d, runs: [], cpu: 0, dcpu: 0, delivered: 0, ms: 0 };
        targets.push(x);
        load(t.server.base, t.token, 2); // warm-up
        signal(x, 'SIGSTOP');
      }
      for (let round = 0; round < (DRAIN_ONLY ? 0 : rounds); round++) {
        for (const x of round % 2 ? [...targets].reverse() : targets) {
          signal(x, 'SIGCONT');
          const ack0 = await acknowledged();
          const cpu0 = cpuMs(x.t.server.pid);
          const dcpu0 = x.d ? cpuMs(x.d.pid!) : 0;
          const at0 = performance.now();
          const r = load(x.t.server.base, x.t.token, seconds);
          const elapsed = performance.now() - at0;
          x.cpu += cpuMs(x.t.server.pid) - cpu0;
          if (x.d) x.dcpu += cpuMs(x.d.pid!) - dcpu0;
          x.delivered += (await acknowledged()) - ack0;
          x.ms += elapsed;
          signal(x, 'SIGSTOP');
          x.runs.push({ rps: r.rps, p50: r.p50, p99: r.p99, bad: r.non2xx + r.errors });
          log(`round ${round + 1}, ${x.name}: ${r.rps.toFixed(0)} creates/s`);
        }
      }
    } finally {
      for (const x of targets) {
        if (x.d) await stop(x.d);
        await stop(x.t.server.child);
        await x.t.store.drop();
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const base = targets[0]?.runs ?? [];
    for (const x of targets) {
      const rps = median(x.runs.map((r) => r.rps));
      const ratios = x.runs.map((r, i) => r.rps / base[i]!.rps);
      rows.push(
        `| ${x.name} | ${rps.toFixed(0)} | ${median(ratios).toFixed(2)}${rounds > 1 ? ` (${ratios.map((q) => q.toFixed(2)).join(', ')})` : ''} | ${median(x.runs.map((r) => r.p50)).toFixed(1)} ms / ${median(x.runs.map((r) => r.p99)).toFixed(1)} ms | ${x.runs.reduce((n, r) => n + r.bad, 0)} | ${pct(x.cpu / x.ms)} | ${x.d ? `${((x.delivered * 1000) / x.ms).toFixed(0)} (deliver CPU ${pct(x.dcpu / x.ms)})` : '–'} |`,
      );
    }

    // The backlog: made with no deliverer running, then one deliver process alone on core 0.
    const backlog = Number(opt.backlog);
    const creates = Math.ceil(backlog / endpoints);
    log(`backlog: ${creates} creates × ${endpoints} endpoints`);
    const t = await target('backlog', endpoints);
    let drainRow: string;
    try {
      let bad = 0;
      await pool(
        Array.from({ length: creates }, (_, k) => k),
        50,
        async (k) => {
          const r = await call(t.server.base, 'POST', '/plants', t.token, { name: `backlog ${k}` });
          if (r.status !== 201) bad++;
        },
      );
      await stop(t.server.child);
      const want = (creates - bad) * endpoints;
      const [ack0, again0, fast0] = await counts();
      // With --slow-endpoints, the drain ends once the fast endpoints have all of theirs.
      const slowCount =
        opt['slow-endpoints'] === undefined || Number(opt['receiver-ms']) <= 0
          ? null
          : Math.min(endpoints, Number(opt['slow-endpoints']));
      const fastWant = slowCount === null ? 0 : (creates - bad) * (endpoints - slowCount);
      let fastGot = 0;
      let d: ChildProcess | undefined;
      let at0 = 0;
      let got = 0;
      let firstAt = Number.NaN;
      let dcpu = 0;
      const drain = async () => {
        d = deliver(t.store.url, SERVER_CORE);
        at0 = performance.now();
        while (performance.now() - at0 < Number(opt['drain-limit']) * 1000) {
          await sleep(100);
          const [ack, , fast] = await counts();
          got = ack - ack0;
          fastGot = fast - fast0;
          if (got > 0 && Number.isNaN(firstAt)) firstAt = performance.now();
          if (got >= want || (slowCount !== null && fastGot >= fastWant)) break;
        }
        dcpu = cpuMs(d.pid!) / (performance.now() - at0);
      };
      // PostgreSQL's own CPU over the same window: where the time goes when the deliver process waits.
      const pgCpu = t.store.db === null ? null : await pgCpuDuring(t.store.db, drain);
      if (pgCpu === null) await drain();
      const seconds = (performance.now() - at0) / 1000;
      const again = (await counts())[1] - again0;
      if (d) await stop(d);
      const pgPart =
        pgCpu === null || pgCpu.dbMs === null
          ? ''
          : `, PostgreSQL CPU ${pct(pgCpu.dbMs / (seconds * 1000))} of a core (the bench database's backends${
              pgCpu.allMs === null
                ? ''
                : `; every postgres process of the machine, other work included: ${pct(pgCpu.allMs / (seconds * 1000))}`
            })`;
      const mixed =
        slowCount === null
          ? ''
          : ` The ${endpoints - slowCount} endpoints that answer at once had ${fastGot.toLocaleString('en')} of their ${fastWant.toLocaleString('en')} (${(fastGot / seconds).toFixed(0)}/s); the ${slowCount} answering after ${opt['receiver-ms']} ms had ${(got - fastGot).toLocaleString('en')} (${((got - fastGot) / seconds).toFixed(1)}/s).`;
      drainRow = `Backlog: ${want.toLocaleString('en')} deliveries (${(creates - bad).toLocaleString('en')} creates × ${endpoints} endpoints, made with no deliverer running); one \`deliver\` process started alone on core ${SERVER_CORE} (the server stopped), the receiver on core ${LOAD_CORE}${Number(opt['receiver-ms']) > 0 ? `, answering each after ${opt['receiver-ms']} ms${slowCount === null ? '' : ` (${slowCount} of the endpoints; the others at once)`}` : ''}: ${got.toLocaleString('en')} acknowledged in ${seconds.toFixed(1)} s${got < want ? (slowCount !== null && fastGot >= fastWant ? ' (stopped once the fast endpoints had all of theirs)' : ` (stopped at the ${opt['drain-limit']} s limit)`) : ''} — **${(got / seconds).toFixed(0)} deliveries/s** (first acknowledged ${((firstAt - at0) / 1000).toFixed(1)} s after the start; ${again.toLocaleString('en')} of them an event sent to its endpoint before), deliver CPU ${pct(dcpu)}${pgPart}; load average ${loadavg()[0]!.toFixed(2)}. Target: ≥ 5,000/s.${mixed}`;
    } finally {
      await stop(t.server.child);
      await t.store.drop();
    }

    if (DRAIN_ONLY) {
      say(`**Webhooks drain, ${engine === 'sqlite' ? 'SQLite' : 'PostgreSQL'}** (${machine})`);
      say('');
      say(drainRow);
      say('');
      return;
    }
    say(
      `**Webhooks, ${engine === 'sqlite' ? 'SQLite' : 'PostgreSQL'}** (${machine}; ${LOAD_NAME} and the receiver on core ${LOAD_CORE}; POST /plants, 50 connections, ${opt.rounds} rounds × ${opt.duration} s after a 2 s warm-up, interleaved, each server alone on its core while measured; medians, ratios the median of the per-round ratios (each round's in brackets); each row on a fresh store)`,
    );
    say('');
    say(
      '| creates | req/s | × 0 endpoints (target ≥ 0.90 with delivery on) | p50 / p99 | non-2xx | server CPU | deliveries/s acknowledged meanwhile |',
    );
    say('|---|---:|---:|---|---:|---:|---|');
    for (const r of rows) say(r);
    say('');
    say(drainRow);
    say('');
  } finally {
    receiver.kill('SIGTERM');
  }
}

// ---- main ---------------------------------------------------------------------------------------

const marker = (name: string) => (opt.label ? `${name}-${opt.label}` : name);

try {
  for (const engine of ENGINES) {
    if (opt.only === undefined || opt.only === 'streams') {
      const { say, lines } = printed();
      for (const n of engine === 'postgres' ? SIZES.filter((s) => s >= 2) : SIZES)
        await streamsScenario(engine, n, say);
      if (opt.write)
        writeSection(
          join(ROOT, 'docs/benchmarks.md'),
          marker(`events-streams-${engine}`),
          lines.join('\n').trim(),
        );
    }
    if (opt.only !== 'streams') {
      const { say, lines } = printed();
      await webhooksScenario(engine, say);
      if (opt.write)
        writeSection(
          join(ROOT, 'docs/benchmarks.md'),
          marker(`events-${DRAIN_ONLY ? 'drain' : 'webhooks'}-${engine}`),
          lines.join('\n').trim(),
        );
    }
  }
} finally {
  for (const c of children) c.kill('SIGKILL');
  for (const c of cleanups.splice(0)) await c().catch(() => {});
  rmSync(tmp, { recursive: true, force: true });
}
