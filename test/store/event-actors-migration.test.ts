import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { PgStore } from '../../src/store/postgres/store.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { Store } from '../../src/store/store.js';
import { createPgDatabase, ENGINES, pgAtVersion, sqliteAtVersion } from '../helpers/engines.js';
import { logSettled } from '../helpers/log.js';

// SQLite migration 17 and PostgreSQL migration 13 (contract 13.1, 13.3): events written before
// them keep everything they had and read actor null, requestId null; endpoints keep the types
// they had (every plant type, or the ones chosen): a version-4 receiver gets no event type it never
// heard of; events written after carry their cause.

const ENDPOINTS = `INSERT INTO webhook_endpoints (id, owner, admin, url, events, secret, status, created_at) VALUES
  ('we_all', 'alice', $no, 'https://example.com/a', 7, 'whsec_a', 'enabled', $at),
  ('we_some', 'alice', $no, 'https://example.com/s', 2, 'whsec_s', 'enabled', $at)`;

// `start`: a position before every event, as the engine spells it.
async function check(store: Store, garden: string, start: string): Promise<void> {
  await logSettled(store);
  const old = (await store.readEvents({ after: start, gardens: null, limit: 10 })).events;
  assert.deepEqual(
    old.map((e) => [e.type, e.data, e.actor, e.requestId]),
    [['plant.created', { id: 7, name: 'Old fern', tag: 'indoor', garden }, null, null]],
  );
  assert.deepEqual((await store.getEndpoint('we_all'))?.events, [
    'plant.created',
    'plant.updated',
    'plant.deleted',
  ]);
  assert.deepEqual((await store.getEndpoint('we_some'))?.events, ['plant.deleted']);
  const at = new Date();
  const made = await store.createPlant(
    { id: null, owner: 'alice', garden, admin: true, name: 'New fern', tag: null },
    undefined,
    { at, actor: 'alice', requestId: 'req-new' },
  );
  assert.ok('ok' in made);
  await logSettled(store);
  const now = (await store.readEvents({ after: old[0]!.position, gardens: [garden], limit: 10 })).events;
  assert.deepEqual(
    now.map((e) => [e.type, e.actor, e.requestId]),
    [['plant.created', 'alice', 'req-new']],
  );
}

describe('migration: events written before who-did-it read actor and requestId null', () => {
  it('on SQLite (17)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-mig17-'));
    try {
      const path = join(dir, 'v16.db');
      const old = sqliteAtVersion(path, 16);
      old.exec(`INSERT INTO gardens (id, name, home_user, created_at, seq, created_by)
          VALUES ('gdn_aaaaaaaaaaaaaaaaaaaaaaaa', 'Home', 'alice', 0, 1, 'alice');
        INSERT INTO garden_members VALUES ('gdn_aaaaaaaaaaaaaaaaaaaaaaaa', 'alice', 'owner', 0);
        INSERT INTO events (type, owner, plant_id, name, tag, created_at, garden)
          VALUES (1, 'alice', 7, 'Old fern', 'indoor', ${Date.now() - 1000}, 'gdn_aaaaaaaaaaaaaaaaaaaaaaaa');
        ${ENDPOINTS.replaceAll('$no', '0').replaceAll('$at', '0')}`);
      old.close();
      const store = new SqliteStore({ path, durability: 'full' });
      try {
        assert.deepEqual(await store.migrate(), [
          '0017_event_actors',
          '0018_history_pages',
          '0019_trash',
          '0020_change_feed',
          '0021_event_traceparent',
        ]);
        await check(store, 'gdn_aaaaaaaaaaaaaaaaaaaaaaaa', '0');
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const pgSkip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';
  it('on PostgreSQL (13)', { skip: pgSkip }, async () => {
    const db = await createPgDatabase();
    const c = new pg.Client({ connectionString: db.url });
    let store: PgStore | undefined;
    try {
      await c.connect();
      await pgAtVersion(c, 12);
      await c.query(`INSERT INTO gardens (id, name, home_user, created_at, created_by)
        VALUES ('gdn_aaaaaaaaaaaaaaaaaaaaaaaa', 'Home', 'alice', now(), 'alice')`);
      await c.query(
        `INSERT INTO garden_members VALUES ('gdn_aaaaaaaaaaaaaaaaaaaaaaaa', 'alice', 'owner', now())`,
      );
      await c.query(`INSERT INTO events (id, type, owner, garden, data, created_at)
        VALUES ('evt_old', 'plant.created', 'alice', 'gdn_aaaaaaaaaaaaaaaaaaaaaaaa',
          '{"id":7,"name":"Old fern","tag":"indoor","garden":"gdn_aaaaaaaaaaaaaaaaaaaaaaaa"}', now())`);
      await c.query(ENDPOINTS.replaceAll('$no', 'false').replaceAll('$at', 'now()'));
      store = new PgStore({ url: db.url, poolSize: 2 });
      assert.deepEqual(await store.migrate(), [
        '0013_event_actors',
        '0014_history_pages',
        '0015_trash',
        '0016_change_feed',
        '0017_event_traceparent',
      ]);
      await check(store, 'gdn_aaaaaaaaaaaaaaaaaaaaaaaa', '0.0');
    } finally {
      await c.end().catch(() => {});
      await store?.close();
      await db.drop();
    }
  });
});
