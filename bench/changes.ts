/**
 * What the change feed costs (contract 13.4, issue 55's targets), served by `bin/plantstore serve`
 * (on core 0; the load on core 1 where the machine has two cores and taskset works):
 *   - a store of P plants (argument 2, default 1,000,000), of which V = 100,000 (every P/V-th) are
 *     in the caller's 20 gardens and the rest in 100 other gardens, and E events (argument 3,
 *     default 1,000,000), every tenth a change of one of the caller's plants and the rest of other
 *     gardens' plants, all written by SQL as the service writes them;
 *   - the first sync of the caller's V plants in pages of 1,000, one request after another over
 *     HTTP, timed end to end (plants/s; three runs);
 *   - an empty delta (`since` the log's head) and a delta of 100 changes (100 of the caller's
 *     plants changed after 20 positions, one `since` each, cycled through), 20 connections for S
 *     seconds each (argument 4, default 10) with wrk (bench/wrk.mjs), or fetch when wrk is missing;
 * printing req/s, p50 and p99 latency and the server's CPU µs per request, as JSON.
 *
 *   npx tsx bench/changes.ts sqlite                 (or: npm run bench -- --changes sqlite)
 *   npx tsx bench/changes.ts postgres 1000000 10000 (the log at 10,000 events: a delta's p99 is to
 *                                                    be within 20 % of the one at 1,000,000)
 *
 * PROFILE=DIR writes the server's CPU profile (--cpu-prof) to DIR. AB=TREE,TREE (ROUNDS=n, default
 * 2) then serves the same store from each tree's bin/plantstore in turn, alternating, n rounds (a
 * first sync, the empty delta and the delta of 100 each), and prints those figures by tree: an A/B
 * of two builds (each tree built) on one fill and one machine state. KEEP_DB=1 leaves PostgreSQL's
 * database in place (its URL on stderr) to read its plans. SERVE_NODE_FLAGS="--trace-gc" (any node
 * flags) runs each server with them. Not run by the tests; on a
 * small shared machine run it more than once.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { gardenId } from '../src/gardens/id.js';
import { createToken } from '../src/identity/tokens.js';
import { PgStore } from '../src/store/postgres/store.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import type { Store } from '../src/store/store.js';
import { BENCH_PG, benchServe, freePort, pgDatabase, waitReady } from './ports.js';
import { cpuTicks, spawnServer, stopAll, TICK_US } from './procs.js';
import { drive as driveTarget, LOADGEN } from './serve-load.js';

const ENGINE = process.argv[2] ?? 'sqlite';
const P = Number(process.argv[3] ?? 1_000_000);
const E = Number(process.argv[4] ?? 1_000_000);
const SECONDS = Number(process.argv[5] ?? 10);
const V = 100_000;
const GARDENS = 20;
const CONNECTIONS = 20;
const DELTA = 100;
if (!['sqlite', 'postgres'].includes(ENGINE) || !(P >= V) || P % V !== 0 || !(E >= 10 * DELTA)) {
  throw new Error('usage: changes.ts sqlite|postgres [plants: a multiple of 100000] [events] [seconds]');
}
const EVERY = P / V;

const dir = mkdtempSync(join(tmpdir(), 'plantstore-changes-'));
const file = join(dir, 'plants.db');
const db = ENGINE === 'postgres' ? await pgDatabase(BENCH_PG, 'plantstore_changes') : null;
const database = db?.url ?? `sqlite:${file}`;

// The caller's gardens and token, through the Store; the rest by SQL.
const store: Store =
  db === null
    ? new SqliteStore({ path: file, durability: 'full' })
    : new PgStore({ url: db.url, poolSize: 1 });
await store.migrate();
const at = new Date();
const gardens: string[] = [];
for (let g = 0; g < GARDENS; g++) {
  const id = gardenId(randomBytes);
  await store.createGarden({ id, name: `Bench ${g}`, owner: 'bench', at });
  gardens.push(id);
}
const { secret: token } = await createToken(store, {
  user: 'bench',
  scopes: ['plants:read'],
  name: 'bench',
  expiresInMs: null,
});

// Plant i (1 … P): the caller's when i is a multiple of EVERY, in garden (i / EVERY) % 20; else in
// gdn_other(i % 100). Event k (1 … E): every tenth a plant.updated of the caller's plant
// EVERY * (1 + (k / 10) % V), the rest created/updated/deleted of other gardens' plants.
const list = JSON.stringify(gardens);
const sqlite = db === null ? new Database(file) : null;
const client = db === null ? null : new pg.Client({ connectionString: db.url });
await client?.connect();
const t = performance.now();
if (sqlite !== null) {
  sqlite.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${P})
    INSERT INTO plants (id, owner, garden, name, tag, version)
    SELECT i, 'bench', CASE WHEN i % ${EVERY} = 0 THEN json_extract('${list}', '$[' || ((i / ${EVERY}) % ${GARDENS}) || ']')
      ELSE 'gdn_other' || (i % 100) END, 'Monstera deliciosa ' || i, CASE WHEN i % 2 = 0 THEN 'indoor' END, 1 FROM n`);
  sqlite.exec(`WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ${E})
    INSERT INTO events (type, owner, plant_id, name, tag, created_at, previous, garden, actor, request_id)
    SELECT CASE WHEN k % 10 = 0 THEN 2 ELSE 1 << (k % 3) END, 'bench',
      CASE WHEN k % 10 = 0 THEN ${EVERY} * (1 + (k / 10) % ${V}) ELSE 2000000000 + k / 10 END,
      'Monstera deliciosa ' || k, NULL, ${at.getTime()} + k, CASE WHEN k % 10 = 0 THEN '{"name":"Monstera"}' END,
      CASE WHEN k % 10 = 0 THEN json_extract('${list}', '$[' || ((1 + (k / 10) % ${V}) % ${GARDENS}) || ']')
        ELSE 'gdn_other' || (k % 100) END, 'bench', 'req-' || hex(randomblob(8)) FROM n`);
  sqlite.pragma('wal_checkpoint(TRUNCATE)');
} else {
  await client!.query(
    `INSERT INTO plants (id, owner, garden, name, tag, version)
     SELECT i, 'bench', CASE WHEN i % $2 = 0 THEN ($3::text[])[(i / $2) % $4 + 1] ELSE 'gdn_other' || (i % 100) END,
       'Monstera deliciosa ' || i, CASE WHEN i % 2 = 0 THEN 'indoor' END, 1
     FROM generate_series(1, $1::bigint) i`,
    [P, EVERY, gardens, GARDENS],
  );
  await client!.query(`SELECT setval('plants_id_seq', $1)`, [P]);
  await client!.query(
    `INSERT INTO events (id, type, owner, garden, data, created_at, actor, request_id)
     SELECT 'evt_' || md5(k::text),
       CASE WHEN k % 10 = 0 THEN 'plant.updated' ELSE (ARRAY['plant.created', 'plant.updated', 'plant.deleted'])[1 + k % 3] END,
       'bench',
       CASE WHEN k % 10 = 0 THEN ($3::text[])[(1 + (k / 10) % $2) % $4 + 1] ELSE 'gdn_other' || (k % 100) END,
       json_build_object('id', CASE WHEN k % 10 = 0 THEN $5 * (1 + (k / 10) % $2) ELSE 2000000000 + k / 10 END,
         'name', 'Monstera deliciosa ' || k)::text,
       now(), 'bench', 'req-' || md5(random()::text)
     FROM generate_series(1, $1::bigint) k`,
    [E, V, gardens, GARDENS, EVERY],
  );
  await client!.query('VACUUM ANALYZE');
}
const fillSeconds = (performance.now() - t) / 1000;
console.error(`filled ${P} plants and ${E} events in ${fillSeconds.toFixed(1)} s`);

// One more event of another garden (a position of its own), or 100 changes of the caller's plants.
let extra = 0;
async function otherEvent(): Promise<void> {
  extra++;
  if (sqlite !== null) {
    sqlite.exec(`INSERT INTO events (type, owner, plant_id, name, created_at, garden, actor)
      VALUES (2, 'bench', ${1_000_000_000 + extra}, 'Other', ${Date.now()}, 'gdn_other0', 'bench')`);
  } else {
    await client!.query(`INSERT INTO events (id, type, owner, garden, data, created_at, actor)
      VALUES ('evt_x' || md5(random()::text), 'plant.updated', 'bench', 'gdn_other0',
        '{"id":${1_000_000_000 + extra},"name":"Other"}', now(), 'bench')`);
  }
}
async function changeHundred(): Promise<void> {
  // The caller's plants EVERY * 1 … EVERY * 100, renamed (their version bumped) with an event each.
  if (sqlite !== null) {
    sqlite.exec(`WITH RECURSIVE n(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM n WHERE j < ${DELTA})
      INSERT INTO events (type, owner, plant_id, name, created_at, previous, garden, actor)
      SELECT 2, 'bench', ${EVERY} * j, 'Renamed ' || j, ${Date.now()}, '{"name":"Monstera"}',
        json_extract('${list}', '$[' || (j % ${GARDENS}) || ']'), 'bench' FROM n`);
    sqlite.exec(`UPDATE plants SET name = 'Renamed ' || (id / ${EVERY}), version = version + 1
      WHERE id % ${EVERY} = 0 AND id <= ${EVERY * DELTA}`);
  } else {
    await client!.query(
      `WITH u AS (UPDATE plants SET name = 'Renamed ' || (id / $1), version = version + 1
         WHERE id IN (SELECT $1 * j FROM generate_series(1, $2) j) RETURNING id, garden, name)
       INSERT INTO events (id, type, owner, garden, data, created_at, actor)
       SELECT 'evt_r' || md5(random()::text), 'plant.updated', 'bench', garden,
         json_build_object('id', id, 'name', name)::text, now(), 'bench' FROM u ORDER BY id`,
      [EVERY, DELTA],
    );
  }
}
// PostgreSQL: wait until the log's head has passed every committed event (a transaction anywhere
// in the cluster holds it back; meanwhile an answer repeats the plants of the events it cannot pass).
async function settled(): Promise<void> {
  while (
    (await store.committedEvents({ after: await store.headPosition(), gardens: null, limit: 1 })).length > 0
  ) {
    await new Promise((r) => setTimeout(r, 5));
  }
}

const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const PIN = availableParallelism() >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;
// The server alone gets the profiler's flags.
if (process.env.PROFILE) process.env.NODE_OPTIONS = `--cpu-prof --cpu-prof-dir=${process.env.PROFILE}`;
// SERVE_NODE_FLAGS: node flags for the servers (`--trace-gc`: its lines go to stdout, before the JSON).
const nodeFlags = process.env.SERVE_NODE_FLAGS?.split(' ').filter(Boolean) ?? [];
const serve = (tree: string) =>
  spawnServer(
    nodeFlags.length === 0
      ? benchServe(tree, port, database)
      : [process.execPath, ...nodeFlags, ...benchServe(tree, port, database)],
    PIN,
  );
const server = serve('.');
delete process.env.NODE_OPTIONS;
// This process (the first sync's client, and the cursors') on core 1.
if (PIN) spawnSync('taskset', ['-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
await waitReady(url, '/readyz');
const headers = { authorization: `Bearer ${token}` };

interface Answer {
  changes: { id: number; op: string }[];
  next: string;
  more: boolean;
}
/** One first sync of the caller's plants in pages of 1,000 (its timing, and the position it ends at). */
async function firstSync(pid: number) {
  const ticks = cpuTicks(pid);
  const t0 = performance.now();
  let n = 0;
  let pages = 0;
  let since: string | null = null;
  for (let more = true; more; pages++) {
    const a = await get(
      `/plants/changes?limit=1000${since === null ? '' : `&since=${encodeURIComponent(since)}`}`,
    );
    n += a.changes.length;
    since = a.next;
    more = a.more;
  }
  const seconds = (performance.now() - t0) / 1000;
  if (n !== V) throw new Error(`a first sync of ${n} plants, not ${V}`);
  return {
    result: {
      seconds: Number(seconds.toFixed(3)),
      plantsPerSecond: Math.round(n / seconds),
      cpuMicrosPerPage: Math.round(((cpuTicks(pid) - ticks) * TICK_US) / pages),
    },
    position: since!,
  };
}
async function get(path: string): Promise<Answer> {
  const res = await fetch(`${url}${path}`, { headers });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${body}`);
  return JSON.parse(body) as Answer;
}
const deltaPath = (since: string) => `/plants/changes?since=${encodeURIComponent(since)}`;

const target = { pid: server.pid!, url, token, dir, pin: PIN, connections: CONNECTIONS, seconds: SECONDS };
const drive = (name: string, paths: string[]) => driveTarget(target, name, paths);

try {
  // The first sync, pages of 1,000, three times: each ends with the caller's position.
  const syncs: Awaited<ReturnType<typeof firstSync>>['result'][] = [];
  let position = '';
  for (let run = 0; run < 3; run++) {
    const sync = await firstSync(server.pid!);
    syncs.push(sync.result);
    position = sync.position;
  }

  // Positions: CONNECTIONS of them, another garden's event between each (so that they differ),
  // then 100 changes of the caller's plants after the last: each position is 100 changes behind
  // the head. The head itself: the empty delta's position.
  const behind: string[] = [];
  for (let k = 0; k < CONNECTIONS; k++) {
    await otherEvent();
    await settled();
    const a = await get(deltaPath(position));
    if (a.changes.length !== 0 || a.more) throw new Error(`a delta of ${a.changes.length}, not 0`);
    position = a.next;
    behind.push(position);
  }
  await changeHundred();
  await settled();
  for (const since of behind) {
    const a = await get(deltaPath(since));
    if (a.changes.length !== DELTA || a.more) throw new Error(`a delta of ${a.changes.length}, not ${DELTA}`);
    position = a.next;
  }
  const empty = await get(deltaPath(position));
  if (empty.changes.length !== 0 || empty.more) throw new Error(`an empty delta of ${empty.changes.length}`);

  // With AB, the trees' servers are the ones measured.
  const results = [];
  if (!process.env.AB) {
    await drive('warm-up', behind.map(deltaPath));
    results.push(await drive('empty delta (since the head)', [deltaPath(position)]));
    results.push(await drive(`delta of ${DELTA} (${CONNECTIONS} positions)`, behind.map(deltaPath)));
  }
  // A/B: the same store served by each tree in turn.
  const ab: { tree: string; round: number; firstSync: unknown; results: unknown[] }[] = [];
  if (process.env.AB) {
    await stopAll([server]);
    for (let round = 1; round <= Number(process.env.ROUNDS ?? 2); round++) {
      for (const tree of process.env.AB.split(',')) {
        const s = serve(tree);
        try {
          await waitReady(url, '/readyz');
          const t = { ...target, pid: s.pid! };
          const sync = (await firstSync(s.pid!)).result;
          await driveTarget({ ...t, seconds: Math.min(3, SECONDS) }, 'warm-up', behind.map(deltaPath));
          ab.push({
            tree,
            round,
            firstSync: sync,
            results: [
              await driveTarget(t, 'empty delta (since the head)', [deltaPath(position)]),
              await driveTarget(t, `delta of ${DELTA} (${CONNECTIONS} positions)`, behind.map(deltaPath)),
            ],
          });
          console.error(JSON.stringify(ab.at(-1)));
        } finally {
          await stopAll([s]);
        }
      }
    }
  }
  console.log(
    JSON.stringify(
      {
        ab: ab.length === 0 ? undefined : ab,
        engine: ENGINE,
        plants: P,
        visiblePlants: V,
        callerGardens: GARDENS,
        events: E,
        connections: CONNECTIONS,
        loadGenerator: LOADGEN,
        pinned: PIN,
        seconds: SECONDS,
        fillSeconds: Number(fillSeconds.toFixed(1)),
        firstSync: syncs,
        results,
      },
      null,
      2,
    ),
  );
} finally {
  await stopAll([server]);
  sqlite?.close();
  await client?.end();
  await store.close();
  // KEEP_DB=1 leaves PostgreSQL's database for a look at its plans (its URL on stderr).
  if (process.env.KEEP_DB) console.error(`kept ${db?.url}`);
  else await db?.drop();
  rmSync(dir, { recursive: true, force: true });
}
