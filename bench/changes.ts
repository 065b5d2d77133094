/**
 * What the change feed costs (contract 13.4), in process (the app's own handler through
 * `app.inject`, no network, one request at a time): fills a store with P plants (argument 2,
 * default 100,000) made by batch creates in the caller's 20 gardens, and E more events (argument 3,
 * default 100,000) of 100 other gardens, written by SQL as the service writes them; then measures
 *   - the first sync of the caller's P plants in pages of 1,000 (plants/s),
 *   - an empty delta (nothing changed since the position),
 *   - a delta of 100 changes (100 plants of the caller's renamed between answers),
 * each delta R times (argument 4, default 200), printing p50 and p99 in ms.
 *
 *   npx tsx bench/changes.ts sqlite 100000 100000
 *   npx tsx bench/changes.ts postgres 100000 1000000
 *
 * Not run by the tests. On a small shared machine run it more than once.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { buildApp } from '../src/app.js';
import { testConfig } from '../src/config.js';
import { gardenId } from '../src/gardens/id.js';
import { createToken } from '../src/identity/tokens.js';
import { PgStore } from '../src/store/postgres/store.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import type { Store } from '../src/store/store.js';
import { BENCH_PG, pgDatabase } from './ports.js';

const ENGINE = process.argv[2] ?? 'sqlite';
const P = Number(process.argv[3] ?? 100_000);
const E = Number(process.argv[4] ?? 100_000);
const R = Number(process.argv[5] ?? 200);
const GARDENS = 20;
if (!['sqlite', 'postgres'].includes(ENGINE))
  throw new Error('usage: changes.ts sqlite|postgres [P] [E] [R]');

const dir = mkdtempSync(join(tmpdir(), 'plantstore-changes-'));
const file = join(dir, 'plants.db');
const db = ENGINE === 'postgres' ? await pgDatabase(BENCH_PG, 'plantstore_changes') : null;
const store: Store =
  db === null
    ? new SqliteStore({ path: file, durability: 'full' })
    : new PgStore({ url: db.url, poolSize: 20 });
await store.migrate();
const at = new Date();
const gardens: string[] = [];
for (let g = 0; g < GARDENS; g++) {
  const id = gardenId(randomBytes);
  await store.createGarden({ id, name: `Bench ${g}`, owner: 'bench', at });
  gardens.push(id);
}
let t = performance.now();
for (let i = 0; i < P; i += 1000) {
  const batch = Array.from({ length: Math.min(1000, P - i) }, (_, j) => ({
    id: null,
    owner: 'bench',
    garden: gardens[(i + j) % GARDENS]!,
    name: `Monstera deliciosa ${i + j}`,
    tag: j % 2 ? 'indoor' : null,
  }));
  await store.createPlants(batch, undefined, { at, actor: 'bench', requestId: null });
}
console.log(`filled ${P} plants (and their events) in ${((performance.now() - t) / 1000).toFixed(1)} s`);
t = performance.now();
if (db === null) {
  const c = new Database(file);
  c.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${E})
    INSERT INTO events (type, owner, plant_id, name, tag, created_at, previous, garden, actor, request_id)
    SELECT 1 << (i % 3), 'other', 2000000000 + i / 10, 'Other ' || i, NULL, ${at.getTime()} + i, NULL,
      'gdn_other' || (i % 100), 'other', NULL FROM n`);
  c.close();
} else {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query(`INSERT INTO events (id, type, owner, garden, data, created_at, actor, request_id)
    SELECT 'evt_' || md5(i::text), (ARRAY['plant.created', 'plant.deleted', 'plant.updated'])[1 + i % 3], 'other',
      'gdn_other' || (i % 100), json_build_object('id', 2000000000 + i / 10, 'name', 'Other ' || i,
        'garden', 'gdn_other' || (i % 100))::text, now(), 'other', NULL
    FROM generate_series(1, ${E}) i`);
  await c.query('ANALYZE');
  await c.end();
}
console.log(`filled ${E} events of other gardens in ${((performance.now() - t) / 1000).toFixed(1)} s`);

const { secret } = await createToken(store, {
  user: 'bench',
  scopes: ['plants:read', 'plants:write'],
  name: null,
  expiresInMs: null,
});
const app = await buildApp(testConfig({ rateLimit: 0 }), { store });
const auth = { authorization: `Bearer ${secret}` };
const get = async (url: string) => {
  const res = await app.inject({ method: 'GET', url, headers: auth });
  if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${res.body}`);
  return res.json() as { changes: unknown[]; next: string; more: boolean };
};

// The first sync, pages of 1,000.
t = performance.now();
let since = '';
let n = 0;
for (let more = true; more; ) {
  const a = await get(`/plants/changes?limit=1000${since ? `&since=${since}` : ''}`);
  n += a.changes.length;
  since = encodeURIComponent(a.next);
  more = a.more;
}
const first = (performance.now() - t) / 1000;
console.log(`first sync: ${n} plants in ${first.toFixed(2)} s = ${Math.round(n / first)} plants/s`);

// PostgreSQL: wait until the log's head has passed every committed event (a transaction anywhere in
// the cluster holds it back; meanwhile an answer repeats the plants of the events it cannot pass).
const settled = async () => {
  while (
    (await store.committedEvents({ after: await store.headPosition(), gardens: null, limit: 1 })).length > 0
  ) {
    await new Promise((r) => setTimeout(r, 5));
  }
};
const pct = (xs: number[], q: number) =>
  xs.sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;
const empty: number[] = [];
for (let i = 0; i < R; i++) {
  await settled();
  const s = performance.now();
  const a = await get(`/plants/changes?since=${since}`);
  empty.push(performance.now() - s);
  since = encodeURIComponent(a.next);
}
console.log(`empty delta: p50 ${pct(empty, 0.5).toFixed(2)} ms, p99 ${pct(empty, 0.99).toFixed(2)} ms`);

const delta: number[] = [];
let next = 1;
for (let i = 0; i < R; i++) {
  for (let j = 0; j < 100; j++, next = (next % P) + 1) {
    await store.updatePlant(next, 'bench', { name: `Renamed ${i}` }, null, undefined, {
      at: new Date(),
      actor: 'bench',
      requestId: null,
    });
  }
  await settled();
  const s = performance.now();
  const a = await get(`/plants/changes?since=${since}`);
  delta.push(performance.now() - s);
  if (a.changes.length !== 100 || a.more) throw new Error(`a delta of ${a.changes.length} (more ${a.more})`);
  since = encodeURIComponent(a.next);
}
console.log(`delta of 100: p50 ${pct(delta, 0.5).toFixed(2)} ms, p99 ${pct(delta, 0.99).toFixed(2)} ms`);

await app.close();
await store.close();
await db?.drop();
rmSync(dir, { recursive: true, force: true });
