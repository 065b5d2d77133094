import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PgStore } from '../../src/store/postgres/store.js';
import { ENGINES, pgAtVersion, withPgDatabase } from '../helpers/engines.js';

// PostgreSQL's list marks (migration 7) as any writer moves them: a transaction that took a
// smaller id but commits after a larger one, plain SQL, and the plants that were there before.

const skip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';

const withDb = withPgDatabase;

describe('postgres list marks', { skip }, () => {
  it('a server id committed after a larger one moves reorder; one after every other moves only top', async () => {
    await withDb(async (url, c) => {
      const store = new PgStore({ url, poolSize: 2 });
      const late = new pg.Client({ connectionString: url });
      try {
        await store.migrate();
        await late.connect();
        const g = (
          await store.homeGarden('alice', {
            id: 'gdn_000000000000000000000001',
            name: 'Home',
            at: new Date(),
          })
        ).id;
        const insert = (client: pg.Client) =>
          client.query(
            `INSERT INTO plants (id, owner, garden, name) VALUES (nextval('plants_id_seq'), 'alice', $1, 'p')
            RETURNING id`,
            [g],
          );
        const first = Number((await insert(c)).rows[0].id);
        const start = await store.listMarks([g], null);
        assert.deepEqual(start, { reorder: 0, top: first });
        // `late` takes the next id, then another transaction takes a larger one and commits first
        // (a batch's statement takes its ids before its trigger locks the garden's marks).
        await late.query('BEGIN');
        const small = Number((await late.query(`SELECT nextval('plants_id_seq') AS id`)).rows[0].id);
        const large = Number((await insert(c)).rows[0].id);
        assert.ok(small < large);
        const before = await store.listMarks([g], null);
        assert.deepEqual(before, { reorder: 0, top: large }, 'after every other: top only');
        await late.query(`INSERT INTO plants (id, owner, garden, name) VALUES ($1, 'alice', $2, 'p')`, [
          small,
          g,
        ]);
        await late.query('COMMIT');
        const after = await store.listMarks([g], null);
        assert.notEqual(after?.reorder, before?.reorder, 'committed below the newest: reorder moves');
        // A tag's top is its own largest id; plain SQL changes and deletes move reorder.
        await c.query(`UPDATE plants SET tag = 'green' WHERE id = $1`, [small]);
        const tagged = await store.listMarks([g], 'green');
        assert.equal(tagged?.top, small);
        assert.notEqual(tagged?.reorder, after?.reorder);
        await c.query('DELETE FROM plants WHERE id = $1', [first]);
        assert.notEqual((await store.listMarks([g], 'green'))?.reorder, tagged?.reorder);
        assert.equal(await store.listMarks(null, null), null, 'everyone’s plants keep no marks');
      } finally {
        await late.end();
        await store.close();
      }
    });
  });

  it('migration 0007 gives every garden with plants its marks', async () => {
    await withDb(async (url, c) => {
      await pgAtVersion(c, 6);
      await c.query(
        `INSERT INTO gardens (id, name, home_user, created_at) VALUES ('gdn_a', 'Home', 'alice', now())`,
      );
      await c.query(
        `INSERT INTO plants (id, owner, garden, name) VALUES (7, 'alice', 'gdn_a', 'x'), (9, 'alice', 'gdn_a', 'y')`,
      );
      const store = new PgStore({ url, poolSize: 1 });
      try {
        assert.deepEqual(
          await store.migrate(),
          POSTGRES_MIGRATIONS.filter((m) => m.version >= 7).map((m) => m.name),
        );
        // Migration 12 writes each plant's search words, an update that moves reorder once.
        assert.deepEqual(await store.listMarks(['gdn_a'], null), { reorder: 1, top: 9 });
        // A client id below the newest, written after the migration, moves reorder.
        await c.query(`INSERT INTO plants (id, owner, garden, name) VALUES (8, 'alice', 'gdn_a', 'z')`);
        assert.deepEqual(await store.listMarks(['gdn_a'], null), { reorder: 2, top: 9 });
      } finally {
        await store.close();
      }
    });
  });
});
