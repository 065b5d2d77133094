import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type pg from 'pg';
import { PgStore } from '../../src/store/postgres/store.js';
import { ENGINES, withPgDatabase } from '../helpers/engines.js';

// The store's connections run without JIT: a page's plan is estimated from the table's size, and
// on a big store the estimate crossed jit_above_cost, compiling every page (tens of ms) for a
// statement that runs in a fraction of one.

const skip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';

describe('postgres connections', { skip }, () => {
  it('run with jit off', { timeout: 30_000 }, async () => {
    await withPgDatabase(async (url) => {
      const store = new PgStore({ url, poolSize: 2 });
      try {
        await store.migrate();
        const pool = (store as unknown as { pool: pg.Pool }).pool;
        const r = await pool.query('SHOW jit');
        assert.equal(r.rows[0].jit, 'off');
      } finally {
        await store.close();
      }
    });
  });

  // The change feed's statements run their generic plans on connections of their own; every other
  // statement keeps PostgreSQL's choice (search and a deliverer's claims are planned for their values).
  it('run the change feed on connections of generic plans, and nothing else', {
    timeout: 30_000,
  }, async () => {
    await withPgDatabase(async (url) => {
      const store = new PgStore({ url, poolSize: 2 });
      try {
        await store.migrate();
        const { pool, feedPool } = store as unknown as { pool: pg.Pool; feedPool: pg.Pool };
        assert.equal((await pool.query('SHOW plan_cache_mode')).rows[0].plan_cache_mode, 'auto');
        const feed = await feedPool.query('SHOW plan_cache_mode');
        assert.equal(feed.rows[0].plan_cache_mode, 'force_generic_plan');
        assert.equal((await feedPool.query('SHOW jit')).rows[0].jit, 'off');
        // A delta is read there: its connection is the feed pool's.
        const head = await store.headPosition();
        const start = await store.feedStart!('nobody', head, { limit: 101, tailLimit: 101, garden: null });
        assert.deepEqual(start.gardens, []);
        assert.ok(feedPool.totalCount >= 1, 'the feed pool opened a connection for the delta');
      } finally {
        await store.close();
      }
    });
  });
});
