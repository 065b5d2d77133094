/**
 * Search, batch and export at scale (contract section 2, version 4; issue 37's targets), on SQLite
 * and on PostgreSQL:
 *
 * 1. Search. A store of 1,000,000 plants whose names come from a vocabulary of a few hundred plant
 *    words (genera, epithets, cultivars — some accented —, places in the house), 2–6 words a name;
 *    the caller sees 10,000 of them, in 3 gardens (its home, one where it is an editor, one where it
 *    is a viewer), scattered over the whole id range; every other plant is in one of 300 other
 *    users' home gardens. With the server running, autocannon at 50 connections: the plain first
 *    page `GET /plants?limit=20`, `q` with one term (a short, common prefix), `q` with two terms, `q`
 *    with one whole word (longer than SQLite's prefix indexes), and a `q` that matches nothing
 *    (letters only, so that it reaches the store) — rounds × seconds each, interleaved, medians.
 *    Targets: search ≥ 0.5 × the plain list's req/s, p99 ≤ 15 ms, and the no-match query as fast
 *    as the matching ones, judged as served (repeated pages come from the list cache, plain and
 *    search alike); the same runs again on a server started with `--list-cache 0`, where every
 *    page is read from the store, and are reported beside them. On PostgreSQL the script also prints `EXPLAIN (ANALYZE, BUFFERS)` of
 *    each search statement as the server sends it (src/store/postgres/search.ts).
 * 2. Export. `GET /plants/export` (NDJSON) by an admin token (plants:admin): the plants tagged
 *    `indoor` (a quarter of them) on a freshly started server, then every plant (1,000,000) twice on
 *    another fresh server, each read by bench/read-export.mjs in a process of its own (on core 1
 *    when pinning); plants/s (target ≥ 200,000/s) and the server's RSS sampled every 50 ms
 *    (it should stay flat: the export of 1,000,000 should not take more memory than that of 250,000).
 * 3. Batch. `POST /plants/batch` with 1,000-plant JSON bodies from 6 concurrent clients: plants/s
 *    (targets ≥ 50,000/s on SQLite, ≥ 20,000/s on PostgreSQL) and the server's CPU µs per plant.
 *
 *   npx tsx bench/search-bulk.ts                          both engines (PostgreSQL when reachable)
 *   npx tsx bench/search-bulk.ts --engine sqlite          one engine (sqlite or postgres)
 *   npm run bench -- --search-bulk [options]              the same, after a build
 *   options: --plants 1000000 --visible 10000 --rounds 3 --duration 10 --connections 50
 *            --batch-clients 6 --pg URL --rebuild (ignore the cached SQLite store) --keep-db (leave
 *            the PostgreSQL database, to look into) --write (the tables into docs/benchmarks.md,
 *            "Search, batch and export")
 *
 * The plants are loaded in-process through the store's own createPlants (1,000 a call, several
 * calls in flight), gardens and memberships through homeGarden, createGarden and putMember. The
 * SQLite store is built once and kept under .tmp/ (each run works on a copy); PostgreSQL gets a
 * database of its own, loaded, VACUUM ANALYZEd, and dropped at the end.
 *
 * Server CPU is utime + stime of the server process (every thread, the SQLite writer's included)
 * from /proc/PID/stat over each run, divided by what the run did; on PostgreSQL the CPU of the
 * database's own backends (their pids from pg_stat_activity) is given beside it. On SQLite the
 * server is pinned to core 0 and the load generator to core 1 (as bench/run.ts does); on
 * PostgreSQL nothing is pinned: the database needs the cores too.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { gardenId } from '../src/gardens/id.js';
import { createToken } from '../src/identity/tokens.js';
import { searchTerms } from '../src/search-text.js';
import { searchPage } from '../src/store/postgres/search.js';
import { PgStore } from '../src/store/postgres/store.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import type { NewPlant, Store } from '../src/store/store.js';
import { makePlant, matches, prng, QUARTER_TAG } from './plant-names.js';
import { BENCH_PG, benchServe, freePort, runPinned, waitReady } from './ports.js';
import { cpuTicks, TICK_US } from './procs.js';
import { median, writeSection } from './report.js';

const { values: opt } = parseArgs({
  options: {
    engine: { type: 'string', default: 'sqlite,postgres' },
    plants: { type: 'string', default: '1000000' },
    visible: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    'batch-clients': { type: 'string', default: '6' },
    rebuild: { type: 'boolean', default: false },
    'keep-db': { type: 'boolean', default: false },
    write: { type: 'boolean', default: false },
    pg: { type: 'string', default: BENCH_PG },
  },
});
const ENGINES = opt.engine!.split(',');
for (const e of ENGINES)
  if (e !== 'sqlite' && e !== 'postgres') throw new Error('--engine: sqlite, postgres');
const PLANTS = Number(opt.plants);
const VISIBLE = Number(opt.visible);
const ROUNDS = Number(opt.rounds);
const DURATION = Number(opt.duration);
const CONNECTIONS = Number(opt.connections);
const BATCH_CLIENTS = Number(opt['batch-clients']);
const BATCH = 1000;
const ROOT = join(import.meta.dirname, '..');
const CAN_PIN = availableParallelism() >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;
/** Other users, each with a home garden holding its share of the plants the caller does not see. */
const OTHERS = 300;
/** The caller, its 3 gardens' shares of its plants. */
const CALLER = 'searcher';
const SHARES = [0.5, 0.3, 0.2];
/** The search queries measured, besides the plain list. */
const QUERIES = [
  { op: 'q, one term', q: 'mon' },
  { op: 'q, two terms', q: 'mon del' },
  { op: 'q, whole word', q: 'monstera' },
  { op: 'q, no match', q: 'cactus' },
];
const LIST = { op: 'plain list', path: '/plants?limit=20' };
const pathOf = (q: string) => `/plants?limit=20&q=${encodeURIComponent(q)}`;

// ---------------------------------------------------------------------------------------------
// The store.

/** Which of the caller's gardens plant i is in (null: another user's), spread over all the ids. */
function callerGarden(i: number): number | null {
  const stride = Math.floor(PLANTS / VISIBLE);
  if (i % stride !== 0 || i / stride >= VISIBLE) return null;
  const k = (i / stride) % 10;
  return k < SHARES[0]! * 10 ? 0 : k < (SHARES[0]! + SHARES[1]!) * 10 ? 1 : 2;
}

interface Layout {
  /** The caller's gardens: home (owner), editor, viewer. */
  caller: string[];
  others: { user: string; garden: string }[];
}

async function makeGardens(store: Store): Promise<Layout> {
  const at = new Date();
  const others: Layout['others'] = [];
  for (let u = 0; u < OTHERS; u++) {
    const user = `user${u}`;
    const home = await store.homeGarden(user, { id: gardenId(randomBytes), name: 'Home', at });
    others.push({ user, garden: home.id });
  }
  const home = (await store.homeGarden(CALLER, { id: gardenId(randomBytes), name: 'Home', at })).id;
  const shared: string[] = [];
  for (const [k, role] of [
    [1, 'editor'],
    [2, 'viewer'],
  ] as const) {
    const made = await store.createGarden({
      id: gardenId(randomBytes),
      name: `Shared ${k}`,
      owner: `user${k}`,
      at,
    });
    if ('refused' in made) throw new Error(`createGarden: ${made.refused}`);
    const member = await store.putMember(made.ok.id, null, CALLER, role, at);
    if ('refused' in member) throw new Error(`putMember: ${member.refused}`);
    shared.push(made.ok.id);
  }
  return { caller: [home, ...shared], others };
}

/** Loads PLANTS plants through createPlants, BATCH a call, `inFlight` calls at a time. */
async function loadPlants(store: Store, layout: Layout, inFlight: number): Promise<number> {
  const rand = prng(37);
  const start = performance.now();
  let next = 0;
  let lastReport = start;
  const makeBatch = (from: number): NewPlant[] => {
    const out: NewPlant[] = [];
    for (let i = from; i < Math.min(from + BATCH, PLANTS); i++) {
      const g = callerGarden(i);
      const other = layout.others[(i * 7919) % OTHERS]!;
      const { name, tag } = makePlant(rand);
      out.push(
        g === null
          ? { id: null, owner: other.user, garden: other.garden, admin: true, name, tag }
          : {
              id: null,
              owner: g === 0 ? CALLER : `user${g}`,
              garden: layout.caller[g]!,
              admin: true,
              name,
              tag,
            },
      );
    }
    return out;
  };
  async function worker() {
    while (next < PLANTS) {
      const batch = makeBatch(next);
      next += BATCH;
      const r = await store.createPlants(batch);
      if ('refused' in r) throw new Error(`createPlants: ${JSON.stringify(r)}`);
      if (performance.now() - lastReport > 15_000) {
        lastReport = performance.now();
        const rate = Math.round(next / ((lastReport - start) / 1000));
        process.stderr.write(`  loaded ${next} plants, ${rate}/s\n`);
      }
    }
  }
  await Promise.all(Array.from({ length: inFlight }, worker));
  return (performance.now() - start) / 1000;
}

/** The names of the caller's plants, as loaded (the same PRNG): to count what each query matches. */
function callerNames(): string[] {
  const rand = prng(37);
  const names: string[] = [];
  for (let i = 0; i < PLANTS; i++) {
    const { name } = makePlant(rand);
    if (callerGarden(i) !== null) names.push(name);
  }
  return names;
}

interface Tokens {
  caller: string;
  admin: string;
  batcher: string;
}

async function makeTokens(store: Store): Promise<Tokens> {
  const token = async (user: string, scopes: string[]) =>
    (
      await createToken(store, {
        user,
        scopes: scopes as never,
        name: 'search-bulk bench',
        expiresInMs: null,
      })
    ).secret;
  // The batcher writes into a home garden of its own: its plants never show in the caller's searches.
  await store.homeGarden('batcher', { id: gardenId(randomBytes), name: 'Home', at: new Date() });
  return {
    caller: await token(CALLER, ['plants:read', 'plants:write']),
    admin: await token('admin', ['plants:admin']),
    batcher: await token('batcher', ['plants:read', 'plants:write']),
  };
}

/** The SQLite store, built once into .tmp/ and copied into `dir` for this run. */
async function sqliteStore(dir: string): Promise<{ url: string; built: string }> {
  const cached = join(ROOT, '.tmp', `search-bulk-${PLANTS}-${VISIBLE}-v3.db`);
  let built = 'cached under .tmp/';
  if (opt.rebuild || !existsSync(cached)) {
    mkdirSync(join(ROOT, '.tmp'), { recursive: true });
    const building = `${cached}.building`;
    for (const f of [building, `${building}-wal`, `${building}-shm`]) rmSync(f, { force: true });
    const store = new SqliteStore({ path: building, durability: 'normal' });
    await store.migrate();
    const layout = await makeGardens(store);
    const seconds = await loadPlants(store, layout, 4);
    await store.close();
    // The search index merged into one segment, as a server merges it once writes are quiet
    // (src/store/sqlite/search-merge.ts): otherwise every server started on a copy would spend its
    // first seconds merging, on the one core it is pinned to, while being measured. Then everything
    // into the one file, so that it can be copied alone.
    const db = new Database(building);
    db.exec(`INSERT INTO plant_search (plant_search) VALUES ('optimize')`);
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.close();
    built = `built in ${seconds.toFixed(0)} s, ${Math.round(PLANTS / seconds)} plants/s through createPlants`;
    renameSync(building, cached);
  }
  const file = join(dir, 'store.db');
  copyFileSync(cached, file);
  return { url: `sqlite:${file}`, built };
}

async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: opt.pg });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

async function pgVersion(): Promise<string | null> {
  const c = new pg.Client({ connectionString: opt.pg, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    return String((await c.query('SHOW server_version')).rows[0].server_version).split(' ')[0]!;
  } catch {
    return null;
  } finally {
    await c.end().catch(() => {});
  }
}

/** A PostgreSQL database of this run's own, loaded; dropped by the cleanups. */
async function pgStore(): Promise<{ url: string; built: string; db: string }> {
  const db = `plantstore_searchbulk_${process.pid}`;
  await admin(`CREATE DATABASE ${db}`);
  if (opt['keep-db']) process.on('exit', () => console.error(`kept PostgreSQL database ${db}`));
  else cleanups.push(() => admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`));
  const url = new URL(opt.pg!);
  url.pathname = `/${db}`;
  const store = new PgStore({ url: url.toString(), poolSize: 4 });
  await store.migrate();
  const layout = await makeGardens(store);
  const seconds = await loadPlants(store, layout, 4);
  await store.close();
  const v = performance.now();
  const c = new pg.Client({ connectionString: url.toString() });
  await c.connect();
  await c.query('VACUUM ANALYZE');
  await c.end();
  const vacuum = ((performance.now() - v) / 1000).toFixed(0);
  const built = `loaded in ${seconds.toFixed(0)} s, ${Math.round(PLANTS / seconds)} plants/s through createPlants, then VACUUM ANALYZE (${vacuum} s)`;
  return { url: url.toString(), built, db };
}

// ---------------------------------------------------------------------------------------------
// Measuring.

const cleanups: (() => Promise<void>)[] = [];
const children = new Set<ChildProcess>();

/** VmRSS and RssAnon (the heap, malloc: not the mapped binary) of a process, MB. */
function rss(pid: number): { rss: number; anon: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`${field}:\\s+([0-9]+) kB`).exec(status)?.[1]) / 1024;
    return { rss: kb('VmRSS'), anon: kb('RssAnon') };
  } catch {
    return { rss: Number.NaN, anon: Number.NaN };
  }
}

/** The server's V8 heap (committed and used) and external memory, MB, from its /metrics. */
async function heap(url: string): Promise<{ total: number; used: number; external: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const mb = (name: string) =>
    Number(new RegExp(`^plantstore_${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, 'm').exec(text)?.[1]) / 2 ** 20;
  return {
    total: mb('nodejs_heap_size_total_bytes'),
    used: mb('nodejs_heap_size_used_bytes'),
    external: mb('nodejs_external_memory_bytes'),
  };
}

/** CPU ticks of the server and (PostgreSQL) of the database's backends, read together. */
interface Cpu {
  server: number;
  backends: Map<number, number>;
}

class Server {
  constructor(
    readonly url: string,
    readonly child: ChildProcess,
    private readonly pgDb: string | null,
  ) {}
  get onPostgres(): boolean {
    return this.pgDb !== null;
  }
  get pid(): number {
    return this.child.pid!;
  }
  async cpu(): Promise<Cpu> {
    const backends = new Map<number, number>();
    if (this.pgDb !== null) {
      const c = new pg.Client({ connectionString: opt.pg });
      await c.connect();
      const r = await c.query('SELECT pid FROM pg_stat_activity WHERE datname = $1', [this.pgDb]);
      await c.end();
      for (const { pid } of r.rows) backends.set(Number(pid), cpuTicks(Number(pid)));
    }
    return { server: cpuTicks(this.pid), backends };
  }
  /** CPU µs of the server and of the backends between two readings. */
  static used(a: Cpu, b: Cpu): { server: number; backends: number } {
    let backends = 0;
    for (const [pid, t] of b.backends) backends += t - (a.backends.get(pid) ?? 0);
    return { server: (b.server - a.server) * TICK_US, backends: backends * TICK_US };
  }
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    await new Promise((r) => this.child.once('exit', r));
  }
}

async function startServer(
  database: string,
  pin: boolean,
  pgDb: string | null,
  flags: string[] = [],
): Promise<Server> {
  const port = await freePort();
  const args = [...benchServe(ROOT, port, database), ...flags];
  const [cmd, ...rest] = pin ? ['taskset', '-c', '0', ...args] : args;
  const child = spawn(cmd!, rest, { stdio: 'inherit' });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/readyz');
  const server = new Server(url, child, pgDb);
  cleanups.unshift(() => server.stop());
  return server;
}

interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  total: number;
  non2xx: number;
  errors: number;
}

/** One export read to its end by bench/read-export.mjs, in a process of its own (on core 1 when pinning). */
function readExport(
  url: string,
  token: string,
  pin: boolean,
): Promise<{ status: number; lines: number; bytes: number; ms: number }> {
  return runPinned(join(ROOT, 'bench/read-export.mjs'), [url, token], pin, 'export reader');
}

/** One autocannon run (bench/load.mjs) in a process of its own, on core 1 when pinning. */
function autocannon(spec: Record<string, unknown>, pin: boolean): Promise<LoadResult> {
  return runPinned(join(ROOT, 'bench/load.mjs'), [JSON.stringify(spec)], pin, 'load generator');
}

/** Waits until the server has gone quiet after the previous run (a backlog, a checkpoint). */
async function waitIdle(server: Server): Promise<void> {
  const deadline = Date.now() + 30_000;
  let before = cpuTicks(server.pid);
  while (Date.now() < deadline) {
    await sleep(300);
    const after = cpuTicks(server.pid);
    if (after - before < 2) return;
    before = after;
  }
}

interface Measured extends LoadResult {
  /** Server CPU µs per request; the backends' on PostgreSQL (null on SQLite). */
  cpuUs: number;
  pgCpuUs: number | null;
}

async function measured(server: Server, spec: Record<string, unknown>, pin: boolean): Promise<Measured> {
  await waitIdle(server);
  const a = await server.cpu();
  const r = await autocannon(spec, pin);
  const b = await server.cpu();
  const used = Server.used(a, b);
  return {
    ...r,
    cpuUs: used.server / Math.max(1, r.total),
    pgCpuUs: server.onPostgres ? used.backends / Math.max(1, r.total) : null,
  };
}

interface SearchRow {
  op: string;
  path: string;
  matches: number | null;
  r: Measured;
  /** This op's req/s ÷ the plain list's, per round. */
  ratios: number[];
}

async function searchPhase(
  server: Server,
  token: string,
  pin: boolean,
  names: string[],
): Promise<SearchRow[]> {
  const ops = [
    { op: LIST.op, path: LIST.path, matches: null as number | null },
    ...QUERIES.map(({ op, q }) => {
      const terms = searchTerms(q);
      const found = terms === 'none' ? 0 : names.filter((n) => matches(n, terms)).length;
      return { op, path: pathOf(q), matches: found };
    }),
  ];
  // Every answer checked once: a 200 with as many plants as the query should show.
  for (const o of ops) {
    const res = await fetch(`${server.url}${o.path}`, { headers: { authorization: `Bearer ${token}` } });
    const body = (await res.json()) as unknown[];
    const want = Math.min(20, o.matches ?? VISIBLE);
    if (res.status !== 200 || body.length !== want)
      throw new Error(`${o.path}: ${res.status}, ${body.length} plants (expected ${want})`);
  }
  const spec = (path: string, duration: number) => ({
    urls: [server.url],
    connections: CONNECTIONS,
    duration,
    method: 'GET',
    path,
    token,
  });
  for (const o of ops) await measured(server, spec(o.path, 2), pin); // warm-up
  const runs = new Map<string, Measured[]>(ops.map((o) => [o.op, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const o of round % 2 === 0 ? ops : [...ops].reverse()) {
      const r = await measured(server, spec(o.path, DURATION), pin);
      runs.get(o.op)!.push(r);
      process.stderr.write(
        `  round ${round + 1} ${o.op.padEnd(14)} ${r.rps.toFixed(0).padStart(6)} req/s  p50 ${r.p50} ms  p99 ${r.p99} ms  CPU ${r.cpuUs.toFixed(0)} µs/req${r.pgCpuUs === null ? '' : ` (+ backends ${r.pgCpuUs.toFixed(0)})`}  non-2xx ${r.non2xx}\n`,
      );
    }
  }
  const list = runs.get(LIST.op)!;
  return ops.map((o) => {
    const rs = runs.get(o.op)!;
    return {
      op: o.op,
      path: o.path,
      matches: o.matches,
      r: medianOf(rs),
      ratios: rs.map((r, i) => r.rps / list[i]!.rps),
    };
  });
}

function medianOf(rs: Measured[]): Measured {
  const m = (f: (r: Measured) => number) => median(rs.map(f));
  return {
    rps: m((r) => r.rps),
    p50: m((r) => r.p50),
    p99: m((r) => r.p99),
    total: m((r) => r.total),
    non2xx: rs.reduce((n, r) => n + r.non2xx, 0),
    errors: rs.reduce((n, r) => n + r.errors, 0),
    cpuUs: m((r) => r.cpuUs),
    pgCpuUs: rs[0]!.pgCpuUs === null ? null : m((r) => r.pgCpuUs!),
  };
}

interface BatchResult {
  plantsPerSecond: number;
  batches: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  cpuUsPerPlant: number;
  pgCpuUsPerPlant: number | null;
}

async function batchPhase(server: Server, token: string, pin: boolean): Promise<BatchResult> {
  const rand = prng(4242);
  const plants = Array.from({ length: BATCH }, () => makePlant(rand));
  const spec = (duration: number) => ({
    urls: [server.url],
    connections: BATCH_CLIENTS,
    duration,
    method: 'POST',
    path: '/plants/batch',
    body: { plants },
    token,
  });
  await measured(server, spec(2), pin); // warm-up
  const r = await measured(server, spec(DURATION), pin);
  const made = r.total - r.non2xx;
  return {
    plantsPerSecond: r.rps * (made / Math.max(1, r.total)) * BATCH,
    batches: r.total,
    p50: r.p50,
    p99: r.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    cpuUsPerPlant: r.cpuUs / BATCH,
    pgCpuUsPerPlant: r.pgCpuUs === null ? null : r.pgCpuUs / BATCH,
  };
}

interface ExportResult {
  label: string;
  plants: number;
  seconds: number;
  mb: number;
  cpuUsPerPlant: number;
  pgCpuUsPerPlant: number | null;
  before: { rss: number; anon: number };
  peak: { rss: number; anon: number };
  after: { rss: number; anon: number };
  /** The highest RSS sample in each tenth of the export, MB. */
  rssByTenth: number[];
  /** The V8 heap and external memory just before and just after (from /metrics). */
  heapBefore: { total: number; used: number; external: number };
  heapAfter: { total: number; used: number; external: number };
}

async function exportOnce(
  server: Server,
  token: string,
  label: string,
  query: string,
  pin: boolean,
): Promise<ExportResult> {
  await waitIdle(server);
  const heapBefore = await heap(server.url);
  const before = rss(server.pid);
  const samples: { at: number; rss: number; anon: number }[] = [];
  const a = await server.cpu();
  const timer = setInterval(() => samples.push({ at: performance.now(), ...rss(server.pid) }), 50);
  // Read in a process of its own, on core 1 when pinning: read here, the lines were counted on
  // whichever core this process had, the server's included.
  const got = await readExport(`${server.url}/plants/export${query}`, token, pin);
  if (got.status !== 200) throw new Error(`export: ${got.status}`);
  const { lines, bytes } = got;
  const end = performance.now();
  // The child's own span, from its request to the last byte (its start-up left out).
  const start = end - got.ms;
  clearInterval(timer);
  samples.push({ at: end, ...rss(server.pid) });
  const b = await server.cpu();
  const heapAfter = await heap(server.url);
  const used = Server.used(a, b);
  const tenths = Array.from({ length: 10 }, (_, k) => {
    const from = start + ((end - start) * k) / 10;
    const to = start + ((end - start) * (k + 1)) / 10;
    const inIt = samples.filter((s) => s.at >= from && s.at <= to).map((s) => s.rss);
    return inIt.length === 0 ? Number.NaN : Math.max(...inIt);
  });
  const result = {
    label,
    plants: lines,
    seconds: (end - start) / 1000,
    mb: bytes / 1024 / 1024,
    cpuUsPerPlant: used.server / Math.max(1, lines),
    pgCpuUsPerPlant: server.onPostgres ? used.backends / Math.max(1, lines) : null,
    before,
    peak: {
      rss: Math.max(before.rss, ...samples.map((s) => s.rss)),
      anon: Math.max(before.anon, ...samples.map((s) => s.anon)),
    },
    after: rss(server.pid),
    rssByTenth: tenths,
    heapBefore,
    heapAfter,
  };
  process.stderr.write(
    `  ${label}: ${n0(result.plants)} plants in ${result.seconds.toFixed(2)} s (${n0(result.plants / result.seconds)}/s), RSS ${result.before.rss.toFixed(0)} → ${tenths.map((x) => x.toFixed(0)).join(' ')} → ${result.after.rss.toFixed(0)} MB (anon ${result.before.anon.toFixed(0)} → peak ${result.peak.anon.toFixed(0)}), V8 heap ${hp(heapBefore)} → ${hp(heapAfter)}\n`,
  );
  return result;
}

/** The exports, each series on a freshly started server. */
async function exportPhase(
  database: string,
  pin: boolean,
  pgDb: string | null,
  token: string,
): Promise<ExportResult[]> {
  const out: ExportResult[] = [];
  const series: [string, string][][] = [
    [[`tagged ${QUARTER_TAG} (a quarter), fresh server`, `?tag=${QUARTER_TAG}`]],
    [
      ['every plant, fresh server', ''],
      ['every plant, again', ''],
    ],
  ];
  for (const runs of series) {
    const server = await startServer(database, pin, pgDb);
    for (const [label, query] of runs) out.push(await exportOnce(server, token, label, query, pin));
    await server.stop();
  }
  return out;
}

/** EXPLAIN (ANALYZE, BUFFERS) of each search statement as the server sends it for the caller. */
async function explainSearches(url: string): Promise<string> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const gardens = (
      await c.query('SELECT garden_id FROM garden_members WHERE user_id = $1 ORDER BY garden_id', [CALLER])
    ).rows.map((r) => String(r.garden_id));
    const out: string[] = [];
    for (const { op, q } of QUERIES) {
      const terms = searchTerms(q);
      if (terms === 'none') continue;
      const stmt = searchPage({ gardens, tag: null, afterId: 0, limit: 21, terms });
      // Twice: the first reads what the second finds in the cache; the second's plan is given.
      await c.query(`EXPLAIN (ANALYZE, BUFFERS) ${stmt.text}`, stmt.values);
      const r = await c.query(`EXPLAIN (ANALYZE, BUFFERS) ${stmt.text}`, stmt.values);
      out.push(`-- ${op}: q=${q}\n${r.rows.map((x) => x['QUERY PLAN']).join('\n')}`);
    }
    return out.join('\n\n');
  } finally {
    await c.end();
  }
}

// ---------------------------------------------------------------------------------------------
// Reporting.

/** A heap reading: committed (used), external. */
const hp = (h: { total: number; used: number; external: number }) =>
  `${h.total.toFixed(0)} (${h.used.toFixed(0)}) MB, external ${h.external.toFixed(0)} MB`;
const n0 = (x: number) => Math.round(x).toLocaleString('en-US');
const ms = (x: number) => `${+x.toFixed(2)} ms`;
const yes = (ok: boolean) => (ok ? 'yes' : '**no**');

function report(
  engine: string,
  env: string,
  rows: SearchRow[],
  coldRows: SearchRow[],
  batch: BatchResult,
  exports: ExportResult[],
  explain: string | null,
): { markdown: string; allMet: boolean } {
  const pgCol = rows[0]!.r.pgCpuUs !== null;
  const lines = [`**${engine}** (${env})`];
  const table = (title: string, rs: SearchRow[]) => {
    lines.push(
      '',
      title,
      '',
      `| operation | path | matches among the caller's ${n0(VISIBLE)} | req/s | × plain list (per round) | p50 | p99 | server CPU µs/req${pgCol ? ' | PostgreSQL backends CPU µs/req' : ''} | non-2xx |`,
      `|---|---|---:|---:|---|---:|---:|---:|${pgCol ? '---:|' : ''}---:|`,
    );
    for (const row of rs) {
      const ratio = `${median(row.ratios).toFixed(2)} (${row.ratios.map((x) => x.toFixed(2)).join(', ')})`;
      const matched = row.matches === null ? 'all' : n0(row.matches);
      lines.push(
        `| ${row.op} | \`${decodeURIComponent(row.path)}\` | ${matched} | ${n0(row.r.rps)} | ${ratio} | ${ms(row.r.p50)} | ${ms(row.r.p99)} | ${n0(row.r.cpuUs)}${pgCol ? ` | ${n0(row.r.pgCpuUs!)}` : ''} | ${row.r.non2xx + row.r.errors} |`,
      );
    }
  };
  table(
    'As served (the default `--list-cache 16`: a page asked again is answered from the list cache while it is exact):',
    rows,
  );
  table('With `--list-cache 0` (every page, plain or search, read from the store; not judged):', coldRows);
  const coldSearches = coldRows.filter((r) => r.matches !== null);
  const coldWorst = coldSearches.reduce((w, r) => (median(r.ratios) < median(w.ratios) ? r : w));
  const coldP99 = coldSearches.reduce((w, r) => (r.r.p99 > w.r.p99 ? r : w));
  lines.push(
    '',
    `Without the cache the worst search is ${median(coldWorst.ratios).toFixed(2)} × the plain list (${coldWorst.op}, ${n0(coldWorst.r.cpuUs)} µs of server CPU a request), and the worst p99 ${ms(coldP99.r.p99)} (${coldP99.op}).`,
  );
  lines.push(
    '',
    '| export (NDJSON, admin token) | plants | seconds | plants/s | server CPU µs/plant | RSS before → peak → after | of which anonymous, before → peak | V8 heap committed (used), external: before → after |',
    '|---|---:|---:|---:|---:|---|---|---|',
  );
  for (const e of exports) {
    const cpu = `${e.cpuUsPerPlant.toFixed(2)}${e.pgCpuUsPerPlant === null ? '' : ` (+ backends ${e.pgCpuUsPerPlant.toFixed(2)})`}`;
    lines.push(
      `| ${e.label} | ${n0(e.plants)} | ${e.seconds.toFixed(2)} | ${n0(e.plants / e.seconds)} | ${cpu} | ${e.before.rss.toFixed(0)} → ${e.peak.rss.toFixed(0)} → ${e.after.rss.toFixed(0)} MB | ${e.before.anon.toFixed(0)} → ${e.peak.anon.toFixed(0)} MB | ${hp(e.heapBefore)} → ${hp(e.heapAfter)} |`,
    );
  }
  const searches = rows.filter((r) => r.matches !== null);
  const matching = searches.filter((r) => r.matches! > 0);
  const noMatch = searches.find((r) => r.matches === 0)!;
  const worst = searches.reduce((w, r) => (median(r.ratios) < median(w.ratios) ? r : w));
  const worstRatio = median(worst.ratios);
  const worstP99 = searches.reduce((w, r) => (r.r.p99 > w.r.p99 ? r : w));
  const slowest = matching.reduce((w, r) => (r.r.rps < w.r.rps ? r : w));
  const noMatchOk = noMatch.r.rps >= 0.9 * slowest.r.rps;
  const batchTarget = engine === 'SQLite' ? 50_000 : 20_000;
  const quarter = exports[0]!;
  const all = exports.slice(1);
  // Every export is of more than 200,000 plants: the slowest of them is judged.
  const slowestExport = exports.reduce((w, e) => (e.plants / e.seconds < w.plants / w.seconds ? e : w));
  const exRate = slowestExport.plants / slowestExport.seconds;
  const peakAll = all[0]!.peak.rss;
  const flat = peakAll <= 1.1 * quarter.peak.rss;
  lines.push(
    '',
    `Every ${n0(PLANTS)}-plant export's RSS, the highest sample in each tenth of it: ${all.map((e) => `${e.rssByTenth.map((x) => x.toFixed(0)).join(', ')} MB`).join('; then ')}.`,
    '',
    `Batch: \`POST /plants/batch\`, ${BATCH}-plant JSON bodies, ${BATCH_CLIENTS} clients, ${DURATION} s after a 2 s warm-up: ` +
      `**${n0(batch.plantsPerSecond)} plants/s** (${n0(batch.batches)} batches; per batch p50 ${ms(batch.p50)}, p99 ${ms(batch.p99)}; non-2xx ${batch.non2xx}, errors ${batch.errors}); ` +
      `server CPU ${batch.cpuUsPerPlant.toFixed(1)} µs per plant${batch.pgCpuUsPerPlant === null ? '' : `, PostgreSQL backends ${batch.pgCpuUsPerPlant.toFixed(1)} µs per plant`}.`,
    '',
    '| target | measured | met |',
    '|---|---|---|',
    `| search ≥ 0.5 × the plain list's req/s | worst ${worstRatio.toFixed(2)} × (${worst.op}) | ${yes(worstRatio >= 0.5)} |`,
    `| search p99 ≤ 15 ms at ${CONNECTIONS} connections | worst ${ms(worstP99.r.p99)} (${worstP99.op}) | ${yes(worstP99.r.p99 <= 15)} |`,
    `| no match as fast as a match (≥ 0.9 × the slowest matching query's req/s) | ${n0(noMatch.r.rps)} against ${n0(slowest.r.rps)} req/s (${slowest.op}) | ${yes(noMatchOk)} |`,
    `| batch ≥ ${n0(batchTarget)} plants/s | ${n0(batch.plantsPerSecond)} | ${yes(batch.plantsPerSecond >= batchTarget)} |`,
    `| export ≥ 200,000 plants/s, the slowest of the three | ${n0(exRate)} (${slowestExport.label}) | ${yes(exRate >= 200_000)} |`,
    `| export memory flat: peak RSS exporting ${n0(all[0]!.plants)} ≤ 1.1 × exporting ${n0(quarter.plants)}, each on a fresh server | ${peakAll.toFixed(0)} MB against ${quarter.peak.rss.toFixed(0)} MB | ${yes(flat)} |`,
  );
  if (explain !== null)
    lines.push(
      '',
      'The search statements as the server sends them, `EXPLAIN (ANALYZE, BUFFERS)` after the run:',
      '',
      '```text',
      explain,
      '```',
    );
  const allMet =
    worstRatio >= 0.5 &&
    worstP99.r.p99 <= 15 &&
    noMatchOk &&
    batch.plantsPerSecond >= batchTarget &&
    exRate >= 200_000 &&
    flat;
  return { markdown: lines.join('\n'), allMet };
}

// ---------------------------------------------------------------------------------------------

async function runEngine(
  engine: 'sqlite' | 'postgres',
  dir: string,
): Promise<{ markdown: string; allMet: boolean } | null> {
  const started = performance.now();
  const loadBefore = loadavg()[0]!;
  let database: string;
  let built: string;
  let pgDb: string | null = null;
  let version = '';
  if (engine === 'sqlite') {
    ({ url: database, built } = await sqliteStore(dir));
  } else {
    const v = await pgVersion();
    if (v === null) {
      console.log(`PostgreSQL is not reachable at ${opt.pg}: skipped.`);
      return null;
    }
    version = v;
    process.stderr.write(`PostgreSQL ${v}: loading ${PLANTS} plants\n`);
    ({ url: database, built, db: pgDb } = await pgStore());
  }
  process.stderr.write(`${engine}: store ready (${built})\n`);
  const opened =
    engine === 'sqlite'
      ? new SqliteStore({ path: database.slice('sqlite:'.length), durability: 'normal' })
      : new PgStore({ url: database, poolSize: 2 });
  await opened.migrate();
  const tokens = await makeTokens(opened);
  await opened.close();
  const pin = engine === 'sqlite' && CAN_PIN;
  const server = await startServer(database, pin, pgDb);
  const names = callerNames();
  process.stderr.write(`${engine}: search\n`);
  const rows = await searchPhase(server, tokens.caller, pin, names);
  await server.stop();
  // The same with no page kept: what each search costs the store, every time.
  process.stderr.write(`${engine}: search, --list-cache 0\n`);
  const coldServer = await startServer(database, pin, pgDb, ['--list-cache', '0']);
  const coldRows = await searchPhase(coldServer, tokens.caller, pin, names);
  await coldServer.stop();
  const explain = engine === 'postgres' ? await explainSearches(database) : null;
  if (explain !== null) process.stderr.write(`${explain}\n`);
  process.stderr.write(`${engine}: export\n`);
  const exports = await exportPhase(database, pin, pgDb, tokens.admin);
  process.stderr.write(`${engine}: batch\n`);
  const batchServer = await startServer(database, pin, pgDb);
  const batch = await batchPhase(batchServer, tokens.batcher, pin);
  await batchServer.stop();
  process.stderr.write(
    `  ${n0(batch.plantsPerSecond)} plants/s, ${batch.cpuUsPerPlant.toFixed(1)} µs/plant, p99 ${batch.p99} ms\n`,
  );
  const minutes = (performance.now() - started) / 60_000;
  const cpu = cpus()[0]?.model.trim() ?? 'unknown CPU';
  const tree = spawnSync('git', ['rev-parse', '--short', 'HEAD'], {
    cwd: ROOT,
    encoding: 'utf8',
  }).stdout.trim();
  const env = [
    `${new Date().toISOString().slice(0, 10)}, tree ${tree || 'unknown'}`,
    engine === 'postgres' ? `PostgreSQL ${version} on the same machine` : 'durability full',
    `${n0(PLANTS)} plants (store ${built}), the caller in 3 gardens seeing ${n0(VISIBLE)}`,
    `${availableParallelism()} vCPUs (${cpu}) shared with other work, Node ${process.version}`,
    pin ? 'server on core 0, autocannon on core 1' : 'nothing pinned',
    `autocannon, ${CONNECTIONS} connections, ${ROUNDS} rounds × ${DURATION} s interleaved after a 2 s warm-up each, medians`,
    `the engine's whole run took ${minutes.toFixed(1)} min`,
    `load average (1 min) ${loadBefore.toFixed(1)} at its start, ${loadavg()[0]!.toFixed(1)} at its end`,
  ].join('; ');
  const out = report(
    engine === 'sqlite' ? 'SQLite' : 'PostgreSQL',
    env,
    rows,
    coldRows,
    batch,
    exports,
    explain,
  );
  console.log(`\n${out.markdown}\n`);
  if (opt.write) writeSection(join(ROOT, 'docs/benchmarks.md'), `search-bulk-${engine}`, out.markdown);
  return out;
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, async () => {
    for (const c of children) c.kill('SIGTERM');
    for (const c of cleanups.splice(0)) await c().catch(() => {});
    process.exit(130);
  });
}

const dir = mkdtempSync(join(tmpdir(), 'plantstore-search-bulk-'));
try {
  for (const engine of ENGINES as ('sqlite' | 'postgres')[]) {
    const out = await runEngine(engine, dir);
    if (out !== null && !out.allMet) process.exitCode = 1;
    for (const c of cleanups.splice(0)) await c().catch(() => {});
    for (const f of ['store.db', 'store.db-wal', 'store.db-shm']) rmSync(join(dir, f), { force: true });
  }
} finally {
  for (const c of cleanups.splice(0)) await c().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
