import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { PgStore } from '../../src/store/postgres/store.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { createPgDatabase, ENGINES, pgAtVersion, sqliteAtVersion } from '../helpers/engines.js';

// SQLite migration 13 and PostgreSQL migration 10: an endpoint made with plants:admin before them
// has no record of the credential that made it, so it becomes owner-only; other endpoints stay.

const ENDPOINTS = `INSERT INTO webhook_endpoints (id, owner, admin, url, events, secret, status, created_at) VALUES
  ('we_admin', 'keeper', $admin, 'https://example.com/a', 7, 'whsec_a', 'enabled', $at),
  ('we_plain', 'alice', $plain, 'https://example.com/p', 7, 'whsec_p', 'enabled', $at)`;

describe('migration: admin endpoints without a recorded credential become owner-only', () => {
  it('on SQLite (13)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-mig13-'));
    try {
      const path = join(dir, 'v12.db');
      const old = sqliteAtVersion(path, 12);
      old.exec(ENDPOINTS.replace('$admin', '1').replace('$plain', '0').replaceAll('$at', '0'));
      old.close();
      const store = new SqliteStore({ path, durability: 'full' });
      try {
        assert.deepEqual(await store.migrate(), [
          '0013_endpoint_admin_credential',
          '0014_deliveries_from_the_log',
          '0015_plant_search',
          '0016_search_words',
          '0017_event_actors',
          '0018_history_pages',
          '0019_trash',
          '0020_change_feed',
          '0021_event_traceparent',
        ]);
        const admin = await store.getEndpoint('we_admin');
        assert.deepEqual([admin?.admin, admin?.adminTokenId, admin?.adminUntil], [false, null, null]);
        assert.equal(admin?.owner, 'keeper');
        assert.equal(admin?.status, 'enabled');
        assert.equal((await store.getEndpoint('we_plain'))?.admin, false);
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const pgSkip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';
  it('on PostgreSQL (10)', { skip: pgSkip }, async () => {
    const db = await createPgDatabase();
    const c = new pg.Client({ connectionString: db.url });
    let store: PgStore | undefined;
    try {
      await c.connect();
      await pgAtVersion(c, 9);
      await c.query(
        ENDPOINTS.replace('$admin', 'true').replace('$plain', 'false').replaceAll('$at', 'now()'),
      );
      store = new PgStore({ url: db.url, poolSize: 2 });
      assert.deepEqual(await store.migrate(), [
        '0010_endpoint_admin_credential',
        '0011_deliveries_from_the_log',
        '0012_plant_search',
        '0013_event_actors',
        '0014_history_pages',
        '0015_trash',
        '0016_change_feed',
        '0017_event_traceparent',
      ]);
      const admin = await store.getEndpoint('we_admin');
      assert.deepEqual([admin?.admin, admin?.adminTokenId, admin?.adminUntil], [false, null, null]);
      assert.equal(admin?.owner, 'keeper');
      assert.equal((await store.getEndpoint('we_plain'))?.admin, false);
    } finally {
      await c.end().catch(() => {});
      await store?.close();
      await db.drop();
    }
  });
});
