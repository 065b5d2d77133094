import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { IdSpaceExhaustedError } from '../../src/errors.js';
import { MAX_PLANT_ID } from '../../src/schemas/plant.js';
import { sqlitePath } from '../../src/store/index.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';

describe('SQLite store specifics', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-sqlite-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('creates the file and its folders on first start, in WAL mode with full sync', async () => {
    const path = join(dir, 'a', 'b', 'plants.db');
    const store = new SqliteStore({ path, durability: 'full' });
    await store.migrate();
    assert.ok(existsSync(path));
    await store.createPlant({ id: null, owner: 'o', name: 'n', tag: null });
    await store.close();
    const db = new Database(path, { readonly: true });
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    assert.equal((db.prepare('SELECT count(*) AS n FROM plants').get() as { n: number }).n, 1);
    assert.deepEqual(db.prepare('SELECT version, name FROM schema_migrations').all(), [
      { version: 1, name: '0001_init' },
    ]);
    db.close();
  });

  it('keeps what it acknowledged across a reopen, and keeps counting ids upward', async () => {
    const path = join(dir, 'reopen.db');
    const s1 = new SqliteStore({ path, durability: 'full' });
    await s1.migrate();
    const r = await s1.createPlant({ id: null, owner: 'o', name: 'kept', tag: 't' });
    assert.ok('created' in r);
    await s1.deletePlant(r.created.id, 'o');
    await s1.close();
    const s2 = new SqliteStore({ path, durability: 'normal' });
    assert.deepEqual(await s2.migrate(), []);
    const r2 = await s2.createPlant({ id: null, owner: 'o', name: 'after', tag: null });
    assert.ok('created' in r2 && r2.created.id > r.created.id);
    await s2.close();
  });

  it('refuses a server-assigned id past 2^53−1 and writes nothing', async () => {
    const store = new SqliteStore({ path: ':memory:', durability: 'full' });
    await store.migrate();
    await store.createPlant({ id: MAX_PLANT_ID, owner: 'o', name: 'last', tag: null });
    await assert.rejects(
      store.createPlant({ id: null, owner: 'o', name: 'x', tag: null }),
      IdSpaceExhaustedError,
    );
    assert.equal((await store.listPlants({ owner: null, tag: null, afterId: 0, limit: 10 })).length, 1);
    await store.close();
  });

  it('answers 503-style errors once closed', async () => {
    const store = new SqliteStore({ path: ':memory:', durability: 'full' });
    await store.migrate();
    await store.close();
    await assert.rejects(store.ping(), (err: { status?: number }) => err.status === 503);
  });

  it('parses sqlite: URLs', () => {
    assert.equal(sqlitePath('sqlite:./data/plantstore.db'), './data/plantstore.db');
    assert.equal(sqlitePath('sqlite:///var/lib/p.db'), '/var/lib/p.db');
    assert.equal(sqlitePath('sqlite::memory:'), ':memory:');
  });
});
