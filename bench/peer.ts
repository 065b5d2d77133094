/**
 * plantstore beside a peer a user would pick instead: Platformatic DB (an auto-generated REST API
 * over a SQLite file), on the same machine and workload, with the node:http ceiling
 * (bench/ceiling.mjs) for scale. Three operations: a first page of 20 of the caller's plants, one
 * plant by id, creating one plant. For each target and operation: req/s, the server's CPU µs per
 * request (utime + stime of every thread of its process, /proc/PID/stat) and how busy the load
 * generator's core was.
 *
 *   npx tsx bench/peer.ts [--rounds 3] [--duration 5] [--connections 50] [--write]
 *   npm run bench -- --peer …                     (the same)
 *
 * --write puts the table between docs/benchmarks.md's `peer` markers. The first run installs
 * Platformatic DB (PLATFORMATIC, below) into .tmp/peer/ (git-ignored), outside the project's
 * package.json, with plantstore's own better-sqlite3 (see installPlatformatic).
 *
 * Each server on core 0, wrk (50 connections) on core 1, as in bench/run.ts; the same 100,000
 * plants (seededPlant) in each SQLite file; rounds interleaved across the targets, the idle ones
 * stopped (SIGSTOP) while one is measured, medians reported. What differs between the targets:
 * - plantstore (`bin/plantstore serve`, BENCH_SERVE_FLAGS) verifies a bearer token on every request,
 *   scopes everything to the caller's gardens, and keeps every write durable (WAL, synchronous=FULL).
 * - Platformatic DB runs standalone (`create()` and `start()` of @platformatic/db, one process, no
 *   Watt runtime) with GraphQL and its events (GraphQL subscriptions' feed) off; on: the REST routes,
 *   its OpenAPI document, its root page and its HTTP metrics (a prom-client summary and histogram
 *   per request, its default). It checks no token here (no authorization configured): "the caller's plants"
 *   is an owner filter in the query, and creates name the owner in the body. It sets no SQLite
 *   pragma, so it runs with what the file and its better-sqlite3 build give: the printed
 *   journal_mode and synchronous, read back below.
 * - The ceiling checks that a Bearer token is sent, stores nothing and answers fixed bodies.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { BENCH_SERVE_FLAGS, freePort, runPinned, waitReady } from './ports.js';
import {
  coreBusy,
  coreTimes,
  cpuTicks,
  spawnServer,
  stopAll,
  TICK_US,
  waitIdle,
  withOthersStopped,
} from './procs.js';
import { median, printed, type Result, writeSection } from './report.js';
import { CALLER, seed, seededPlant, USERS } from './seed.js';

/** The Platformatic DB release measured (latest 3.x when written; engines: node >= 22.19). */
const PLATFORMATIC = '3.67.0';
const CACHE = resolve('.tmp/peer');
const PLANTS = 100_000;

const { values: opt } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    write: { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(opt.rounds);
const DURATION = Number(opt.duration);
const CONNECTIONS = Number(opt.connections);
const PIN = availableParallelism() >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;

interface Op {
  method: string;
  path: string;
  body?: unknown;
  /** `{id}` in the path cycles through the target's read ids. */
  reads?: boolean;
}
interface Target {
  name: string;
  url: string;
  token: string;
  readIds: number[];
  ops: Record<OpName, Op>;
  pid: number;
}
const OP_NAMES = ['list limit=20', 'read one', 'create'] as const;
type OpName = (typeof OP_NAMES)[number];
const FERN = { name: 'Benchmark fern', tag: 'bench' };

/** plantstore's requests, which the ceiling answers too. */
const PLANTSTORE_OPS: Record<OpName, Op> = {
  'list limit=20': { method: 'GET', path: '/plants?limit=20' },
  'read one': { method: 'GET', path: '/plants/{id}', reads: true },
  create: { method: 'POST', path: '/plants', body: FERN },
};

// The servers are in process groups of their own (procs.ts spawnServer): pass Ctrl-C on.
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, async () => {
    await stopAll();
    process.exit(130);
  });
}

/**
 * Installs PLATFORMATIC into CACHE unless it is there; the path of its entry point. Its
 * better-sqlite3 is overridden with the version plantstore runs: Platformatic asks for ^12.10, and
 * 12.11.1 aborted the server under creates on Node 24.21 (an assertion in Statement's destructor,
 * node::RemoveEnvironmentCleanupHook, in a run of this benchmark; docs/benchmarks.md). Version 13
 * is built on Node-API with its binaries in the package, so nothing is compiled.
 */
function installPlatformatic(): string {
  const sqlite = JSON.parse(
    readFileSync(resolve('node_modules/better-sqlite3/package.json'), 'utf8'),
  ).version;
  const version = (pkg: string) => {
    const file = join(CACHE, 'node_modules', pkg, 'package.json');
    return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')).version : null;
  };
  if (version('@platformatic/db') !== PLATFORMATIC || version('better-sqlite3') !== sqlite) {
    mkdirSync(CACHE, { recursive: true });
    const manifest = {
      private: true,
      dependencies: { '@platformatic/db': PLATFORMATIC },
      overrides: { 'better-sqlite3': sqlite },
    };
    writeFileSync(join(CACHE, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    // npm runs on this Node (24; the system's may be older).
    const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}` };
    const npm = ['install', '--prefix', CACHE, '--no-audit', '--no-fund'];
    const run = spawnSync('npm', npm, { stdio: 'inherit', env });
    if (run.status !== 0) throw new Error(`npm ${npm.join(' ')} failed`);
  }
  return join(CACHE, 'node_modules/@platformatic/db/index.js');
}

async function startPlantstore(dir: string): Promise<Target> {
  const database = `sqlite:${join(dir, 'plantstore.db')}`;
  const s = await seed(database, PLANTS);
  const port = await freePort();
  const serve = ['bin/plantstore', 'serve', '--port', String(port), '--database', database];
  const pid = spawnServer([process.execPath, ...serve, ...BENCH_SERVE_FLAGS], PIN).pid!;
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/readyz');
  return { name: 'plantstore', url, token: s.token, readIds: s.callerIds, ops: PLANTSTORE_OPS, pid };
}

async function startCeiling(readIds: number[]): Promise<Target> {
  const port = await freePort();
  const pid = spawnServer([process.execPath, 'bench/ceiling.mjs', String(port)], PIN).pid!;
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/healthz');
  return { name: 'node:http ceiling', url, token: 'ceiling', readIds, ops: PLANTSTORE_OPS, pid };
}

/** Platformatic DB on `dir`/plants.sqlite: the same plants, with the same ids (i + 1). */
async function startPlatformatic(dir: string, entry: string): Promise<Target & { sqlite: string }> {
  const file = join(dir, 'plants.sqlite');
  const db = new Database(file);
  // The index serves "the caller's plants, by id", as plantstore's (garden, id, name, tag) one does.
  db.exec(`CREATE TABLE plants (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, tag TEXT);
    CREATE INDEX plants_owner_id ON plants (owner, id);`);
  const insert = db.prepare('INSERT INTO plants (id, owner, name, tag) VALUES (?, ?, ?, ?)');
  db.transaction(() => {
    for (let i = 0; i < PLANTS; i++) {
      const p = seededPlant(i);
      insert.run(i + 1, p.owner, p.name, p.tag);
    }
  })();
  const readIds = db
    .prepare('SELECT id FROM plants WHERE owner = ? ORDER BY id')
    .pluck()
    .all(CALLER) as number[];
  db.close();
  const port = await freePort();
  const config = {
    $schema: `https://schemas.platformatic.dev/@platformatic/db/${PLATFORMATIC}.json`,
    // In a container (/.dockerenv or the like) Platformatic listens on 0.0.0.0 whatever the hostname.
    server: { hostname: '127.0.0.1', port, logger: { level: 'warn' } },
    db: { connectionString: 'sqlite://./plants.sqlite', graphql: false, events: false },
  };
  writeFileSync(join(dir, 'platformatic.json'), JSON.stringify(config, null, 2));
  // @platformatic/db's programmatic start: one process, the application on its main thread.
  const launch = `const { create } = await import(process.argv[1]);
    await (await create(process.argv[2])).start({ listen: true });`;
  const pid = spawnServer(
    [
      process.execPath,
      '--input-type=module',
      '-e',
      launch,
      pathToFileURL(entry).href,
      join(dir, 'platformatic.json'),
    ],
    PIN,
  ).pid!;
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/plants/1');
  return {
    name: `Platformatic DB ${PLATFORMATIC}`,
    url,
    token: '',
    readIds,
    ops: {
      'list limit=20': { method: 'GET', path: `/plants?limit=20&where.owner.eq=${CALLER}&orderby.id=asc` },
      'read one': { method: 'GET', path: '/plants/{id}', reads: true },
      create: { method: 'POST', path: '/plants', body: { owner: CALLER, ...FERN } },
    },
    pid,
    sqlite: file,
  };
}

/** journal_mode of Platformatic's file, and synchronous as its better-sqlite3 opens a connection. */
function platformaticSqlite(file: string): string {
  const probe = `const D = require(process.argv[1]); const db = new D(process.argv[2]);
    console.log(db.pragma('journal_mode', { simple: true }) + ' ' + db.pragma('synchronous', { simple: true }));`;
  const out = spawnSync(process.execPath, ['-e', probe, join(CACHE, 'node_modules/better-sqlite3'), file]);
  const [journal, sync] = String(out.stdout).trim().split(' ');
  const level = ['OFF', 'NORMAL', 'FULL', 'EXTRA'][Number(sync)] ?? `? (${out.stderr})`;
  return `journal_mode=${journal}, synchronous=${level}`;
}

/** One request of each operation: 2xx and the expected shape, or the run stops here. */
async function verify(t: Target): Promise<void> {
  for (const name of OP_NAMES) {
    const op = t.ops[name];
    const res = await fetch(t.url + op.path.replace('{id}', String(t.readIds[0])), {
      method: op.method,
      headers: {
        ...(t.token ? { authorization: `Bearer ${t.token}` } : {}),
        ...(op.body ? { 'content-type': 'application/json' } : {}),
      },
      body: op.body ? JSON.stringify(op.body) : undefined,
    });
    const text = await res.text();
    const body = JSON.parse(text);
    const isPlant = (p: { name?: unknown; owner?: unknown }) =>
      typeof p?.name === 'string' && (p.owner === undefined || p.owner === CALLER);
    const ok =
      name === 'list limit=20'
        ? Array.isArray(body) && body.length === 20 && body.every(isPlant)
        : isPlant(body) && (t.name.includes('ceiling') || name !== 'create' || body.name === FERN.name);
    if (!res.ok || !ok)
      throw new Error(`${t.name} ${name}: unexpected answer ${res.status} ${text.slice(0, 300)}`);
  }
}

/** One wrk run of `op` on `t`, pinned to core 1. */
function load(t: Target, op: Op, duration: number, idsFile: string): Promise<Result> {
  const spec = {
    urls: [t.url],
    connections: CONNECTIONS,
    duration,
    method: op.method,
    path: op.path,
    body: op.body,
    token: t.token,
    ...(op.reads ? { idsFile } : {}),
  };
  return runPinned('bench/wrk.mjs', [JSON.stringify(spec)], PIN, 'load generator');
}

const tmp = mkdtempSync(join(tmpdir(), 'plantstore-peer-'));
try {
  const entry = installPlatformatic();
  const plantstore = await startPlantstore(tmp);
  const platformatic = await startPlatformatic(tmp, entry);
  const ceiling = await startCeiling(plantstore.readIds);
  const targets: Target[] = [ceiling, plantstore, platformatic];
  for (const t of targets) await verify(t);
  const pids = targets.map((t) => t.pid);
  const idsFile = (t: Target) => join(tmp, `${t.pid}.ids.json`);
  for (const t of targets) writeFileSync(idsFile(t), JSON.stringify(t.readIds));

  // Warm-up, not counted: 1 s of every operation on every target (JIT, caches, the files' pages).
  for (const t of targets) {
    for (const name of OP_NAMES) {
      await waitIdle(pids);
      await withOthersStopped(
        pids.filter((p) => p !== t.pid),
        () => load(t, t.ops[name], 1, idsFile(t)),
      );
    }
  }
  // Every round: each operation on each target, the targets' order reversed every other round.
  const samples = new Map<string, Result[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of OP_NAMES) {
      for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
        await waitIdle(pids);
        const ticks = cpuTicks(t.pid);
        const core = coreTimes(1);
        const r = await withOthersStopped(
          pids.filter((p) => p !== t.pid),
          () => load(t, t.ops[name], DURATION, idsFile(t)),
        );
        const after = coreTimes(1);
        r.cpuUs = ((cpuTicks(t.pid) - ticks) * TICK_US) / Math.max(1, r.rps * DURATION);
        r.loaderBusy = coreBusy(core, after);
        process.stderr.write(
          `round ${round + 1} ${t.name.padEnd(22)} ${name.padEnd(14)} ${r.rps.toFixed(0).padStart(6)} req/s ${r.cpuUs.toFixed(0).padStart(5)} µs/req  loader core ${(100 * r.loaderBusy).toFixed(0)} %  non-2xx ${r.non2xx}\n`,
        );
        const key = `${name}\t${t.name}`;
        samples.set(key, [...(samples.get(key) ?? []), r]);
      }
    }
  }

  const out = printed();
  out.say(
    `${new Date().toISOString().slice(0, 10)}, ${availableParallelism()} cores, Node ${process.version}, ` +
      `${PLANTS} plants over ${USERS} owners (the caller owns ${plantstore.readIds.length}), wrk with ${CONNECTIONS} connections, ` +
      `${ROUNDS} round${ROUNDS > 1 ? 's' : ''} × ${DURATION} s, medians; servers pinned to core 0 and wrk to core 1: ${PIN ? 'yes' : 'no'}.`,
  );
  out.say('');
  out.say(
    '| operation | target | req/s | CPU µs/request | load-generator core busy | p99 ms | non-2xx, errors |',
  );
  out.say('|---|---|---:|---:|---:|---:|---:|');
  for (const name of OP_NAMES) {
    for (const t of targets) {
      const rs = samples.get(`${name}\t${t.name}`)!;
      const m = (f: (r: Result) => number) => median(rs.map(f));
      out.say(
        `| ${name} | ${t.name} | ${m((r) => r.rps).toFixed(0)} | ${m((r) => r.cpuUs!).toFixed(0)} | ${(100 * m((r) => r.loaderBusy!)).toFixed(0)} % | ${+m((r) => r.p99).toFixed(2)} | ${rs.reduce((n, r) => n + r.non2xx + r.errors, 0)} |`,
      );
    }
  }
  out.say('');
  out.say(
    `plantstore verifies a bearer token on every request and keeps every write durable (WAL, synchronous=FULL). ` +
      `Platformatic DB ${PLATFORMATIC} checks no token in this setup (the list is filtered by owner in the query, ` +
      `creates name the owner); its SQLite: ${platformaticSqlite(platformatic.sqlite)}; GraphQL and events off, ` +
      `OpenAPI and HTTP metrics on. The ceiling checks that a Bearer token is sent and stores nothing.`,
  );
  if (opt.write) writeSection('docs/benchmarks.md', 'peer', out.lines.join('\n'));
} finally {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
}
