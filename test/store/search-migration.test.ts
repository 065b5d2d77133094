// The migrations that index search (SQLite 15 and 16, PostgreSQL 12): the plants already stored
// are found by their words the moment they have run, and the index follows every change after it.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { PgStore } from '../../src/store/postgres/store.js';
import { fillSearch } from '../../src/store/sqlite/search.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { Store } from '../../src/store/store.js';
import { createPgDatabase, ENGINES, pgAtVersion, sqliteAtVersion } from '../helpers/engines.js';

const G = 'gdn_search00000000000000001';
const PLANTS = [
  [1, 'Monstera deliciosa'],
  [2, 'Café rose'],
  [3, 'Фикус Бенджамина'],
  [4, 'plain'],
  [5, 'Monstera adansonii'],
] as const;

// What a search of the garden for `terms` finds, by id.
const found = async (store: Store, ...terms: string[]) =>
  (await store.listPlants({ gardens: [G], tag: null, afterId: 0, limit: 10, terms })).map((p) => p.id);

async function checks(store: Store): Promise<void> {
  assert.deepEqual(await found(store, 'mon', 'del'), [1]);
  assert.deepEqual(await found(store, 'monstera'), [1, 5]);
  assert.deepEqual(await found(store, 'monsterax'), []);
  assert.deepEqual(await found(store, 'adan'), [5]);
  assert.deepEqual(await found(store, 'cafe'), [2]);
  assert.deepEqual(await found(store, 'фик'), [3]);
  assert.deepEqual(await found(store, 'p'), [4]);
  // After the migration, writes keep the index: a rename and a delete.
  await store.updatePlant(4, null, { name: 'Pilea peperomioides' }, null);
  assert.deepEqual(await found(store, 'pil', 'pep'), [4]);
  await store.deletePlant(1, null);
  assert.deepEqual(await found(store, 'mon'), [5]);
  assert.deepEqual(await found(store, 'monstera', 'delic'), []);
  assert.deepEqual(await found(store, 'pepero'), [4]);
}

// A SQLite store at version `version` holding PLANTS in garden G.
function sqliteWithPlants(path: string, version: number) {
  const old = sqliteAtVersion(path, version);
  old
    .prepare(
      `INSERT INTO gardens (id, name, home_user, created_at, seq, created_by) VALUES (?, 'G', 'o', 0, 1, 'o')`,
    )
    .run(G);
  const ins = old.prepare('INSERT INTO plants (id, owner, garden, name, tag) VALUES (?, ?, ?, ?, NULL)');
  for (const [id, name] of PLANTS) ins.run(id, 'o', G, name);
  return old;
}

describe('search migration: plants stored before it are found', () => {
  it('on SQLite (15)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-search-'));
    try {
      const path = join(dir, 'v14.db');
      sqliteWithPlants(path, 14).close();
      const store = new SqliteStore({ path, durability: 'full' });
      try {
        assert.deepEqual(await store.migrate(), [
          '0015_plant_search',
          '0016_search_words',
          '0017_event_actors',
          '0018_history_pages',
          '0019_trash',
          '0020_change_feed',
          '0021_event_traceparent',
        ]);
        await checks(store);
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('on SQLite (16): the words of a store indexed by 15', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-search-'));
    try {
      const path = join(dir, 'v15.db');
      const old = sqliteWithPlants(path, 15);
      fillSearch(old);
      old.close();
      const store = new SqliteStore({ path, durability: 'full' });
      try {
        assert.deepEqual(await store.migrate(), [
          '0016_search_words',
          '0017_event_actors',
          '0018_history_pages',
          '0019_trash',
          '0020_change_feed',
          '0021_event_traceparent',
        ]);
        await checks(store);
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('on PostgreSQL (12)', { skip: ENGINES.find((e) => e.name === 'postgres')!.skip }, async () => {
    const db = await createPgDatabase();
    const c = new pg.Client({ connectionString: db.url });
    let store: PgStore | undefined;
    try {
      await c.connect();
      await pgAtVersion(c, 11);
      await c.query(
        `INSERT INTO gardens (id, name, home_user, created_at, created_by) VALUES ($1, 'G', 'o', now(), 'o')`,
        [G],
      );
      for (const [id, name] of PLANTS) {
        await c.query('INSERT INTO plants (id, owner, garden, name) VALUES ($1, $2, $3, $4)', [
          id,
          'o',
          G,
          name,
        ]);
      }
      store = new PgStore({ url: db.url, poolSize: 2 });
      assert.deepEqual(await store.migrate(), [
        '0012_plant_search',
        '0013_event_actors',
        '0014_history_pages',
        '0015_trash',
        '0016_change_feed',
        '0017_event_traceparent',
      ]);
      await checks(store);
    } finally {
      await store?.close();
      await c.end();
      await db.drop();
    }
  });
});
