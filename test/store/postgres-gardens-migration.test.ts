import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import pg from 'pg';
import { gardenId } from '../../src/gardens/id.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PgStore } from '../../src/store/postgres/store.js';
import { createPgDatabase, ENGINES, pgAtVersion } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';

// Migration 5 (gardens) on a PostgreSQL store written by the version before it: every user with
// plants or events gets a home garden, owned, holding its plants and events, and nothing a user
// saw before changes.

const skip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';

describe('postgres migration 0005_gardens', { skip }, () => {
  it('puts every plant and event into its owner’s new home garden', async () => {
    const db = await createPgDatabase();
    const c = new pg.Client({ connectionString: db.url });
    let store: PgStore | undefined;
    try {
      await c.connect();
      // The schema as version 4 left it, and data written under it.
      await pgAtVersion(c, 4);
      await c.query(`INSERT INTO plants (id, owner, name, tag) VALUES
        (nextval('plants_id_seq'), 'alice', 'Fern', NULL), (nextval('plants_id_seq'), 'alice', 'Aloe', 'green'),
        (nextval('plants_id_seq'), 'bob', 'Ivy', NULL)`);
      // Carol's only plant is gone; its events remain.
      await c.query(`INSERT INTO events (id, type, owner, data, created_at) VALUES
        ('evt_a', 'plant.created', 'alice', '{"id":1,"name":"Fern"}', now()),
        ('evt_c1', 'plant.created', 'carol', '{"id":99,"name":"Moss"}', now()),
        ('evt_c2', 'plant.deleted', 'carol', '{"id":99,"name":"Moss"}', now())`);
      const versions = (await c.query<{ id: number; version: string }>('SELECT id, version FROM plants'))
        .rows;

      store = new PgStore({ url: db.url, poolSize: 2 });
      assert.deepEqual(
        await store.migrate(),
        POSTGRES_MIGRATIONS.filter((m) => m.version >= 5).map((m) => m.name),
      );
      const homes = new Map<string, string>();
      for (const u of ['alice', 'bob', 'carol']) {
        const gardens = await store.gardensOf(u);
        assert.equal(gardens.length, 1, u);
        const [h] = gardens;
        assert.equal(h!.name, 'Home');
        assert.equal(h!.homeUser, u);
        assert.equal(h!.role, 'owner');
        assert.match(h!.id, /^gdn_[0-9a-f]{24}$/);
        // The service's first ask finds it: no second home.
        const asked = await store.homeGarden(u, { id: gardenId(randomBytes), name: 'Home', at: new Date() });
        assert.equal(asked.id, h!.id);
        homes.set(u, h!.id);
      }
      assert.equal(new Set(homes.values()).size, 3);
      assert.deepEqual(await store.gardensOf('dave'), [], 'no data, no garden yet');

      const alice = homes.get('alice')!;
      const page = await store.listPlants({ gardens: [alice], tag: null, afterId: 0, limit: 10 });
      assert.deepEqual(page, [
        { id: 1, garden: alice, name: 'Fern', tag: null },
        { id: 2, garden: alice, name: 'Aloe', tag: 'green' },
      ]);
      assert.deepEqual(await store.plantFor(3, 'bob'), {
        plant: { id: 3, owner: 'bob', garden: homes.get('bob'), name: 'Ivy', tag: null, version: 4 },
        role: 'owner',
      });
      assert.equal(await store.plantFor(3, 'alice'), null);
      // Versions (and so ETags) are as they were.
      for (const v of versions) assert.equal((await store.getPlant(v.id))?.version, Number(v.version));

      const carol = await until('carol’s events', async () => {
        const got = (await store!.readEvents({ after: '0.0', gardens: [homes.get('carol')!], limit: 10 }))
          .events;
        return got.length === 2 && got;
      });
      assert.deepEqual(
        carol.map((e) => [e.id, e.garden, e.data]),
        [
          ['evt_c1', homes.get('carol'), { id: 99, name: 'Moss', garden: homes.get('carol') }],
          ['evt_c2', homes.get('carol'), { id: 99, name: 'Moss', garden: homes.get('carol') }],
        ],
      );
      // Writing goes on as before: the next id, in the home garden.
      const next = await store.createPlant({
        id: null,
        owner: 'alice',
        garden: alice,
        name: 'New',
        tag: null,
      });
      assert.ok('ok' in next && next.ok.id === 4);
    } finally {
      await store?.close();
      await c.end();
      await db.drop();
    }
  });
});
