/**
 * The mixed workload: many users, random page sizes and tags, deep pages reached by
 * following real `Link` headers, reads and creates mixed in — against plantstore variants and the
 * node:http ceiling, in interleaved rounds, each server alone on core 0 (the others SIGSTOPped),
 * wrk on core 1. `npm run bench` runs it after the single-operation benchmark.
 *
 *   npx tsx bench/mixed.ts [--users 100] [--per-user 1000] [--rounds 3] [--duration 5]
 *                          [--connections 50] [--mix list:36,deep:24,read:25,create:15 --mix create:100]
 *                          [--variants sqlite,tmpfs,sharing,endpoints,traced,postgres] [--tmpfs /dev/shm] [--share 20] [--profile DIR]
 *                          [--disk-probe 10] [--base DIR] [--fixed-rate 0.5] [--same-rate 4000]
 *
 * Variants, each a `bin/plantstore serve` on a store of its own holding the same plants (events
 * always on, SQLite with full durability):
 *   sqlite     the default, its file on the disk the other stores live on (os.tmpdir())
 *   tmpfs      the same, its file (and WAL) on a tmpfs (/dev/shm, or --tmpfs DIR): the same code and
 *              the same durability setting, so every `fsync` still happens but costs nothing — the
 *              difference between the two is the disk's, and what tmpfs leaves is the code's own
 *   sharing    SQLite with sharing on (contract 3.2): every user's home garden is shared with the
 *              next --share − 1 users as editors, so each user is a member of --share gardens and
 *              its lists (first and deep pages) merge that many gardens' plants; the requests
 *              are the same (deep pages from the unshared lists' Link headers: the same ids,
 *              deeper in a shared list)
 *   endpoints  SQLite with webhook endpoints: one of an admin (every event) and one for each of
 *              ten users, delivering to a receiver on core 1
 *   traced     SQLite with traces on (contract 14.1), every request sampled, exported over OTLP
 *              http/protobuf to a receiver on core 1
 *   automerge  SQLite (on the disk) with its search index merged by FTS5's automerge inside the
 *              commits (PLANTSTORE_SEARCH_MERGE=automerge), not in the writer's paced steps
 *   tmpfs-automerge  the same on the tmpfs
 *   saver      SQLite with V8's --memory-saver-mode (PLANTSTORE_MEMORY_SAVER=on), to weigh its cost
 *   inline     SQLite with its writes committed on the event loop (PLANTSTORE_SQLITE_WRITER=inline)
 *   postgres   PostgreSQL, one instance (--pg URL; skipped, and said so, when unreachable), its
 *              server not pinned: it shares both cores with PostgreSQL's processes (and wrk's)
 *   postgres-nice  the same with V8's worker threads at nice 10 (PLANTSTORE_GC_NICE=10), which
 *              `serve` sets by itself only on one core
 *
 * Classes: `list` a first page (limit 10–100, half of them with one of 20 tags), `deep` a later
 * page (a path taken from a real `Link` header, 1–8 pages in), `read` one of the user's plants,
 * `create` a plant. Every request carries its user's token. Per-class latency comes from
 * bench/mixed.lua (each request's X-Request-Id carries its class and send time): as each response
 * was timed, with the longest one. The p50 and p99 columns are wrk's own, which it corrects for
 * coordinated omission (a response slower than the average adds samples for the requests the
 * connection did not send meanwhile), so one long stall weighs on them far more than on the
 * per-class figures.
 *
 * Beside each variant's CPU per thread, stderr says how much of the run its event loop's thread
 * waited for a CPU and how much of core 0 other processes used meanwhile: on a shared machine a
 * stall of that kind is the machine's, not the server's.
 *
 * --trace-gc FILE writes each variant's `--trace-gc` lines to FILE.<variant>, sums up their pauses
 * at the end, and after each fixed-rate run with answers over 25 ms lists on stderr the server's
 * collections within 300 ms of them (set by the wall clock: fixed-rate.mjs says when its counted
 * part began, and the trace counts from about the server's spawn).
 *
 * Before the rounds it times `fsync` on the disk the stores live on (--disk-probe seconds of
 * 12 KB overwrites, a commit's size; 0 leaves it out): a durable create waits for one, so a stall
 * of the disk is a stall of every create in flight.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  copyFileSync,
  fsyncSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { gardenId } from '../src/gardens/id.js';
import { createToken } from '../src/identity/tokens.js';
import { openStore } from '../src/store/index.js';
import { BENCH_PG, BENCH_SERVE_FLAGS, freePort, waitReady } from './ports.js';
import { postgresTicks } from './procs.js';
import { printed, writeSection } from './report.js';

/** What the run prints to stdout, kept to be written into docs/benchmarks.md with --write. */
const { say, lines: report } = printed();

const { values: opt } = parseArgs({
  options: {
    users: { type: 'string', default: '100' },
    'per-user': { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    mix: { type: 'string', multiple: true, default: ['list:36,deep:24,read:25,create:15', 'create:100'] },
    variants: { type: 'string', default: 'sqlite,tmpfs,sharing,endpoints,postgres' },
    // Gardens each user is a member of in the `sharing` variant (its home garden and share − 1 others').
    share: { type: 'string', default: '20' },
    pg: { type: 'string', default: BENCH_PG },
    // Writes the first variant's CPU profile (--cpu-prof) into this folder.
    profile: { type: 'string' },
    // Writes each variant's --trace-gc lines to FILE.<variant>, and sums up their pauses at the end.
    'trace-gc': { type: 'string' },
    'disk-probe': { type: 'string', default: '10' },
    // Where the tmpfs variant keeps its store: a directory on a tmpfs.
    tmpfs: { type: 'string', default: '/dev/shm' },
    // A/B in one run: every variant also runs from another plantstore checkout (its bin/plantstore
    // and dist/), named "… (base)", on a copy of the same store (an older checkout's copy has the
    // schema versions it does not know taken off: baseSchema); PostgreSQL's on the same database
    // (so a base that lacks one of this tree's migrations does not start).
    base: { type: 'string' },
    // After the rounds, each variant again at this share of its measured req/s, sent at a fixed
    // rate (bench/fixed-rate.mjs): the latency of each class counted from when its request was due,
    // so a stall shows on every request it held up; then the ceiling at the same rate, and the
    // variant's p99 and p99.9 as ratios to the ceiling's (its worst class, and every request
    // together). 0 leaves it out.
    'fixed-rate': { type: 'string', default: '0.5' },
    // After the rounds, every variant at this same offered rate (req/s; bench/fixed-rate.mjs), each
    // round in turn: the server's CPU per request when each does the same work at the same load,
    // where a saturated run also charges a slower variant for the batching it loses (fewer
    // requests an event-loop turn, fewer creates a commit). 0 leaves it out.
    'same-rate': { type: 'string', default: '0' },
    // Writes the results between docs/benchmarks.md's `mixed` markers (npm run bench passes it).
    write: { type: 'boolean', default: false },
  },
});
const USERS = Number(opt.users);
const PER_USER = Number(opt['per-user']);
const TAGS = 20;
const ROOT = resolve(import.meta.dirname, '..');
const tmp = mkdtempSync(join(tmpdir(), 'plantstore-mixed-'));
const children: ChildProcess[] = [];
/** Each variant's --trace-gc file (FILE.<variant>, a base tree's with `-base`), by variant. */
const gcFiles = new Map<string, string>();
const gcFile = (name: string, root: string) => {
  const key = `${name.replace(/[^a-z0-9]+/gi, '-')}${root === ROOT ? '' : '-base'}`;
  const file = `${opt['trace-gc']}.${key}`;
  gcFiles.set(key, file);
  return file;
};
/** When each server was spawned (ms since the epoch): its --trace-gc times count from about then. */
const spawnedAt = new Map<ChildProcess, { at: number; file: string }>();
/**
 * The server's collections (from its --trace-gc file, every isolate of it: the main thread's and
 * its workers') within 300 ms of [from, to] (ms into the run counted from `origin`, the wall
 * clock's ms since the epoch) that paused 1 ms or more or took a marking step of 2 ms or more: each
 * with its time in the run, its pause and its largest incremental marking step. The trace counts
 * from the isolate's start, some tens of ms after the spawn: the times are that close.
 */
function gcsNear(child: ChildProcess, origin: number, from: number, to: number): string[] {
  const s = spawnedAt.get(child);
  if (!s) return [];
  const out: [number, string][] = [];
  for (const line of readFileSync(s.file, 'utf8').split('\n')) {
    const m = /^\[\d+:(0x[0-9a-f]+)\]\s+(\d+) ms: (\S+(?: \(\w+\))?) .*? MB, ([0-9.]+) \//.exec(line);
    if (!m) continue;
    const at = s.at + Number(m[2]) - origin;
    const step = Number(/biggest step ([0-9.]+) ms/.exec(line)?.[1] ?? 0);
    if (at < from - 300 || at > to + 300 || (Number(m[4]) < 1 && step < 2)) continue;
    out.push([
      at,
      `${m[3]} (isolate ${m[1]}) at ${at.toFixed(0)} ms, pause ${m[4]} ms${step ? `, marking step up to ${step} ms` : ''}`,
    ]);
  }
  return out.sort((x, y) => x[0] - y[0]).map((x) => x[1]);
}
const onTmpfs: string[] = [];
process.on('exit', () => {
  for (const c of children) {
    c.kill('SIGCONT');
    c.kill('SIGKILL');
  }
  rmSync(tmp, { recursive: true, force: true });
  for (const dir of onTmpfs) rmSync(dir, { recursive: true, force: true });
});

/** A new directory on the tmpfs at --tmpfs; throws if that is not a tmpfs. */
function tmpfsDir(): string {
  const type = execFileSync('stat', ['-f', '-c', '%T', opt.tmpfs!], { encoding: 'utf8' }).trim();
  if (type !== 'tmpfs') throw new Error(`--tmpfs ${opt.tmpfs} is a ${type}, not a tmpfs`);
  const dir = mkdtempSync(join(opt.tmpfs!, 'plantstore-mixed-'));
  onTmpfs.push(dir);
  return dir;
}

// A deterministic generator, so that every run draws the same pool.
let state = 20261122;
const rand = () => {
  state = (state * 1103515245 + 12345) % 2 ** 31;
  return state / 2 ** 31;
};
const tagOf = (i: number) => (i % 2 === 0 ? `tag-${(i >> 1) % TAGS}` : null);

// The store: USERS × PER_USER plants, ids interleaved across users as real traffic makes them.
const dbPath = join(tmp, 'plants.db');
const store = await openStore({ url: `sqlite:${dbPath}`, durability: 'full', poolSize: 1 });
await store.migrate();
const tokens: string[] = [];
for (let u = 0; u < USERS; u++) {
  tokens.push(
    (
      await createToken(store, {
        user: `user-${u}`,
        scopes: ['plants:read', 'plants:write'],
        name: null,
        expiresInMs: null,
      })
    ).secret,
  );
}
const adminToken = (
  await createToken(store, { user: 'bench-admin', scopes: ['plants:admin'], name: null, expiresInMs: null })
).secret;
const tokenRecords = await store.pageTokens({ user: null, before: null, limit: 1_000_000 });
// Every user's home garden (contract 3.2), where its plants go; the PostgreSQL copy gets the same ids.
const seededAt = new Date();
const homes: string[] = [];
for (let u = 0; u < USERS; u++) {
  homes.push(
    (await store.homeGarden(`user-${u}`, { id: gardenId(randomBytes), name: 'Home', at: seededAt })).id,
  );
}
await store.close();
{
  const db = new Database(dbPath);
  const insert = db.prepare('INSERT INTO plants (owner, garden, name, tag) VALUES (?, ?, ?, ?)');
  db.transaction(() => {
    for (let i = 0; i < USERS * PER_USER; i++)
      insert.run(`user-${i % USERS}`, homes[i % USERS], `plant ${i}`, tagOf(Math.floor(i / USERS)));
  })();
  db.close();
}
console.error(`seeded ${USERS} users × ${PER_USER} plants`);

/** How long `fsync` of a commit-sized overwrite takes in `dir`, for `seconds`. */
function diskProbe(dir: string, label: string, seconds: number): void {
  const file = join(dir, 'fsync-probe');
  const fd = openSync(file, 'w+');
  const size = 12 * 1024;
  const slots = 1000;
  try {
    // Written and synced once first, so that the timed writes overwrite (as a reused WAL does).
    writeSync(fd, Buffer.alloc(size * slots));
    fsyncSync(fd);
    const page = Buffer.alloc(size, 1);
    const ms: number[] = [];
    for (const end = performance.now() + seconds * 1000; performance.now() < end; ) {
      const t0 = performance.now();
      writeSync(fd, page, 0, size, (ms.length % slots) * size);
      fsyncSync(fd);
      ms.push(performance.now() - t0);
    }
    ms.sort((a, b) => a - b);
    const at = (p: number) => ms[Math.min(ms.length - 1, Math.floor((ms.length * p) / 100))]!.toFixed(2);
    const over = (limit: number) => ms.filter((x) => x > limit).length;
    say(
      `${label}: ${ms.length} fsyncs of a 12 KB overwrite in ${seconds} s: p50 ${at(50)}, p99 ${at(99)}, p99.9 ${at(99.9)}, longest ${ms.at(-1)!.toFixed(0)} ms; ${over(10)} over 10 ms, ${over(100)} over 100 ms\n`,
    );
  } finally {
    closeSync(fd);
    rmSync(file, { force: true });
  }
}
const wanted = opt.variants!.split(',').map((v) => v.trim());
const unknown = wanted.filter(
  (v) =>
    ![
      'sqlite',
      'tmpfs',
      'automerge',
      'tmpfs-automerge',
      'saver',
      'sharing',
      'endpoints',
      'inline',
      'traced',
      'postgres',
      'postgres-nice',
    ].includes(v),
);
if (unknown.length) throw new Error(`unknown --variants ${unknown.join(', ')}`);
const memoryDir = wanted.includes('tmpfs') || wanted.includes('tmpfs-automerge') ? tmpfsDir() : null;
if (Number(opt['disk-probe']) > 0) {
  diskProbe(tmp, `disk (${tmp})`, Number(opt['disk-probe']));
  if (memoryDir) diskProbe(memoryDir, `tmpfs (${memoryDir})`, Math.min(3, Number(opt['disk-probe'])));
}

// The receiver of the endpoints variant's deliveries: a process of its own on core 1 (this script
// blocks while wrk runs, so a receiver in it would answer nothing).
const receiverCode = `
  let n = 0;
  const s = require('node:http').createServer((req, res) => req.resume().on('end', () => { n++; res.writeHead(204).end(); }));
  s.listen(0, '127.0.0.1', () => console.log(s.address().port));
  process.on('SIGTERM', () => { console.log('delivered ' + n); process.exit(0); });`;

interface Server {
  name: string;
  url: string;
  child: ChildProcess;
}

// The SQLite variants run on core 0 alone, as the ceiling does; PostgreSQL's server runs unpinned,
// sharing both cores with PostgreSQL's own processes (which no one pins).
/**
 * Makes the copy of the store at `file` one the tree at `root` serves: a tree older than this one
 * refuses a store whose schema is newer than it knows, though its migrations only add (tables,
 * nullable columns, indexes: docs/operations.md), so the older code runs on the newer tables. The
 * versions it does not know are taken off the copy's schema_migrations; nothing else changes.
 */
function baseSchema(file: string, root: string): void {
  const probe = join(tmp, 'schema-probe.db');
  rmSync(probe, { force: true });
  execFileSync(join(root, 'bin/plantstore'), ['migrate'], {
    env: { ...process.env, DATABASE_URL: `sqlite:${probe}` },
    stdio: 'ignore',
  });
  const known = new Database(probe, { readonly: true });
  const version = known.prepare('SELECT max(version) FROM schema_migrations').pluck().get() as number;
  known.close();
  const db = new Database(file);
  db.prepare('DELETE FROM schema_migrations WHERE version > ?').run(version);
  db.close();
}

async function serve(
  name: string,
  database: string,
  env: Record<string, string>,
  first = false,
  cores = '0',
  root = ROOT,
) {
  const profile = first ? opt.profile : undefined;
  const traceGc = opt['trace-gc'] ? gcFile(name, root) : undefined;
  const port = await freePort();
  const child = spawn(
    'taskset',
    [
      '-c',
      cores,
      process.execPath,
      ...(profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(profile)}`] : []),
      ...(traceGc ? ['--trace-gc'] : []),
      join(root, 'bin/plantstore'),
      'serve',
      '--port',
      String(port),
      ...BENCH_SERVE_FLAGS,
    ],
    {
      env: { ...process.env, ...env, DATABASE_URL: database },
      stdio: ['ignore', traceGc ? openSync(traceGc, 'w') : 'inherit', 'inherit'],
    },
  );
  children.push(child);
  if (traceGc) spawnedAt.set(child, { at: Date.now(), file: traceGc });
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/readyz');
  return { name: root === ROOT ? name : `${name} (base)`, url, child };
}

/** A PostgreSQL database of its own holding the same tokens and plants (same ids) as the file. */
async function postgresCopy(): Promise<string | null> {
  const admin = new pg.Client({ connectionString: opt.pg });
  try {
    await admin.connect();
  } catch (err) {
    console.error(`postgres variant skipped: ${opt.pg} unreachable (${(err as Error).message})`);
    return null;
  }
  const name = `plantstore_mixed_${process.pid}`;
  await admin.query(`DROP DATABASE IF EXISTS ${name}`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(opt.pg!);
  url.pathname = `/${name}`;
  dropPg = async () => {
    const c = new pg.Client({ connectionString: opt.pg });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.end();
  };
  const pgStore = await openStore({ url: url.toString(), durability: 'full', poolSize: 1 });
  await pgStore.migrate();
  for (const t of tokenRecords) await pgStore.insertToken(t);
  for (let u = 0; u < USERS; u++) {
    const made = await pgStore.homeGarden(`user-${u}`, { id: homes[u]!, name: 'Home', at: seededAt });
    if (made.id !== homes[u]) throw new Error(`user-${u}'s home garden came back as ${made.id}`);
  }
  await pgStore.close();
  const c = new pg.Client({ connectionString: url.toString() });
  await c.connect();
  await c.query(
    `INSERT INTO plants (id, owner, garden, name, tag)
     SELECT nextval('plants_id_seq'), 'user-' || (g % $2), ($4::text[])[g % $2 + 1], 'plant ' || g,
            CASE WHEN (g / $2) % 2 = 0 THEN 'tag-' || ((g / $2 / 2) % $3) END
     FROM generate_series(0, $1 - 1) g`,
    [USERS * PER_USER, USERS, TAGS, homes],
  );
  await c.query('ANALYZE plants');
  await c.end();
  return url.toString();
}
let dropPg = async () => {};
let pgUrl: string | null | undefined;

const SHARE = Number(opt.share);
/** Sharing on: each user's home garden shared with the next SHARE − 1 users, as editors (through the Store). */
async function share(url: string): Promise<void> {
  if (!(SHARE >= 1 && SHARE <= Math.min(USERS, 100)))
    throw new Error(`--share must be 1 … ${Math.min(USERS, 100)}`);
  const s = await openStore({ url, durability: 'normal', poolSize: 1 });
  await s.migrate();
  for (let u = 0; u < USERS; u++) {
    for (let k = 1; k < SHARE; k++) {
      const r = await s.putMember(homes[u]!, null, `user-${(u + k) % USERS}`, 'editor', seededAt);
      if ('refused' in r) throw new Error(`putMember: ${r.refused}`);
    }
  }
  await s.close();
  console.error(`sharing: every user a member of ${SHARE} gardens`);
}

const servers: Server[] = [];
let receiver: ChildProcess | undefined;
let receiverOut = '';
for (const v of wanted) {
  const file = join(v === 'tmpfs' || v === 'tmpfs-automerge' ? memoryDir! : tmp, `${v}.db`);
  if (v !== 'postgres') copyFileSync(dbPath, file);
  const first = servers.length === 0;
  if (v === 'sqlite') servers.push(await serve('sqlite', `sqlite:${file}`, {}, first));
  if (v === 'tmpfs') servers.push(await serve('sqlite on tmpfs', `sqlite:${file}`, {}, first));
  // The search index merged by FTS5's automerge inside the commits, not by the writer's paced steps.
  const automerge = { PLANTSTORE_SEARCH_MERGE: 'automerge' };
  if (v === 'automerge')
    servers.push(await serve('sqlite, FTS5 automerge', `sqlite:${file}`, automerge, first));
  if (v === 'tmpfs-automerge')
    servers.push(await serve('sqlite on tmpfs, FTS5 automerge', `sqlite:${file}`, automerge, first));
  if (v === 'saver') {
    servers.push(
      await serve('sqlite, memory saver on', `sqlite:${file}`, { PLANTSTORE_MEMORY_SAVER: 'on' }, first),
    );
  }
  if (opt.base && (v === 'sqlite' || v === 'tmpfs')) {
    const copy = file.replace(/\.db$/, '-base.db');
    copyFileSync(dbPath, copy);
    baseSchema(copy, resolve(opt.base));
    const name = v === 'sqlite' ? 'sqlite' : 'sqlite on tmpfs';
    servers.push(await serve(name, `sqlite:${copy}`, {}, false, '0', resolve(opt.base)));
  }
  if (v === 'sharing') {
    await share(`sqlite:${file}`);
    servers.push(await serve(`sqlite, sharing (${SHARE} gardens each)`, `sqlite:${file}`, {}, first));
  }
  if (v === 'inline') {
    servers.push(
      await serve('sqlite, writes inline', `sqlite:${file}`, { PLANTSTORE_SQLITE_WRITER: 'inline' }, first),
    );
  }
  if (v === 'traced') {
    // Traces on, every request sampled, sent with the real OTLP exporter (http/protobuf) to a
    // receiver of spans on core 1 that reads each export and answers 200.
    const sink = spawn(
      'taskset',
      [
        '-c',
        '1',
        process.execPath,
        '-e',
        `const s = require('node:http').createServer((req, res) => req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()));
         s.listen(0, '127.0.0.1', () => console.log(s.address().port));`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(sink);
    let sinkOut = '';
    sink.stdout!.on('data', (d) => (sinkOut += d));
    while (!/\n/.test(sinkOut)) await new Promise((r) => setTimeout(r, 20));
    const env = {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sinkOut.trim()}`,
      OTEL_TRACES_SAMPLER: 'always_on',
    };
    servers.push(await serve('sqlite, traced (every request)', `sqlite:${file}`, env, first));
  }
  if (v === 'postgres') {
    if (pgUrl === undefined) pgUrl = await postgresCopy();
    const url = pgUrl;
    if (url) servers.push(await serve('postgres', url, {}, first, '0,1'));
    // The --base checkout on the same database, migrated by this tree first: the base must know
    // every migration this tree has (a server refuses a schema newer than it knows).
    if (url && opt.base) servers.push(await serve('postgres', url, {}, false, '0,1', resolve(opt.base)));
  }
  if (v === 'postgres-nice') {
    // The same database as the postgres variant's, when both run.
    if (pgUrl === undefined) pgUrl = await postgresCopy();
    const url = pgUrl;
    const nice = { PLANTSTORE_GC_NICE: '10' };
    if (url) servers.push(await serve('postgres, V8 workers at nice 10', url, nice, first, '0,1'));
  }
  if (v === 'endpoints') {
    receiver = spawn('taskset', ['-c', '1', process.execPath, '-e', receiverCode], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(receiver);
    receiver.stdout!.on('data', (d) => (receiverOut += d));
    while (!/\n/.test(receiverOut)) await new Promise((r) => setTimeout(r, 20));
    const hook = `http://127.0.0.1:${receiverOut.trim()}`;
    const server = await serve(
      'sqlite + 11 endpoints',
      `sqlite:${file}`,
      { WEBHOOK_ALLOW_PRIVATE: 'true' },
      first,
    );
    for (const token of [adminToken, ...tokens.slice(0, 10)]) {
      const res = await fetch(`${server.url}/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: hook }),
      });
      if (res.status !== 201) throw new Error(`webhook registration: ${res.status} ${await res.text()}`);
    }
    servers.push(server);
  }
}
if (servers.length === 0) throw new Error('no variant to measure');
const plantstore = servers[0]!.url;
const cport = await freePort();
const ceil = spawn('taskset', ['-c', '0', process.execPath, join(ROOT, 'bench/ceiling.mjs'), String(cport)], {
  stdio: 'inherit',
});
children.push(ceil);
const ceiling = `http://127.0.0.1:${cport}`;
await waitReady(ceiling, '/healthz'); // the ceiling answers any GET

// The pool of real requests, drawn before the run.
const db = new Database(dbPath, { readonly: true });
const idsOf = db.prepare('SELECT id FROM plants WHERE owner = ? ORDER BY random() LIMIT 20').pluck();
const lines: string[] = [];
for (let u = 0; u < USERS; u++) {
  const token = tokens[u]!;
  for (const id of idsOf.all(`user-${u}`) as number[]) lines.push(`read\tGET\t/plants/${id}\t${token}\t`);
  for (let k = 0; k < 10; k++) {
    const limit = 10 + Math.floor(rand() * 91);
    const tag = rand() < 0.5 ? `&tag=tag-${Math.floor(rand() * TAGS)}` : '';
    const first = `/plants?limit=${limit}${tag}`;
    lines.push(`list\tGET\t${first}\t${token}\t`);
    // Deep pages: follow the real Link headers 1–8 pages in.
    let next: string | null = first;
    for (let depth = 0, stop = 1 + Math.floor(rand() * 8); depth < stop && next; depth++) {
      const res: Response = await fetch(`${plantstore}${next}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      await res.arrayBuffer();
      next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1] ?? null;
      if (next) lines.push(`deep\tGET\t${next}\t${token}\t`);
    }
  }
  for (let k = 0; k < 5; k++) {
    const t = rand() < 0.5 ? `,"tag":"tag-${Math.floor(rand() * TAGS)}"` : '';
    lines.push(`create\tPOST\t/plants\t${token}\t{"name":"mixed ${u}-${k}"${t}}`);
  }
}
db.close();
const poolFile = join(tmp, 'pool.tsv');
writeFileSync(poolFile, `${lines.join('\n')}\n`);
console.error(
  `pool: ${lines.length} requests (${lines.filter((l) => l.startsWith('deep')).length} deep pages)`,
);

interface Run {
  /** CPU the server's threads used during the run, as a share of the run's wall time, by thread name. */
  cpu?: Record<string, number>;
  /**
   * While it ran: the share of the run the server's main thread spent ready but waiting for the
   * CPU (run queue), and the share of core 0 that processes other than the server used (another
   * process on the pinned core: a stall that is not the server's).
   */
  waited?: number;
  others?: number;
  rps: number;
  p50: number;
  p99: number;
  /** Per class, as each response was timed (not corrected for coordinated omission). */
  classes: Record<string, { n: number; p50_us: number; p99_us: number; max_us: number }>;
  statuses: Record<string, number>;
}

function wrk(url: string, mix: string, seconds: number): Run {
  const out = execFileSync(
    'taskset',
    [
      '-c',
      '1',
      'wrk',
      '-t1',
      `-c${opt.connections}`,
      `-d${seconds}s`,
      '--timeout',
      '10s',
      '-s',
      join(ROOT, 'bench/mixed.lua'),
      url,
    ],
    { env: { ...process.env, MIXED_POOL: poolFile, MIXED_MIX: mix }, encoding: 'utf8', maxBuffer: 1 << 26 },
  );
  const line = out.split('\n').find((l) => l.startsWith('MIXED '));
  if (!line) throw new Error(`wrk printed no result: ${out}`);
  const r = JSON.parse(line.slice(6));
  if (r.errors > 0) throw new Error(`${url}: ${r.errors} socket errors`);
  return {
    rps: r.requests / (r.duration_us / 1e6),
    p50: r.p50_us / 1000,
    p99: r.p99_us / 1000,
    classes: r.classes,
    statuses: r.statuses,
  };
}

interface Tail {
  n: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
}
interface FixedRun {
  rate: number;
  classes: Record<string, Tail>;
  /** The same over every request of the run, whatever its class. */
  all: Tail;
  statuses: Record<string, number>;
  errors: number;
  lagMaxMs: number;
  /** The slowest answer and when it fell due (ms after the counted part began). */
  slowest: { ms: number; dueAt: number };
  /** Answers over `overMs`: how many, and the span of their due times. */
  slow: { overMs: number; n: number; first: number | null; last: number | null };
  /** When the counted part began, by the wall clock (ms since the epoch). */
  countedFromEpochMs: number;
}

/**
 * The mix sent at `rate` requests/s for --duration seconds (bench/fixed-rate.mjs on core 1) to the
 * server `name` at `url`; a run with errors or an answer other than 200 or 201 stops the bench.
 */
function fixedRate(name: string, url: string, mix: string, rate: number): FixedRun {
  const spec = {
    url,
    pool: poolFile,
    mix,
    rate,
    seconds: Number(opt.duration),
    connections: Number(opt.connections),
  };
  const out = execFileSync(
    'taskset',
    ['-c', '1', process.execPath, join(ROOT, 'bench/fixed-rate.mjs'), JSON.stringify(spec)],
    { encoding: 'utf8', maxBuffer: 1 << 26 },
  );
  const r = JSON.parse(out.trim().split('\n').pop()!) as FixedRun;
  const bad = Object.keys(r.statuses).filter((k) => k !== '200' && k !== '201');
  if (bad.length || r.errors)
    throw new Error(`${name} at ${rate.toFixed(0)} req/s: ${JSON.stringify(r.statuses)}, ${r.errors} errors`);
  return r;
}
const fixedRows: string[] = [];
// Each variant's CPU per request at --same-rate.
const sameRateRows: string[] = [];
// Each variant's p99 and p99.9 at a fixed rate as ratios to the ceiling's at the same rate.
const ratioRows: string[] = [];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** A /proc stat file's process or thread name and its CPU ticks (user + system); null if gone. */
function statTicks(path: string): { name: string; ticks: number } | null {
  try {
    const stat = readFileSync(path, 'utf8');
    // The name sits in parentheses and may hold spaces; utime and stime are fields 14 and 15.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return {
      name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
      ticks: Number(f[11]) + Number(f[12]),
    };
  } catch {
    return null; // it ended meanwhile
  }
}

/** Nanoseconds the main thread (the event loop) of `pid` has spent waiting on a run queue. */
function runQueueNs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]);
}

/** Core 0's busy ticks so far (/proc/stat: user, nice, system, irq, softirq, steal). */
function core0Ticks(): number {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('cpu0 '))!;
  const f = line.split(/\s+/).map(Number);
  return f[1]! + f[2]! + f[3]! + f[6]! + f[7]! + f[8]!;
}

/** CPU ticks of each thread of `pid`, keyed "name/tid". */
function threadTicks(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const t = statTicks(`/proc/${pid}/task/${tid}/stat`);
    if (t) out.set(`${t.name}/${tid}`, t.ticks);
  }
  return out;
}
const TICKS_PER_S = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

/**
 * Per thread name, the share of one core the server's threads used while `fn` ran, and that of
 * PostgreSQL's processes (which share the machine's cores with the server and wrk).
 */
function withCpu<R extends object>(
  pid: number | undefined,
  fn: () => R,
): R & Pick<Run, 'cpu' | 'waited' | 'others'> {
  if (pid === undefined) return fn();
  const before = threadTicks(pid);
  const pgBefore = postgresTicks();
  const waitBefore = runQueueNs(pid);
  const core0Before = core0Ticks();
  const t0 = performance.now();
  const run = fn();
  const seconds = (performance.now() - t0) / 1000;
  const cpu: Record<string, number> = {};
  let ours = 0;
  for (const [key, ticks] of threadTicks(pid)) {
    const name = key.slice(0, key.lastIndexOf('/'));
    const used = (ticks - (before.get(key) ?? 0)) / TICKS_PER_S / seconds;
    ours += used;
    if (used > 0) cpu[name] = (cpu[name] ?? 0) + used;
  }
  const pgUsed = (postgresTicks() - pgBefore) / TICKS_PER_S / seconds;
  if (pgUsed > 0.01) cpu.postgres = pgUsed;
  const waited = (runQueueNs(pid) - waitBefore) / 1e9 / seconds;
  const others = Math.max(0, (core0Ticks() - core0Before) / TICKS_PER_S / seconds - ours);
  return { ...run, cpu, waited, others };
}
const everyone = [...servers.map((s) => s.child), ceil];
/** Runs `fn` with every other server stopped, so that none does housekeeping on the pinned core. */
const measured = <T>(only: ChildProcess, fn: () => T): T => {
  // A moment for the last run's server to finish what wrk left in flight before it is stopped (a
  // server stopped mid-query finds its database timeouts expired when it resumes).
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
  for (const c of everyone) if (c !== only) c.kill('SIGSTOP');
  try {
    return fn();
  } finally {
    for (const c of everyone) if (c !== only) c.kill('SIGCONT');
  }
};

say(
  `${new Date().toISOString().slice(0, 10)}, ${availableParallelism()} cores, Node ${process.version}, ${USERS} users × ${PER_USER} plants, wrk ${opt.connections} connections, ${opt.rounds} rounds × ${opt.duration} s (medians); SQLite servers and the ceiling pinned to core 0, wrk to core 1\n`,
);
say(
  '| workload | server | req/s | ceiling req/s | ratio to the ceiling (per round) | CPU µs/request: server / ceiling | efficiency (ceiling µs ÷ server µs) | p50 | p99 | per class: p50 / p99 / longest (ms) |',
);
say('|---|---|---|---|---|---|---|---|---|---|');
const against: string[] = [];
for (const mix of opt.mix!) {
  const ours = new Map<Server, Run[]>(servers.map((s) => [s, []]));
  const theirs: Run[] = [];
  for (const s of servers) measured(s.child, () => wrk(s.url, mix, 2)); // warm-up
  for (let round = 0; round < Number(opt.rounds); round++) {
    // Each round in another order, the ceiling's place moving too.
    const order: (Server | null)[] = [null, ...servers];
    for (let k = 0; k < round % order.length; k++) order.push(order.shift()!);
    for (const who of order) {
      if (who === null) {
        theirs.push(measured(ceil, () => withCpu(ceil.pid, () => wrk(ceiling, mix, Number(opt.duration)))));
        continue;
      }
      const run = measured(who.child, () =>
        withCpu(who.child.pid, () => wrk(who.url, mix, Number(opt.duration))),
      );
      const bad = Object.entries(run.statuses).filter(([k]) => !/:(200|201)$/.test(k));
      if (bad.length) throw new Error(`${who.name} answered ${JSON.stringify(bad)}`);
      ours.get(who)!.push(run);
    }
    console.error(
      `${mix} round ${round + 1}: ${servers.map((s) => `${s.name} ${ours.get(s)!.at(-1)!.rps.toFixed(0)}`).join(', ')}, ceiling ${theirs.at(-1)!.rps.toFixed(0)} req/s`,
    );
  }
  const crps = median(theirs.map((r) => r.rps));
  // CPU per answer of the server's own process (every thread; PostgreSQL's backends not counted),
  // which does not move with how fast wrk's core is (docs/benchmarks.md, "CPU per request").
  const usPerRequest = (r: Run) =>
    (Object.entries(r.cpu ?? {})
      .filter(([k]) => k !== 'postgres')
      .reduce((n, [, v]) => n + v, 0) *
      1e6) /
    r.rps;
  const ceilingUs = median(theirs.map(usPerRequest));
  for (const s of servers) {
    const runs = ours.get(s)!;
    const rps = median(runs.map((r) => r.rps));
    // The median of the per-round ratios: a server and the ceiling are measured in the same round.
    const ratios = runs.map((r, i) => r.rps / theirs[i]!.rps);
    const classes = Object.keys(runs[0]!.classes).sort();
    const per = classes
      .map(
        (c) =>
          `${c} ${median(runs.map((r) => r.classes[c]!.p50_us / 1000)).toFixed(1)} / ${median(runs.map((r) => r.classes[c]!.p99_us / 1000)).toFixed(1)} / ${Math.max(...runs.map((r) => r.classes[c]!.max_us / 1000)).toFixed(0)}`,
      )
      .join(', ');
    const cpu = new Map<string, number[]>();
    for (const r of runs)
      for (const [k, v] of Object.entries(r.cpu ?? {})) cpu.set(k, [...(cpu.get(k) ?? []), v]);
    const waited = median(runs.map((r) => r.waited ?? 0)).toFixed(2);
    const others = runs.map((r) => r.others ?? 0);
    console.error(
      `${mix} ${s.name} CPU per thread (share of a core, median): ${[...cpu]
        .map(([k, v]) => `${k} ${median(v).toFixed(2)}`)
        .join(
          ', ',
        )}; its event loop waited for a CPU ${waited} of the time; other processes used ${median(others).toFixed(2)} of core 0 (max ${Math.max(...others).toFixed(2)})`,
    );
    const serverUs = median(runs.map(usPerRequest));
    say(
      `| ${mix} | ${s.name} | ${rps.toFixed(0)} | ${crps.toFixed(0)} | ${median(ratios).toFixed(2)} (${ratios.map((x) => x.toFixed(2)).join(', ')}) | ${serverUs.toFixed(1)} / ${ceilingUs.toFixed(1)} | **${(ceilingUs / serverUs).toFixed(2)}** | ${median(runs.map((r) => r.p50)).toFixed(2)} ms | ${median(runs.map((r) => r.p99)).toFixed(2)} ms | ${per} |`,
    );
  }
  const share = Number(opt['fixed-rate']);
  // Each variant, then the ceiling at that same rate (what the generator and the machine add by
  // themselves at it): the variant's p99 and p99.9 as ratios to the ceiling's, class by class (the
  // worst class the stricter figure) and over every request together (issue 57's targets: ≤ 3×
  // and ≤ 5×).
  const rateOf = (s: Server) => share * median(ours.get(s)!.map((r) => r.rps));
  const theCeiling: Server = { name: 'node:http ceiling', url: ceiling, child: ceil };
  const atRate = (s: Server, rate: number): FixedRun => {
    const r = measured(s.child, () => fixedRate(s.name, s.url, mix, rate));
    const tail = (name: string, x: Tail) =>
      `${name} ${x.p50.toFixed(1)} / ${x.p99.toFixed(1)} / ${x.p999.toFixed(1)} / ${x.max.toFixed(0)}`;
    const classes = Object.keys(r.classes).sort();
    const per = [
      ...classes.map((c) => tail(c, r.classes[c]!)),
      ...(classes.length > 1 ? [tail('every request', r.all)] : []),
    ].join(', ');
    fixedRows.push(
      `| ${mix} | ${s.name} | ${rate.toFixed(0)} (${(100 * share).toFixed(0)} %) | ${r.rate.toFixed(0)} | ${per} | ${r.lagMaxMs.toFixed(1)} ms |`,
    );
    // Where in the run a stall was (JSON gives the empty span as null).
    const span =
      r.slow.n > 0 ? `, due ${r.slow.first?.toFixed(0)}–${r.slow.last?.toFixed(0)} ms into the run` : '';
    console.error(
      `${mix} ${s.name} at ${rate.toFixed(0)} req/s: the slowest answer ${r.slowest.ms.toFixed(1)} ms, due ${r.slowest.dueAt.toFixed(0)} ms into the run; ${r.slow.n} over ${r.slow.overMs} ms${span} (the run counted from ${r.countedFromEpochMs.toFixed(0)} ms since the epoch; pid ${s.child.pid})`,
    );
    // With --trace-gc: the server's collections around its slow answers (ms into the run, as above).
    if (r.slow.n > 0 && spawnedAt.has(s.child)) {
      const near = gcsNear(s.child, r.countedFromEpochMs, r.slow.first!, r.slow.last! + r.slowest.ms);
      console.error(
        `  its collections then (from its --trace-gc, ±50 ms; pauses of 1 ms or more, marking steps of 2 or more): ${near.join('; ') || 'none'}`,
      );
    }
    return r;
  };
  for (const s of share > 0 ? servers : []) {
    const rate = rateOf(s);
    const got = atRate(s, rate);
    const base = atRate({ ...theCeiling, name: `node:http ceiling (at ${s.name}'s rate)` }, rate);
    // The variant's figure over the ceiling's (which may lack a class, or answer in under 0.1 ms).
    const over = (a: Tail, b: Tail | undefined, k: 'p99' | 'p999') => a[k] / Math.max(b?.[k] ?? 0, 0.1);
    const worst = (k: 'p99' | 'p999') =>
      Math.max(...Object.keys(got.classes).map((c) => over(got.classes[c]!, base.classes[c], k)));
    const [r99, r999] = [worst('p99'), worst('p999')];
    const [a99, a999] = [over(got.all, base.all, 'p99'), over(got.all, base.all, 'p999')];
    const cell = (r: number, target: number) =>
      `**${r.toFixed(2)}** ${r <= target ? `(≤ ${target}: met)` : `(> ${target})`}`;
    ratioRows.push(
      `| ${mix} | ${s.name} | ${rate.toFixed(0)} | ${cell(r99, 3)} | ${cell(r999, 5)} | ${cell(a99, 3)} | ${cell(a999, 5)} |`,
    );
  }
  const sameRate = Number(opt['same-rate']);
  if (sameRate > 0) {
    const cpuAt = new Map<Server, number[]>(servers.map((s) => [s, []]));
    for (let round = 0; round < Number(opt.rounds); round++) {
      const order = [...servers];
      for (let k = 0; k < round % order.length; k++) order.push(order.shift()!);
      for (const s of order) {
        // The CPU window also holds the generator's start and its warm-up second, which the rate
        // does not count: every variant's figure a little high alike.
        const r = measured(s.child, () =>
          withCpu(s.child.pid, () => fixedRate(s.name, s.url, mix, sameRate)),
        );
        if (r.rate < 0.95 * sameRate)
          throw new Error(
            `${s.name} reached ${r.rate.toFixed(0)} of ${sameRate} req/s: choose a lower --same-rate`,
          );
        cpuAt.get(s)!.push(usPerRequest({ ...r, rps: r.rate } as unknown as Run));
      }
    }
    const firstUs = median(cpuAt.get(servers[0]!)!);
    for (const s of servers) {
      const us = cpuAt.get(s)!;
      sameRateRows.push(
        `| ${mix} | ${s.name} | ${sameRate} | **${median(us).toFixed(1)}** (${us.map((x) => x.toFixed(1)).join(', ')}) | ${s === servers[0] ? '' : `${(100 * (median(us) / firstUs - 1)).toFixed(1)} %`} |`,
      );
    }
  }
  // Each variant against the first (the endpoints' cost, the disk's, sharing's), round by round.
  const first = ours.get(servers[0]!)!;
  for (const s of servers.slice(1)) {
    const r = ours.get(s)!.map((run, i) => run.rps / first[i]!.rps);
    against.push(
      `${mix}: ${s.name} ÷ ${servers[0]!.name} **${median(r).toFixed(2)}** (${r.map((x) => x.toFixed(2)).join(', ')})`,
    );
  }
}
if (fixedRows.length) {
  say(
    `\nAt a fixed offered load (bench/fixed-rate.mjs, ${opt.connections} connections, ${opt.duration} s, on core 1): each request's latency from when it was due to be sent, so a stall counts against every request it held up (coordinated omission corrected).\n`,
  );
  say(
    "| workload | server | offered req/s (share of its throughput) | reached req/s | per class: p50 / p99 / p99.9 / longest (ms) | generator's own lag, max |",
  );
  say('|---|---|---|---|---|---|');
  for (const row of fixedRows) say(row);
  say(
    "\nEach variant's tail as a ratio to the ceiling's at the same rate, in the same run (targets: p99 ≤ 3×, p99.9 ≤ 5×): its worst class against the ceiling's same class, and every request of the run together against every request of the ceiling's:\n",
  );
  say(
    '| workload | server | offered req/s | worst class: p99 ÷ ceiling p99 | worst class: p99.9 ÷ ceiling p99.9 | every request: p99 ÷ ceiling p99 | every request: p99.9 ÷ ceiling p99.9 |',
  );
  say('|---|---|---|---|---|---|---|');
  for (const row of ratioRows) say(row);
}
if (sameRateRows.length) {
  say(
    `\nEvery variant at the same offered rate (--same-rate, bench/fixed-rate.mjs on core 1, ${opt.rounds} rounds × ${opt.duration} s): the server's CPU per request (every thread; median, then each round), and against the first:\n`,
  );
  say('| workload | server | offered req/s | CPU µs/request | against the first |');
  say('|---|---|---|---|---|');
  for (const row of sameRateRows) say(row);
}
if (against.length) {
  say('\nEach variant ÷ the first, req/s in the same round (median, then each round):\n');
  for (const line of against) say(`- ${line}`);
}
// Clean stops, so that a profile is written and the receiver says what it took.
for (const c of everyone) c.kill('SIGCONT');
await Promise.all(
  servers.map(
    (s) =>
      new Promise<void>((r) => {
        s.child.once('exit', (code, signal) => {
          if (opt.profile && s === servers[0]) console.error(`${s.name} exited: ${code ?? signal}`);
          r();
        });
        s.child.kill('SIGTERM');
      }),
  ),
);
if (receiver) {
  receiver.kill('SIGTERM');
  await new Promise((r) => receiver!.once('exit', r));
  say(`\nwebhook deliveries acknowledged by the receiver: ${receiverOut.trim().split('\n').pop()}`);
}
for (const [name, file] of gcFiles) {
  // `… ms: Scavenge 20.1 (25.0) -> 10.2 (26.0) MB, 1.23 / 0.00 ms …`: the pause is the figure after "MB, ".
  const pauses = new Map<string, number[]>();
  for (const m of readFileSync(file, 'utf8').matchAll(/ms: ([A-Za-z-]+).*? MB, ([0-9.]+) \//g)) {
    pauses.set(m[1]!, [...(pauses.get(m[1]!) ?? []), Number(m[2])]);
  }
  for (const [kind, ms] of pauses) {
    const sorted = [...ms].sort((a, b) => a - b);
    say(
      `GC ${name} ${kind}: ${ms.length} pauses, ${ms.reduce((a, b) => a + b, 0).toFixed(0)} ms in all, median ${median(sorted).toFixed(2)} ms, max ${sorted.at(-1)!.toFixed(2)} ms (${file})`,
    );
  }
}
await dropPg();
if (opt.write) writeSection(join(ROOT, 'docs/benchmarks.md'), 'mixed', report.join('\n').trim());
process.exit(0);
