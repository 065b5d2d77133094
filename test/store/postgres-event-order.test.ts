import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { PgStore } from '../../src/store/postgres/store.js';
import { createPgDatabase, ENGINES } from '../helpers/engines.js';

// The PostgreSQL log is read in (xid, seq) order compared as xid8. Read in the order of the xids'
// text, an event of transaction 10 came before one of 9: a reader of every garden's events
// (eventsAll) took the later one first and went on from there, passing over the earlier one.

const skip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';

describe('postgres event log order', { skip }, () => {
  it('reads events of transactions whose ids differ in length in xid order', async () => {
    const db = await createPgDatabase();
    const store = new PgStore({ url: db.url, poolSize: 2 });
    const c = new pg.Client({ connectionString: db.url });
    try {
      await store.migrate();
      await c.connect();
      // Transactions 9, 10 and 100 are long over on any cluster (initdb alone takes hundreds).
      await c.query(
        `INSERT INTO events (xid, seq, id, type, owner, garden, data, created_at)
         SELECT x::xid8, s, 'evt_order' || s, 'plant.created', 'alice', 'gdn_g', json_build_object('id', s, 'name', 'p' || s, 'garden', 'gdn_g')::text, now()
         FROM (VALUES ('100', 3), ('9', 1), ('10', 2)) AS v(x, s)`,
      );
      const read = async (gardens: string[] | null) => {
        const ids: string[] = [];
        let after = '0.0';
        for (let i = 0; i < 3; i++) {
          const r = await store.readEvents({ after, gardens, limit: 1 });
          ids.push(...r.events.map((e) => e.id));
          after = r.position;
        }
        return ids;
      };
      const inOrder = ['evt_order1', 'evt_order2', 'evt_order3'];
      assert.deepEqual(await read(null), inOrder, "every garden's events");
      assert.deepEqual(await read(['gdn_g']), inOrder, "one garden's events");
    } finally {
      await c.end();
      await store.close();
      await db.drop();
    }
  });
});
