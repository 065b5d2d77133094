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
});
