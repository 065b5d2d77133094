/**
 * How the cost of each operation grows with the size of the store (issue 57): for each size N
 * (100,000, 1,000,000, 10,000,000 plants by default) and each engine, a store of N plants over
 * 10,000 users and 20,000 gardens is built through the service's own batch path, then every
 * operation is measured against it.
 *
 * The store. Users u0 … u9999, each with a home garden, and 10,000 shared gardens S0 … S9999: Sk is
 * owned by uk, and u(k+1), u(k+2) are its editors — every user is in 4 gardens. u0 (the caller in
 * 20 gardens) is besides an editor of S1 … S16. Each user imports its N/10,000 plants
 * (1,000 at 10,000,000) in one `POST /plants/batch` of NDJSON (each line's `garden` one of its 4
 * gardens in turn, names from bench/plant-names.ts), the users in a fixed shuffled order, `--in-flight`
 * requests at a time, against a server started for the build; the build time is that server's
 * (requests made to the answer of the last one). The server is then left to go quiet (SQLite merges
 * its search index once writes stop) and stopped; its store is measured on disk (SQLite: the file
 * and its WAL after a checkpoint; PostgreSQL: pg_database_size after VACUUM ANALYZE).
 *
 * The measurements, on a fresh server per size, all pinned to core 0 (wrk on core 1, through
 * bench/wrk.mjs), the sizes side by side (each operation on each size in turn, the other servers
 * stopped with SIGSTOP meanwhile), started with `--list-cache 0` so that every page is read from
 * the store (a page answered from the list cache costs the same at any size). The caller in 4 gardens (u5000, seeing 2.5 × N/10,000
 * plants): first page, a deep page (a cursor after a random one of its plants, a different one
 * each request), read one (a random plant of its own), create (POST /plants), delete (each plant
 * the create made, once), search with one term (`mon`) and with two (`mon del`); the caller in 20
 * gardens (u0, 14.5 × N/10,000 plants): first page and a deep page. `--rounds` rounds of
 * `--duration` seconds each, the order reversed every other round, medians; req/s, p50/p99 and the
 * server's CPU µs per request (utime + stime from /proc; on PostgreSQL its backends' too). Then the
 * export of every plant by an admin token (plants/s, server CPU µs/plant), and the server's peak
 * RSS (VmHWM) after the operations and after the export.
 *
 *   npm run bench -- --size 100000,1000000,10000000 [--engine sqlite,postgres] [--rounds 2]
 *        [--duration 5] [--connections 50] [--in-flight 4] [--pg URL] [--keep] [--write]
 *
 * --keep leaves the SQLite stores (under .tmp/, reused by the next run) and the PostgreSQL
 * databases; --write puts the table into docs/benchmarks.md ("How cost grows with size").
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { gardenId } from '../src/gardens/id.js';
import { createToken } from '../src/identity/tokens.js';
import { encodeCursor } from '../src/plants/cursor.js';
import { openStore } from '../src/store/index.js';
import type { Store } from '../src/store/store.js';
import { makePlant, prng } from './plant-names.js';
import { BENCH_PG, benchServe, freePort, runPinned, waitReady } from './ports.js';
import { cpuTicks, TICK_US } from './procs.js';
import { median, writeSection } from './report.js';

// `--size N,N` (bench/run.ts passes the sizes on without the flag: a positional argument).
const { values: opt, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    size: { type: 'string', default: '100000,1000000,10000000' },
    engine: { type: 'string', default: 'sqlite,postgres' },
    rounds: { type: 'string', default: '2' },
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    'in-flight': { type: 'string', default: '4' },
    pg: { type: 'string', default: BENCH_PG },
    keep: { type: 'boolean', default: false },
    write: { type: 'boolean', default: false },
  },
});
const SIZES = (positionals[0] ?? opt.size!).split(',').map(Number);
if (SIZES.some((n) => !Number.isInteger(n))) throw new Error('--size: whole numbers, comma-separated');
const ENGINES = opt.engine!.split(',') as ('sqlite' | 'postgres')[];
for (const e of ENGINES)
  if (e !== 'sqlite' && e !== 'postgres') throw new Error('--engine: sqlite, postgres');
const ROUNDS = Number(opt.rounds);
const DURATION = Number(opt.duration);
const CONNECTIONS = Number(opt.connections);
const IN_FLIGHT = Number(opt['in-flight']);
const ROOT = join(import.meta.dirname, '..');
const PIN = availableParallelism() >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;
const USERS = 10_000;
/** The caller in 4 gardens, and the one in 20. */
const CALLER4 = 5000;
const CALLER20 = 0;
const EXTRA = 16;
const user = (u: number) => `u${u}`;
const n0 = (x: number) => Math.round(x).toLocaleString('en-US');

// This process (the build's client, the readers) on core 1, beside the load generator.
if (PIN) spawnSync('taskset', ['-a', '-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });

// ---------------------------------------------------------------------------------------------
// Processes.

const children = new Set<ChildProcess>();
const cleanups: (() => Promise<void>)[] = [];

function statusMb(pid: number, field: string): number {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(new RegExp(`${field}:\\s+([0-9]+) kB`).exec(s)?.[1]) / 1024;
  } catch {
    return Number.NaN;
  }
}

class Server {
  constructor(
    readonly url: string,
    readonly child: ChildProcess,
    readonly pgDb: string | null,
  ) {}
  get pid(): number {
    return this.child.pid!;
  }
  /** CPU ticks of the server and (PostgreSQL) of the database's backends. */
  async cpu(): Promise<{ server: number; backends: Map<number, number> }> {
    const backends = new Map<number, number>();
    if (this.pgDb !== null) {
      const c = new pg.Client({ connectionString: opt.pg });
      await c.connect();
      // Client backends only: an autovacuum worker on the database (after a round of creates and
      // deletes) is not the request's work.
      const r = await c.query(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
        [this.pgDb],
      );
      await c.end();
      for (const { pid } of r.rows) backends.set(Number(pid), cpuTicks(Number(pid)));
    }
    return { server: cpuTicks(this.pid), backends };
  }
  static used(a: Awaited<ReturnType<Server['cpu']>>, b: Awaited<ReturnType<Server['cpu']>>) {
    let backends = 0;
    for (const [pid, t] of b.backends) backends += t - (a.backends.get(pid) ?? 0);
    return { server: (b.server - a.server) * TICK_US, backends: backends * TICK_US };
  }
  /** Waits until the server has been quiet (under 2 ticks in 500 ms) or `ms` passed. */
  async idle(ms = 60_000): Promise<void> {
    const deadline = Date.now() + ms;
    let before = cpuTicks(this.pid);
    while (Date.now() < deadline) {
      await sleep(500);
      const after = cpuTicks(this.pid);
      if (after - before < 2) return;
      before = after;
    }
  }
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    await new Promise((r) => this.child.once('exit', r));
  }
}

async function startServer(database: string, pgDb: string | null, pin: boolean, flags: string[] = []) {
  const port = await freePort();
  const args = [...benchServe(ROOT, port, database), ...flags];
  // Unpinned: every core (this process is on core 1 alone, and a child would inherit that).
  const cores = pin ? '0' : `0-${cpus().length - 1}`;
  const [cmd, ...rest] = PIN ? ['taskset', '-c', cores, ...args] : args;
  const child = spawn(cmd!, rest, { stdio: 'inherit' });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/readyz');
  const server = new Server(url, child, pgDb);
  cleanups.unshift(() => server.stop());
  return server;
}

// ---------------------------------------------------------------------------------------------
// The store: gardens, memberships and tokens in-process; the plants through the served batch path.

interface Layout {
  /** Each user's token. */
  tokens: string[];
  admin: string;
  /** Each user's 4 gardens: home, its own shared one, the two it edits. */
  gardens: string[][];
}

/** `n` async jobs, `width` at a time. */
async function pool(n: number, width: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await job(next++);
    }),
  );
}

async function makeLayout(store: Store, width: number): Promise<Layout> {
  const at = new Date();
  const homes: string[] = new Array(USERS);
  const shared: string[] = new Array(USERS);
  const tokens: string[] = new Array(USERS);
  await pool(USERS, width, async (u) => {
    homes[u] = (await store.homeGarden(user(u), { id: gardenId(randomBytes), name: 'Home', at })).id;
    const made = await store.createGarden({
      id: gardenId(randomBytes),
      name: `Shared ${u}`,
      owner: user(u),
      at,
    });
    if ('refused' in made) throw new Error(`createGarden: ${made.refused}`);
    shared[u] = made.ok.id;
    tokens[u] = (
      await createToken(store, {
        user: user(u),
        scopes: ['plants:read', 'plants:write'],
        name: 'size bench',
        expiresInMs: null,
      })
    ).secret;
  });
  const editors: [number, number][] = [];
  for (let k = 0; k < USERS; k++) editors.push([k, (k + 1) % USERS], [k, (k + 2) % USERS]);
  for (let k = 1; k <= EXTRA; k++) editors.push([k, CALLER20]);
  await pool(editors.length, width, async (i) => {
    const [k, u] = editors[i]!;
    const r = await store.putMember(shared[k]!, null, user(u), 'editor', at);
    if ('refused' in r) throw new Error(`putMember: ${r.refused}`);
  });
  const admin = (
    await createToken(store, {
      user: 'admin',
      scopes: ['plants:admin'],
      name: 'size bench',
      expiresInMs: null,
    })
  ).secret;
  const gardens = Array.from({ length: USERS }, (_, u) => [
    homes[u]!,
    shared[u]!,
    shared[(u + USERS - 1) % USERS]!,
    shared[(u + USERS - 2) % USERS]!,
  ]);
  return { tokens, admin, gardens };
}

/** The users in a fixed shuffled order: one user's import is contiguous in ids, its neighbours' not. */
function userOrder(): number[] {
  const rand = prng(57);
  const order = Array.from({ length: USERS }, (_, u) => u);
  for (let k = order.length - 1; k > 0; k--) {
    const j = Math.floor(rand() * (k + 1));
    [order[k], order[j]] = [order[j]!, order[k]!];
  }
  return order;
}

interface Built {
  seconds: number;
  serverCpuS: number;
  backendsCpuS: number | null;
  settleSeconds: number;
}

/** Every user's plants through `POST /plants/batch` (NDJSON), IN_FLIGHT requests at a time. */
async function fill(server: Server, layout: Layout, plants: number): Promise<Built> {
  const per = Math.floor(plants / USERS);
  if (per < 1 || per > 1000) throw new Error('--size: from 10,000 to 10,000,000 plants (1 … 1000 a user)');
  const order = userOrder();
  const a = await server.cpu();
  const start = performance.now();
  let done = 0;
  let last = start;
  await pool(USERS, IN_FLIGHT, async (k) => {
    const u = order[k]!;
    const rand = prng(1_000_003 + u);
    const g = layout.gardens[u]!;
    const lines: string[] = [];
    for (let i = 0; i < per; i++) {
      const { name, tag } = makePlant(rand);
      lines.push(JSON.stringify({ name, tag, garden: g[i % 4] }));
    }
    const res = await fetch(`${server.url}/plants/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${layout.tokens[u]}`, 'content-type': 'application/x-ndjson' },
      body: `${lines.join('\n')}\n`,
    });
    const text = await res.text();
    if (res.status !== 201) throw new Error(`batch of ${user(u)}: ${res.status} ${text.slice(0, 300)}`);
    done += per;
    if (performance.now() - last > 15_000) {
      last = performance.now();
      const rate = done / ((last - start) / 1000);
      process.stderr.write(
        `  ${n0(done)} plants, ${n0(rate)}/s, server RSS ${statusMb(server.pid, 'VmRSS').toFixed(0)} MB\n`,
      );
    }
  });
  const seconds = (performance.now() - start) / 1000;
  const b = await server.cpu();
  const used = Server.used(a, b);
  const s = performance.now();
  // What the server does once writes are quiet (SQLite: merging the search index) before it is stopped.
  await server.idle(15 * 60_000);
  return {
    seconds,
    serverCpuS: used.server / 1e6,
    backendsCpuS: server.pgDb === null ? null : used.backends / 1e6,
    settleSeconds: (performance.now() - s) / 1000,
  };
}

// ---------------------------------------------------------------------------------------------
// Measuring.

interface Load {
  rps: number;
  p50: number;
  p99: number;
  total: number;
  non2xx: number;
  errors: number;
}
interface Measured extends Load {
  cpuUs: number;
  pgCpuUs: number | null;
}

async function wrk(server: Server, spec: Record<string, unknown>): Promise<Measured> {
  await server.idle(30_000);
  const a = await server.cpu();
  const r = await runPinned<Load>(join(ROOT, 'bench/wrk.mjs'), [JSON.stringify(spec)], PIN, 'wrk');
  const b = await server.cpu();
  const used = Server.used(a, b);
  return {
    ...r,
    cpuUs: used.server / Math.max(1, r.total),
    pgCpuUs: server.pgDb === null ? null : used.backends / Math.max(1, r.total),
  };
}

/** Every id a caller sees, paging through the list (1,000 a page). */
async function visibleIds(server: Server, token: string): Promise<number[]> {
  const ids: number[] = [];
  let cursor: string | null = null;
  do {
    const res: Response = await fetch(
      `${server.url}/plants?limit=1000&include=id${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
      { headers: { authorization: `Bearer ${token}` } },
    );
    if (res.status !== 200) throw new Error(`list: ${res.status}`);
    for (const p of (await res.json()) as { id: number }[]) ids.push(p.id);
    const link: string | null = res.headers.get('link');
    const m: RegExpExecArray | null =
      link === null ? null : /[?&]cursor=([^&>]+)[^>]*>;\s*rel="next"/.exec(link);
    cursor = m ? decodeURIComponent(m[1]!) : null;
  } while (cursor !== null);
  return ids;
}

/** Deep-page paths: a cursor after each of the caller's plants but the last 20, shuffled. */
function deepPaths(who: string, ids: number[]): string[] {
  const at = ids.slice(0, Math.max(1, ids.length - 20));
  const rand = prng(20261126);
  for (let k = at.length - 1; k > 0; k--) {
    const j = Math.floor(rand() * (k + 1));
    [at[k], at[j]] = [at[j]!, at[k]!];
  }
  return at.map((id) => `/plants?limit=20&cursor=${encodeCursor(id, who, null, null)}`);
}

interface OpResult {
  op: string;
  r: Measured;
}

interface OpSpec {
  op: string;
  spec: (duration: number) => Record<string, unknown>;
  /** The delete of what this op created, each plant once. */
  undo?: () => Record<string, unknown>;
}

/** One size's operations on its server: their wrk specs, checked to answer 200 first. */
async function prepareOps(
  server: Server,
  layout: Layout,
  dir: string,
): Promise<{ ops: OpSpec[]; seen: number[]; answered: number[] }> {
  const t4 = layout.tokens[CALLER4]!;
  const t20 = layout.tokens[CALLER20]!;
  const ids4 = await visibleIds(server, t4);
  const ids20 = await visibleIds(server, t20);
  const file = (name: string, paths: (string | number)[]) => {
    const f = join(dir, name);
    writeFileSync(f, JSON.stringify(paths));
    return f;
  };
  const deep4 = file('deep4.json', deepPaths(user(CALLER4), ids4));
  const deep20 = file('deep20.json', deepPaths(user(CALLER20), ids20));
  const reads = file('reads.json', ids4);
  const base = { urls: [server.url], connections: CONNECTIONS, method: 'GET' };
  const get = (path: string, token: string, idsFile?: string) => (duration: number) => ({
    ...base,
    duration,
    path,
    token,
    ...(idsFile === undefined ? {} : { idsFile, rotation: 'all' }),
  });
  const created = join(dir, 'created.json');
  const ops: OpSpec[] = [
    { op: 'first page (4 gardens)', spec: get('/plants?limit=20', t4) },
    { op: 'deep page (4 gardens)', spec: get('{id}', t4, deep4) },
    { op: 'first page (20 gardens)', spec: get('/plants?limit=20', t20) },
    { op: 'deep page (20 gardens)', spec: get('{id}', t20, deep20) },
    { op: 'read one', spec: get('/plants/{id}', t4, reads) },
    { op: 'search, one term (mon)', spec: get('/plants?limit=20&q=mon', t4) },
    {
      op: 'search, two terms (mon del)',
      spec: get(`/plants?limit=20&q=${encodeURIComponent('mon del')}`, t4),
    },
    {
      op: 'create',
      spec: (duration) => ({
        ...base,
        duration,
        method: 'POST',
        path: '/plants',
        // A name no measured search matches: the rows a create round leaves behind (deleted, but
        // still in the indexes until they are cleaned up) are not in the searches' way.
        body: { name: 'Benchmark fern', tag: 'bench' },
        token: t4,
        idsOut: created,
      }),
      undo: () => ({
        ...base,
        method: 'DELETE',
        path: '/plants/{id}',
        token: t4,
        idsFile: created,
        eachOnce: true,
      }),
    },
  ];
  // Every path answers before it is measured. How many plants each search's page answers is kept:
  // a page of one plant and a page of 20 are not the same work.
  const answered: number[] = [];
  for (const o of ops.slice(0, 7)) {
    const s = o.spec(1) as { path: string; token: string; idsFile?: string };
    const first = s.idsFile === undefined ? '' : String(JSON.parse(readFileSync(s.idsFile, 'utf8'))[0]);
    const p = s.path.replace('{id}', first);
    const res = await fetch(`${server.url}${p}`, { headers: { authorization: `Bearer ${s.token}` } });
    if (res.status !== 200) throw new Error(`${o.op}: ${p} answered ${res.status}`);
    const page = (await res.json()) as unknown[];
    if (o.op.startsWith('search')) answered.push(page.length);
  }
  return { ops, seen: [ids4.length, ids20.length], answered };
}

/**
 * PostgreSQL: what autovacuum would do after a round of creates and deletes, with its default
 * thresholds: VACUUM ANALYZE plants once its dead rows pass 50 + 20 % of its rows. A PostgreSQL
 * run with `autovacuum = off` (this machine's, for its CI: /etc/postgresql/15/main/conf.d) would
 * otherwise keep every deleted plant in the caller's gardens' index, and the next round's searches
 * and pages read through them (at 100,000 plants, searches 15 times dearer in the second round).
 * At 10,000,000 plants a round's 80,000 dead rows stay under the threshold, as they would there.
 */
async function autovacuum(server: Server): Promise<void> {
  if (server.pgDb === null) return;
  const url = new URL(opt.pg!);
  url.pathname = `/${server.pgDb}`;
  const c = new pg.Client({ connectionString: url.toString() });
  await c.connect();
  try {
    const { rows } = await c.query<{ dead: string; live: string }>(
      "SELECT n_dead_tup AS dead, greatest(reltuples, 0) AS live FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname = 'plants'",
    );
    const { dead, live } = rows[0] ?? { dead: '0', live: '0' };
    if (Number(dead) > 50 + 0.2 * Number(live)) {
      const t0 = performance.now();
      await c.query('VACUUM (ANALYZE) plants');
      process.stderr.write(
        `    (${n0(Number(dead))} dead plants: VACUUM ANALYZE plants, ${n0(performance.now() - t0)} ms)\n`,
      );
    }
  } finally {
    await c.end();
  }
}

/** Runs `fn` with every server but `one` stopped (SIGSTOP), so that their housekeeping is not measured. */
async function alone<T>(one: Server, all: Server[], fn: () => Promise<T>): Promise<T> {
  const others = all.filter((s) => s !== one);
  for (const s of others) s.child.kill('SIGSTOP');
  try {
    return await fn();
  } finally {
    for (const s of others) s.child.kill('SIGCONT');
  }
}

/**
 * Every size's operations, interleaved: each op on each size in turn (the sizes' order reversed
 * every other time, the ops' every other round), so that the machine's drift (it is shared) falls
 * on every size alike. Medians of ROUNDS runs per size and op.
 */
async function measureAll(
  targets: { label: string; server: Server; ops: OpSpec[] }[],
): Promise<OpResult[][]> {
  const all = targets.map((t) => t.server);
  const runs = targets.map(() => new Map<string, Measured[]>());
  const put = (k: number, op: string, r: Measured) => {
    const m = runs[k]!;
    if (!m.has(op)) m.set(op, []);
    m.get(op)!.push(r);
    const t = targets[k]!;
    process.stderr.write(
      `    ${t.label.padStart(10)} ${op.padEnd(28)} ${n0(r.rps).padStart(6)} req/s  p50 ${r.p50} ms  p99 ${r.p99} ms  CPU ${n0(r.cpuUs)} µs/req${r.pgCpuUs === null ? '' : ` (+ backends ${n0(r.pgCpuUs)})`}  non-2xx ${r.non2xx} errors ${r.errors}  RSS ${statusMb(t.server.pid, 'VmRSS').toFixed(0)} MB\n`,
    );
  };
  const once = async (k: number, o: OpSpec, duration: number, record: boolean) => {
    const t = targets[k]!;
    const r = await alone(t.server, all, () => wrk(t.server, o.spec(duration)));
    if (record) put(k, o.op, r);
    if (o.undo) {
      // Each plant the create made deleted once (the warm-up's too, so that a round's delete deletes its own create's).
      const d = await alone(t.server, all, () => wrk(t.server, o.undo!()));
      if (record) put(k, 'delete', d);
      await alone(t.server, all, () => sweepCreated(t.server, (o.spec(1) as { token: string }).token));
      await autovacuum(t.server);
    }
  };
  const ops = targets[0]!.ops;
  for (let i = 0; i < ops.length; i++)
    for (let k = 0; k < targets.length; k++) await once(k, targets[k]!.ops[i]!, 2, false);
  let flip = false;
  for (let round = 0; round < ROUNDS; round++) {
    const order = ops.map((_, i) => i);
    if (round % 2 === 1) order.reverse();
    for (const i of order) {
      const ks = targets.map((_, k) => k);
      if (flip) ks.reverse();
      flip = !flip;
      for (const k of ks) await once(k, targets[k]!.ops[i]!, DURATION, true);
    }
  }
  const names = [...ops.map((o) => o.op), 'delete'];
  return runs.map((m) =>
    names.map((op) => {
      const rs = m.get(op)!;
      const med = (f: (r: Measured) => number) => median(rs.map(f));
      return {
        op,
        r: {
          rps: med((r) => r.rps),
          p50: med((r) => r.p50),
          p99: med((r) => r.p99),
          total: med((r) => r.total),
          non2xx: rs.reduce((n, r) => n + r.non2xx, 0),
          errors: rs.reduce((n, r) => n + r.errors, 0),
          cpuUs: med((r) => r.cpuUs),
          pgCpuUs: rs[0]!.pgCpuUs === null ? null : med((r) => r.pgCpuUs!),
        },
      };
    }),
  );
}

/**
 * Deletes what a create round made and its undo missed: wrk stops with creates still in flight,
 * which the server makes after wrk has stopped recording ids: without this a kept store would gain
 * some of the caller's plants every round. Its creates are the only plants tagged `bench`.
 */
async function sweepCreated(server: Server, token: string): Promise<void> {
  const headers = { authorization: `Bearer ${token}` };
  for (let pass = 0; ; pass++) {
    if (pass === 10) throw new Error('the creates left are still listed after 10 passes of deletes');
    const res = await fetch(`${server.url}/plants?tag=bench&limit=200&include=id`, { headers });
    if (res.status !== 200) throw new Error(`listing the creates left: ${res.status}`);
    const left = (await res.json()) as { id: number }[];
    if (left.length === 0) return;
    for (const p of left) {
      const del = await fetch(`${server.url}/plants/${p.id}`, { method: 'DELETE', headers });
      if (del.status !== 204 && del.status !== 404) throw new Error(`deleting plant ${p.id}: ${del.status}`);
    }
  }
}

async function exportAll(server: Server, token: string) {
  await server.idle(30_000);
  const a = await server.cpu();
  const got = await runPinned<{ status: number; lines: number; bytes: number; ms: number }>(
    join(ROOT, 'bench/read-export.mjs'),
    [`${server.url}/plants/export`, token],
    PIN,
    'export reader',
  );
  if (got.status !== 200) throw new Error(`export: ${got.status}`);
  const used = Server.used(a, await server.cpu());
  return {
    plants: got.lines,
    seconds: got.ms / 1000,
    cpuUsPerPlant: used.server / Math.max(1, got.lines),
    pgCpuUsPerPlant: server.pgDb === null ? null : used.backends / Math.max(1, got.lines),
  };
}

// ---------------------------------------------------------------------------------------------
// One size on one engine.

interface SizeResult {
  engine: string;
  plants: number;
  built: Built;
  diskMb: number;
  seen: number[];
  /** The plants each search's page answers (one term, two terms). */
  answered: number[];
  ops: OpResult[];
  exp: Awaited<ReturnType<typeof exportAll>>;
  rssOpsMb: number;
  rssExportMb: number;
  load: [number, number];
}

async function pgAdmin<T>(sql: string, values: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: opt.pg });
  await c.connect();
  try {
    return (await c.query(sql, values)).rows as T[];
  } finally {
    await c.end();
  }
}

async function prepareSize(engine: 'sqlite' | 'postgres', plants: number): Promise<Prepared> {
  let database: string;
  let pgDb: string | null = null;
  let sqliteFile: string | null = null;
  let cacheJson = join(ROOT, '.tmp', `size-${plants}-v1.json`);
  let layout: Layout;
  let built: Built;
  if (engine === 'sqlite') {
    mkdirSync(join(ROOT, '.tmp'), { recursive: true });
    sqliteFile = join(ROOT, '.tmp', `size-${plants}-v1.db`);
    database = `sqlite:${sqliteFile}`;
    if (!opt.keep) cleanups.push(async () => rmFiles(sqliteFile!, cacheJson));
  } else {
    // With --keep, a database of a fixed name, reused by the next run with --keep.
    pgDb = opt.keep ? `plantstore_size_${plants}` : `plantstore_size_${plants}_${process.pid}`;
    // Without --keep, a layout file of this run's own: the kept database's is left alone.
    cacheJson = join(
      ROOT,
      '.tmp',
      opt.keep ? `size-pg-${plants}-v1.json` : `size-pg-${plants}-${process.pid}.json`,
    );
    const exists = (await pgAdmin('SELECT 1 FROM pg_database WHERE datname = $1', [pgDb])).length > 0;
    if (!(opt.keep && exists && existsSync(cacheJson))) {
      rmSync(cacheJson, { force: true });
      await pgAdmin(`DROP DATABASE IF EXISTS ${pgDb} WITH (FORCE)`);
      await pgAdmin(`CREATE DATABASE ${pgDb}`);
    }
    if (!opt.keep)
      cleanups.push(async () => {
        rmSync(cacheJson, { force: true });
        await pgAdmin(`DROP DATABASE IF EXISTS ${pgDb} WITH (FORCE)`);
      });
    else process.on('exit', () => console.error(`kept PostgreSQL database ${pgDb}`));
    const url = new URL(opt.pg!);
    url.pathname = `/${pgDb}`;
    database = url.toString();
  }
  if (existsSync(cacheJson) && (sqliteFile === null || existsSync(sqliteFile))) {
    ({ layout, built } = JSON.parse(readFileSync(cacheJson, 'utf8')));
    process.stderr.write(`${engine} ${n0(plants)}: the store kept by the last run with --keep\n`);
  } else {
    if (sqliteFile !== null) rmFiles(sqliteFile, cacheJson);
    const store = await openStore({ url: database, durability: 'normal', poolSize: 4 });
    await store.migrate();
    const t = performance.now();
    layout = await makeLayout(store, engine === 'postgres' ? 4 : 1);
    await store.close();
    process.stderr.write(
      `${engine} ${n0(plants)}: 20,000 gardens, 20,016 memberships, 10,001 tokens in ${((performance.now() - t) / 1000).toFixed(0)} s; filling\n`,
    );
    const server = await startServer(database, pgDb, false);
    built = await fill(server, layout, plants);
    await server.stop();
    mkdirSync(join(ROOT, '.tmp'), { recursive: true });
    writeFileSync(cacheJson, JSON.stringify({ layout, built }));
    process.stderr.write(
      `  built in ${built.seconds.toFixed(0)} s (${n0(plants / built.seconds)} plants/s), server CPU ${built.serverCpuS.toFixed(0)} s, quiet after ${built.settleSeconds.toFixed(0)} s more\n`,
    );
  }
  let diskMb: number;
  if (sqliteFile !== null) {
    const db = new Database(sqliteFile);
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.close();
    const size = (f: string) => (existsSync(f) ? statSync(f).size : 0);
    diskMb = (size(sqliteFile) + size(`${sqliteFile}-wal`)) / 2 ** 20;
  } else {
    const c = new pg.Client({ connectionString: database });
    await c.connect();
    await c.query('VACUUM ANALYZE');
    diskMb = Number((await c.query('SELECT pg_database_size(current_database()) AS b')).rows[0].b) / 2 ** 20;
    await c.end();
  }
  process.stderr.write(`  on disk ${n0(diskMb)} MB\n`);
  return { engine, plants, database, pgDb, layout, built, diskMb };
}

interface Prepared {
  engine: string;
  plants: number;
  database: string;
  pgDb: string | null;
  layout: Layout;
  built: Built;
  diskMb: number;
}

/** Every size of one engine: built (or kept), then measured side by side. */
async function runEngine(engine: 'sqlite' | 'postgres', dir: string): Promise<SizeResult[]> {
  const prepared: Prepared[] = [];
  for (const plants of SIZES) prepared.push(await prepareSize(engine, plants));
  const loadStart = loadavg()[0]!;
  const targets: { label: string; server: Server; ops: OpSpec[] }[] = [];
  const seen: number[][] = [];
  const answered: number[][] = [];
  for (const p of prepared) {
    const server = await startServer(p.database, p.pgDb, PIN, ['--list-cache', '0']);
    const sub = join(dir, `${engine}-${p.plants}`);
    mkdirSync(sub, { recursive: true });
    const { ops, seen: s, answered: a } = await prepareOps(server, p.layout, sub);
    targets.push({ label: n0(p.plants), server, ops });
    seen.push(s);
    answered.push(a);
  }
  process.stderr.write(`${engine}: measuring ${targets.map((t) => t.label).join(', ')} side by side\n`);
  const results = await measureAll(targets);
  const all = targets.map((t) => t.server);
  const out: SizeResult[] = [];
  for (let k = 0; k < targets.length; k++) {
    const { server } = targets[k]!;
    const p = prepared[k]!;
    const rssOpsMb = statusMb(server.pid, 'VmHWM');
    const exp = await alone(server, all, () => exportAll(server, p.layout.admin));
    const rssExportMb = statusMb(server.pid, 'VmHWM');
    process.stderr.write(
      `    export ${n0(exp.plants)} plants in ${exp.seconds.toFixed(1)} s (${n0(exp.plants / exp.seconds)}/s), ${exp.cpuUsPerPlant.toFixed(2)} µs/plant; peak RSS ${rssOpsMb.toFixed(0)} MB, after the export ${rssExportMb.toFixed(0)} MB\n`,
    );
    out.push({
      engine,
      plants: p.plants,
      built: p.built,
      diskMb: p.diskMb,
      seen: seen[k]!,
      answered: answered[k]!,
      ops: results[k]!,
      exp,
      rssOpsMb,
      rssExportMb,
      load: [loadStart, loadavg()[0]!],
    });
  }
  for (const s of all) await s.stop();
  return out;
}

function rmFiles(file: string, json: string) {
  for (const f of [file, `${file}-wal`, `${file}-shm`, json]) rmSync(f, { force: true });
}

// ---------------------------------------------------------------------------------------------
// Reporting.

function table(results: SizeResult[]): string {
  const sizes = results.map((r) => n0(r.plants));
  const head = `| | ${sizes.join(' | ')} |`;
  const rule = `|---|${sizes.map(() => '---:').join('|')}|`;
  const lines = [head, rule];
  const row = (label: string, f: (r: SizeResult) => string) =>
    lines.push(`| ${label} | ${results.map(f).join(' | ')} |`);
  row(
    'build: `POST /plants/batch`, s (plants/s)',
    (r) => `${r.built.seconds.toFixed(0)} s (${n0(r.plants / r.built.seconds)}/s)`,
  );
  row('on disk', (r) => `${n0(r.diskMb)} MB`);
  row('plants the callers see (4 gardens / 20)', (r) => `${n0(r.seen[0]!)} / ${n0(r.seen[1]!)}`);
  row('plants a search page answers (one term / two)', (r) => r.answered.join(' / '));
  const ops = results[0]!.ops.map((o) => o.op);
  const pg = results[0]!.ops[0]!.r.pgCpuUs !== null;
  for (const op of ops) {
    row(`${op}: server CPU µs/req${pg ? ' (+ backends)' : ''}, p50 / p99 ms, req/s`, (r) => {
      const m = r.ops.find((o) => o.op === op)!.r;
      const bad = m.non2xx + m.errors > 0 ? ` **${m.non2xx + m.errors} failed**` : '';
      return `${n0(m.cpuUs)}${m.pgCpuUs === null ? '' : ` (+${n0(m.pgCpuUs)})`} µs, ${+m.p50.toFixed(2)} / ${+m.p99.toFixed(2)}, ${n0(m.rps)}${bad}`;
    });
  }
  row(
    'export of every plant: plants/s, server CPU µs/plant',
    (r) =>
      `${n0(r.exp.plants / r.exp.seconds)}/s, ${r.exp.cpuUsPerPlant.toFixed(2)}${r.exp.pgCpuUsPerPlant === null ? '' : ` (+${r.exp.pgCpuUsPerPlant.toFixed(2)})`}`,
  );
  row(
    'peak RSS (VmHWM) serving the operations / after the export',
    (r) => `${n0(r.rssOpsMb)} / ${n0(r.rssExportMb)} MB`,
  );
  row('load average (1 min) at start → end', (r) => `${r.load[0].toFixed(1)} → ${r.load[1].toFixed(1)}`);
  return lines.join('\n');
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, async () => {
    for (const c of children) c.kill('SIGTERM');
    for (const c of cleanups.splice(0)) await c().catch(() => {});
    process.exit(130);
  });
}

const dir = mkdtempSync(join(tmpdir(), 'plantstore-size-'));
const tree = spawnSync('git', ['rev-parse', '--short', 'HEAD'], {
  cwd: ROOT,
  encoding: 'utf8',
}).stdout.trim();
const sections: string[] = [];
try {
  for (const engine of ENGINES) {
    const results = await runEngine(engine, dir);
    for (const c of cleanups.splice(0)) await c().catch(() => {});
    const env = [
      `${new Date().toISOString().slice(0, 10)}, tree ${tree}`,
      `\`npm run bench -- --size ${SIZES.join(',')} --engine ${engine}\``,
      engine === 'sqlite' ? 'SQLite, durability full' : 'PostgreSQL on the same machine',
      `${cpus().length} vCPUs (${cpus()[0]?.model.trim()}) shared with other work, Node ${process.version}`,
      PIN ? 'server on core 0, wrk on core 1' : 'nothing pinned',
      `wrk, ${CONNECTIONS} connections, ${ROUNDS} rounds × ${DURATION} s after a 2 s warm-up, the sizes side by side (each op on each size in turn, the others stopped), medians; \`--list-cache 0\``,
    ].join('; ');
    const md = `**${engine === 'sqlite' ? 'SQLite' : 'PostgreSQL'}** (${env})\n\n${table(results)}`;
    console.log(`\n${md}\n`);
    sections.push(md);
    if (opt.write) writeSection(join(ROOT, 'docs/benchmarks.md'), `size-${engine}`, md);
  }
} finally {
  for (const c of cleanups.splice(0)) await c().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
