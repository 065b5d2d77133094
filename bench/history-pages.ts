/**
 * What a page of history and activity costs as the log grows (contract 13.3): fills a store with N
 * events (argument 1, default 100,000; 1,000,000 is the contract's figure, and slow to fill), then
 * drives `bin/plantstore serve` with 20 requests in flight (argument 3, seconds, default 10) for
 *   - a page of 100 of one plant's history (the plant has 1,000 events among the N),
 *   - a page of 100 of one garden's activity (2,000 events of plants created, changed and deleted,
 *     spread through the log; the plant is in another of the caller's gardens, so that a page of
 *     activity holds the same events whatever N is and only the log around them grows),
 *   - a page of 100 of the trash (contract 13.2): a trash of N / 10 entries in 100 other gardens and
 *     1,100 + N / 100 in the caller's garden, written by SQL beside the events,
 * each from the newest page and over the first pages (cursors taken along the way by Link),
 * and prints req/s, p50 and p99 latency and the server's CPU µs per request. It also prints what the
 * fill cost on disk: the SQLite file (with its WAL checkpointed) before and after, or PostgreSQL's
 * pg_total_relation_size('events').
 *
 *   npx tsx bench/history-pages.ts 100000 sqlite        (or: npm run bench -- --history-pages 100000 sqlite)
 *   npx tsx bench/history-pages.ts 1000000 postgres 10
 *
 * The events and the trash are written by SQL, as the service writes them (the same columns and
 * indexes), so a million take seconds, not the hours a million requests would. The load generator
 * is wrk (bench/wrk.mjs) when installed, with the server pinned to core 0 and wrk to core 1 where
 * the machine has two; otherwise fetch from this process. On a small shared machine run it more
 * than once and compare the CPU per request. Not run by the tests.
 *
 * To compare trees on one fill (A/B), name their directories (each built, with node_modules):
 *   HISTORY_PAGES_TREES=/tmp/before,. HISTORY_PAGES_ROUNDS=2 npx tsx bench/history-pages.ts 1000000 postgres 10
 * serves each tree in turn, round after round, and prints each run with the load average after it.
 *
 * To compare log sizes (the contract's "the same with 10,000 events, within 20 %"), name several:
 *   HISTORY_PAGES_ROUNDS=5 npx tsx bench/history-pages.ts 10000,1000000 sqlite 10
 * fills a store of each size, then serves them in turn, round after round, the order reversed
 * every other round (so that neither size always runs on the warmer or the busier machine), and
 * prints, per scenario, the median p99 and CPU a request at each size and how far apart they are,
 * and the same of each size's best round (the lowest p99, the lowest CPU): on a shared VM whole
 * rounds run at 1.5–2 times the CPU a request, both sizes alike, when the host is busy, and the
 * best round is the one such an episode left alone.
 */

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { gardenId } from '../src/gardens/id.js';
import { createToken } from '../src/identity/tokens.js';
import { PgStore } from '../src/store/postgres/store.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import type { Store } from '../src/store/store.js';
import { BENCH_PG, benchServe, freePort, pgDatabase, waitReady } from './ports.js';
import { spawnServer, stopAll } from './procs.js';
import { drive as driveTarget, LOADGEN } from './serve-load.js';

const SIZES = (process.argv[2] ?? '100000').split(',').map(Number);
const ENGINE = process.argv[3] ?? 'sqlite';
const SECONDS = Number(process.argv[4] ?? 10);
const CONNECTIONS = 20;
const PLANT = 424_242;
const PLANT_EVENTS = 1000;
const ACTIVITY_EVENTS = 2000;
if (!SIZES.every((n) => n >= 10_000) || !['sqlite', 'postgres'].includes(ENGINE)) {
  throw new Error('usage: history-pages.ts N(>= 10000)[,N...] sqlite|postgres [seconds]');
}

const dir = mkdtempSync(join(tmpdir(), 'plantstore-history-'));
const TRASH_KEPT_MS = 30 * 86_400_000;

/** One filled store: its size, where it is, the caller's garden and token, and what the fill cost. */
interface Filled {
  n: number;
  database: string;
  drop: () => Promise<void>;
  garden: string;
  token: string;
  disk: { before: number; after: number; seconds: number };
  trashEntries: number;
}

/**
 * A store of N events: the caller, its gardens (the activity's and the plant's) and a
 * token, then the events and the trash written by SQL.
 */
async function prepare(N: number): Promise<Filled> {
  const file = join(dir, `plants-${N}.db`);
  const db = ENGINE === 'postgres' ? await pgDatabase(BENCH_PG, `plantstore_history_${N}`) : null;
  const database = db?.url ?? `sqlite:${file}`;
  const store: Store =
    db === null
      ? new SqliteStore({ path: file, durability: 'full' })
      : new PgStore({ url: db.url, poolSize: 2 });
  await store.migrate();
  const at = new Date();
  const garden = gardenId(randomBytes);
  await store.createGarden({ id: garden, name: 'Bench', owner: 'bench', at });
  const plantGarden = gardenId(randomBytes);
  await store.createGarden({ id: plantGarden, name: 'Bench plant', owner: 'bench', at });
  const { secret: token } = await createToken(store, {
    user: 'bench',
    scopes: ['plants:read'],
    name: 'bench',
    expiresInMs: null,
  });
  await store.close();

  // Event i: every (N / PLANT_EVENTS)th is the plant's (a change, in plantGarden); every
  // (N / ACTIVITY_EVENTS)th, one before a multiple of that, the activity garden's; the rest
  // other plants' in 100 other gardens, 10 events a plant.
  const activityEvery = Math.floor(N / ACTIVITY_EVENTS);
  const inActivity = `i % ${activityEvery} = ${activityEvery - 1}`;
  const every = Math.floor(N / PLANT_EVENTS);
  // The trash: 1,100 + N / 100 entries in the caller's garden (eleven pages at least) and N / 10 in
  // the 100 other gardens, deleted 7 ms apart before `at`, to be purged 30 days after their deletion
  // (so the service's own purge finds none due). Written after the events' size is taken.
  const TRASH_OTHER = Math.floor(N / 10);
  const TRASH_OURS = 1100 + Math.floor(N / 100);
  const sqliteSize = () => {
    const c = new Database(file);
    c.pragma('wal_checkpoint(TRUNCATE)');
    c.close();
    return statSync(file).size;
  };
  async function fill(): Promise<{ before: number; after: number; seconds: number }> {
    const start = performance.now();
    if (db === null) {
      const before = sqliteSize();
      const c = new Database(file);
      c.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${N})
        INSERT INTO events (type, owner, plant_id, name, tag, created_at, previous, garden, actor, request_id)
        SELECT CASE WHEN i % ${every} = 0 THEN 4 ELSE 1 << (i % 3) END, 'bench',
          CASE WHEN i % ${every} = 0 THEN ${PLANT} ELSE 1000000 + i / 10 END,
          'Monstera deliciosa ' || i, CASE WHEN i % 2 = 0 THEN 'indoor' END, ${at.getTime()} + i,
          CASE WHEN i % ${every} = 0 THEN '{"name":"Monstera"}' END,
          CASE WHEN i % ${every} = 0 THEN '${plantGarden}' WHEN ${inActivity} THEN '${garden}'
            ELSE 'gdn_other' || (i % 100) END,
          'bench', 'req-' || hex(randomblob(8)) FROM n`);
      c.close();
      const after = sqliteSize();
      const t = new Database(file);
      t.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${TRASH_OTHER + TRASH_OURS})
        INSERT INTO trash (id, garden, owner, name, tag, version, deleted_at, deleted_by, purge_at)
        SELECT 5000000 + i, CASE WHEN i <= ${TRASH_OURS} THEN '${garden}' ELSE 'gdn_other' || (i % 100) END,
          'bench', 'Monstera deliciosa ' || i, CASE WHEN i % 2 = 0 THEN 'indoor' END, 1 + i % 3,
          ${at.getTime()} - i * 7, 'bench', ${at.getTime()} - i * 7 + ${TRASH_KEPT_MS} FROM n`);
      t.close();
      return { before, after, seconds: (performance.now() - start) / 1000 };
    }
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    const size = async () =>
      Number((await c.query("SELECT pg_total_relation_size('events') AS n")).rows[0].n as string);
    const before = await size();
    await c.query(`INSERT INTO events (id, type, owner, garden, data, created_at, actor, request_id)
      SELECT 'evt_' || md5(i::text), CASE WHEN i % ${every} = 0 THEN 'plant.updated'
          ELSE (ARRAY['plant.created', 'plant.deleted', 'plant.updated'])[1 + i % 3] END, 'bench',
        CASE WHEN i % ${every} = 0 THEN '${plantGarden}' WHEN ${inActivity} THEN '${garden}'
          ELSE 'gdn_other' || (i % 100) END,
        json_build_object('id', CASE WHEN i % ${every} = 0 THEN ${PLANT} ELSE 1000000 + i / 10 END,
          'name', 'Monstera deliciosa ' || i, 'garden', '${garden}')::text,
        now() + i * interval '1 ms', 'bench', 'req-' || md5(random()::text)
      FROM generate_series(1, ${N}) i`);
    await c.query(
      `INSERT INTO trash (id, garden, owner, name, tag, version, deleted_at, deleted_by, purge_at)
      SELECT 5000000 + i, CASE WHEN i <= ${TRASH_OURS} THEN '${garden}' ELSE 'gdn_other' || (i % 100) END,
        'bench', 'Monstera deliciosa ' || i, CASE WHEN i % 2 = 0 THEN 'indoor' END, 1 + i % 3,
        $1::timestamptz - i * interval '7 ms', 'bench', $1::timestamptz - i * interval '7 ms' + interval '${TRASH_KEPT_MS} ms'
      FROM generate_series(1, ${TRASH_OTHER + TRASH_OURS}) i`,
      [at],
    );
    await c.query('VACUUM ANALYZE events');
    await c.query('VACUUM ANALYZE trash');
    const after = await size();
    await c.end();
    return { before, after, seconds: (performance.now() - start) / 1000 };
  }
  const disk = await fill();
  return {
    n: N,
    database,
    drop: async () => db?.drop(),
    garden,
    token,
    disk,
    trashEntries: TRASH_OTHER + TRASH_OURS,
  };
}

const stores: Filled[] = [];
for (const n of SIZES) stores.push(await prepare(n));
// The server on core 0 and the load on core 1, where the machine has two and taskset works.
const PIN = availableParallelism() >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;

// A/B on one fill: HISTORY_PAGES_TREES names the trees whose bin/plantstore serves (built, comma-
// separated; default this one), each served in turn for HISTORY_PAGES_ROUNDS rounds (default 1).
const TREES = (process.env.HISTORY_PAGES_TREES ?? '.').split(',').map((t) => resolve(t));
const ROUNDS = Number(process.env.HISTORY_PAGES_ROUNDS ?? 1);

// One tree's server: the scenarios measured against it, then it is stopped.
async function measure(tree: string, filled: Filled) {
  const { database, garden, token } = filled;
  const headers = { authorization: `Bearer ${token}` };
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = spawnServer(benchServe(tree, port, database), PIN);
  try {
    await waitReady(url, '/readyz');
    // Cursors along the way: the Link of each page of the first 20, to read older pages from.
    const cursors = async (path: string): Promise<string[]> => {
      const got: string[] = [path];
      for (let next: string | null = path; next !== null && got.length < 20; ) {
        const res: Response = await fetch(`${url}${next}`, { headers });
        if (res.status !== 200) throw new Error(`${next}: ${res.status} ${await res.text()}`);
        await res.arrayBuffer();
        next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1] ?? null;
        if (next) got.push(next);
      }
      return got;
    };
    // The load (bench/serve-load.ts): wrk on core 1 where it is installed, else fetch from here.
    const target = {
      pid: server.pid!,
      url,
      token,
      dir,
      pin: PIN,
      connections: CONNECTIONS,
      seconds: SECONDS,
    };
    const drive = (name: string, paths: string[]) => driveTarget(target, name, paths);
    const history = await cursors(`/plants/${PLANT}/history?limit=100`);
    const activity = await cursors(`/gardens/${garden}/activity?limit=100`);
    const trash = await cursors('/trash?limit=100');
    // Warm up, then measure.
    await drive('warm-up', [...history, ...activity, ...trash]);
    return [
      await drive('history, newest page', [history[0]!]),
      await drive('history, pages 1-10', history.slice(0, 10)),
      await drive('activity, newest page', [activity[0]!]),
      await drive('activity, pages 1-20', activity),
      await drive('trash, newest page', [trash[0]!]),
      await drive('trash, pages 1-10', trash.slice(0, 10)),
    ];
  } finally {
    await stopAll([server]);
  }
}

type Result = Awaited<ReturnType<typeof measure>>[number];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fillOf = (f: Filled) => ({
  events: f.n,
  seconds: Number(f.disk.seconds.toFixed(1)),
  bytesBefore: f.disk.before,
  bytesAfter: f.disk.after,
  bytesPerMillionEvents: Math.round(((f.disk.after - f.disk.before) / f.n) * 1_000_000),
  measured: ENGINE === 'sqlite' ? 'SQLite file, WAL checkpointed' : "pg_total_relation_size('events')",
  trashEntries: f.trashEntries,
});

try {
  const runs: { tree: string; events: number; round: number; loadAverage: number[]; results: Result[] }[] =
    [];
  for (let round = 1; round <= ROUNDS; round++) {
    // Sizes in turn, the order reversed every other round.
    const order = round % 2 === 1 ? stores : [...stores].reverse();
    for (const filled of order) {
      for (const tree of TREES) {
        const results = await measure(tree, filled);
        const loadAverage = loadavg().map((l) => Number(l.toFixed(2)));
        runs.push({ tree, events: filled.n, round, loadAverage, results });
      }
    }
  }
  const single = TREES.length === 1 && ROUNDS === 1 && stores.length === 1;
  // With several sizes (one tree): per scenario, each size's median p99 and CPU, and the largest
  // p99 against the smallest's.
  const sizes =
    stores.length > 1 && TREES.length === 1
      ? runs[0]!.results.map(({ name }) => {
          const at = Object.fromEntries(
            stores.map((f) => {
              const mine = runs
                .filter((r) => r.events === f.n)
                .map((r) => r.results.find((x) => x.name === name)!);
              return [
                f.n,
                {
                  p99ms: median(mine.map((x) => x.p99ms)),
                  p50ms: median(mine.map((x) => x.p50ms)),
                  cpuMicrosPerRequest: median(mine.map((x) => x.cpuMicrosPerRequest)),
                  bestP99ms: Math.min(...mine.map((x) => x.p99ms)),
                  bestCpuMicrosPerRequest: Math.min(...mine.map((x) => x.cpuMicrosPerRequest)),
                },
              ];
            }),
          );
          const [small, large] = [at[stores[0]!.n]!, at[stores.at(-1)!.n]!];
          const apart = (a: number, b: number) => `${(((b - a) / a) * 100).toFixed(1)} %`;
          return {
            name,
            ...at,
            p99Change: apart(small.p99ms, large.p99ms),
            cpuChange: apart(small.cpuMicrosPerRequest, large.cpuMicrosPerRequest),
            bestP99Change: apart(small.bestP99ms, large.bestP99ms),
            bestCpuChange: apart(small.bestCpuMicrosPerRequest, large.bestCpuMicrosPerRequest),
          };
        })
      : undefined;
  console.log(
    JSON.stringify(
      {
        engine: ENGINE,
        connections: CONNECTIONS,
        loadGenerator: LOADGEN,
        pinned: PIN,
        seconds: SECONDS,
        fill: stores.length === 1 ? fillOf(stores[0]!) : stores.map(fillOf),
        ...(single ? { results: runs[0]!.results } : { runs }),
        ...(sizes ? { sizes } : {}),
      },
      null,
      2,
    ),
  );
} finally {
  await stopAll();
  for (const f of stores) await f.drop();
  rmSync(dir, { recursive: true, force: true });
}
