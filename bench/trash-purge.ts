/**
 * What the service's purge of the trash costs the writes running beside it (contract 13.2; issue
 * 54's target: the purge of 100,000 expired entries never blocks a write for longer than 50 ms on
 * SQLite, and holds no lock a create waits on for longer than 50 ms on PostgreSQL). Fills the trash
 * with N expired entries by SQL (argument 1, default 100,000), then runs the service's purge
 * (trash/purge.ts: batches of 500, each with its plant.purged events) while creates run one after
 * another beside it, and prints how long the purge took and the creates' latency: p50, p99 and
 * the longest, against the same creates with no purge running.
 *
 *   npx tsx bench/trash-purge.ts 100000 sqlite
 *   npx tsx bench/trash-purge.ts 100000 postgres
 *
 * The store is opened in this process, as `serve` opens it (the SQLite writer in its own thread).
 * Not run by the tests.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { gardenId } from '../src/gardens/id.js';
import { PgStore } from '../src/store/postgres/store.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import type { Store } from '../src/store/store.js';
import { purgeExpiredTrash } from '../src/trash/purge.js';
import { BENCH_PG, pgDatabase } from './ports.js';

const N = Number(process.argv[2] ?? 100_000);
const ENGINE = process.argv[3] ?? 'sqlite';
if (!(N >= 1) || !['sqlite', 'postgres'].includes(ENGINE)) {
  throw new Error('usage: trash-purge.ts N sqlite|postgres');
}

const dir = mkdtempSync(join(tmpdir(), 'plantstore-trash-purge-'));
const file = join(dir, 'plants.db');
const db = ENGINE === 'postgres' ? await pgDatabase(BENCH_PG, 'plantstore_trash_purge') : null;
const store: Store =
  db === null
    ? new SqliteStore({ path: file, durability: 'full' })
    : new PgStore({ url: db.url, poolSize: 4 });
await store.migrate();
const garden = gardenId(randomBytes);
await store.createGarden({ id: garden, name: 'Bench', owner: 'bench', at: new Date() });

// N entries, all due an hour ago, ids far above those the creates take.
const due = Date.now() - 3_600_000;
const fill = `INSERT INTO trash (id, garden, owner, name, tag, version, deleted_at, deleted_by, purge_at)`;
if (db === null) {
  const raw = new Database(file);
  raw.pragma('journal_mode = WAL');
  raw
    .prepare(
      `WITH RECURSIVE n(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n WHERE value < @n)
       ${fill} SELECT 1000000000 + value, @garden, 'bench', 'Trashed plant ' || value, NULL, 1, @at, 'bench', @due
       FROM n`,
    )
    .run({ garden, at: due - 1000, due, n: N });
  raw.close();
} else {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query(
    `${fill} SELECT 1000000000 + i, $1, 'bench', 'Trashed plant ' || i, NULL, 1, $2, 'bench', $3
     FROM generate_series(1, $4) AS i`,
    [garden, new Date(due - 1000), new Date(due), N],
  );
  await c.query('ANALYZE trash');
  await c.end();
}

/** Creates one after another until `stop` resolves; each one's latency in ms. */
async function creates(stop: Promise<unknown>): Promise<number[]> {
  let done = false;
  void stop.then(() => {
    done = true;
  });
  const took: number[] = [];
  while (!done) {
    const t0 = performance.now();
    const r = await store.createPlant(
      { id: null, owner: 'bench', garden, admin: true, name: 'Beside the purge', tag: null },
      undefined,
      { at: new Date(), actor: 'bench' },
    );
    if (!('ok' in r)) throw new Error(`create refused: ${JSON.stringify(r)}`);
    took.push(performance.now() - t0);
  }
  return took;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))] ?? 0;
};
const show = (what: string, xs: number[]) =>
  console.log(
    `${what}: ${xs.length} creates, p50 ${pct(xs, 50).toFixed(2)} ms, p99 ${pct(xs, 99).toFixed(2)} ms, longest ${Math.max(...xs).toFixed(2)} ms`,
  );

try {
  const quiet = await creates(new Promise((r) => setTimeout(r, 3000)));
  show(`${ENGINE}, no purge (3 s)`, quiet);
  const t0 = performance.now();
  const purge = purgeExpiredTrash(store, new Date());
  const beside = await creates(purge);
  const purged = await purge;
  const ms = performance.now() - t0;
  console.log(
    `${ENGINE}: purged ${purged} of ${N} expired entries in ${(ms / 1000).toFixed(2)} s (batches of 500)`,
  );
  show(`${ENGINE}, beside the purge`, beside);
} finally {
  await store.close();
  await db?.drop();
  rmSync(dir, { recursive: true, force: true });
}
