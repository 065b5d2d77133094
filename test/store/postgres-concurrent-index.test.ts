import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PgStore } from '../../src/store/postgres/store.js';
import { ENGINES, pgAtVersion, withPgDatabase } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';

// A migration's `concurrently` (src/store/migrate.ts): indexes built CONCURRENTLY outside the
// migration's transaction, after it commits (PostgreSQL 16's events_member_position). A new store
// builds it; several instances migrating at once take turns under the advisory lock without the
// build and a waiting instance deadlocking; a store that applied 16 when it built the index inside
// its transaction keeps that index; a build cancelled halfway leaves an INVALID index, which the
// next migrate drops and builds again.

const skip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';
const INDEX = 'events_member_position';

const withDb = withPgDatabase;

/** The index's oid and whether it is valid, or null when there is none. */
async function indexOf(c: pg.Client): Promise<{ oid: number; valid: boolean } | null> {
  const { rows } = await c.query<{ oid: number; valid: boolean }>(
    'SELECT i.indexrelid::int AS oid, i.indisvalid AS valid FROM pg_index i WHERE i.indexrelid = to_regclass($1)',
    [INDEX],
  );
  return rows[0] ?? null;
}

async function migrated(url: string, n = 1): Promise<void> {
  const stores = Array.from({ length: n }, () => new PgStore({ url, poolSize: 2 }));
  try {
    await Promise.all(stores.map((s) => s.migrate()));
  } finally {
    await Promise.all(stores.map((s) => s.close()));
  }
}

describe('postgres indexes built concurrently by the migration runner', { skip }, () => {
  it('migration 16 builds its index outside its transaction, and says it is safe while serving', () => {
    const m = POSTGRES_MIGRATIONS.find((x) => x.version === 16)!;
    assert.equal(m.unsafeWhileServing, undefined);
    assert.doesNotMatch(m.sql, new RegExp(INDEX));
    assert.match(
      m.concurrently?.join('\n') ?? '',
      /CREATE INDEX CONCURRENTLY IF NOT EXISTS events_member_position/,
    );
  });

  it('a new store gets the index, valid, with three instances migrating at once', async () => {
    await withDb(async (url, c) => {
      await migrated(url, 3);
      const index = await indexOf(c);
      assert.equal(index?.valid, true);
      const { rows } = await c.query('SELECT version FROM schema_migrations ORDER BY version');
      assert.equal(rows.length, POSTGRES_MIGRATIONS.length);
    });
  });

  it('a store that applied 16 with the index built in its transaction keeps that index', async () => {
    await withDb(async (url, c) => {
      await pgAtVersion(c, 15);
      // Migration 16 as release 0.5.0 first shipped it: the index inside the transaction.
      await c.query('BEGIN');
      await c.query(`CREATE INDEX ${INDEX} ON events (owner, xid, seq)
        WHERE type IN ('member.added', 'member.removed')`);
      await c.query(POSTGRES_MIGRATIONS[15]!.sql);
      await c.query("INSERT INTO schema_migrations (version, name) VALUES (16, '0016_change_feed')");
      await c.query('COMMIT');
      const before = await indexOf(c);
      assert.equal(before?.valid, true);
      await migrated(url);
      assert.deepEqual(await indexOf(c), before, 'the same index, not built again');
    });
  });

  it('a build cancelled halfway leaves an INVALID index; the next migrate drops it and builds it again', async () => {
    await withDb(async (url, c) => {
      await migrated(url);
      await c.query(`DROP INDEX ${INDEX}`);
      // A writer's transaction still open: CREATE INDEX CONCURRENTLY waits for it, its index
      // already in the catalog, not yet valid. Cancelled there, as an operator's Ctrl-C or a
      // lost connection would stop it.
      const writer = new pg.Client({ connectionString: url });
      await writer.connect();
      try {
        await writer.query('BEGIN');
        await writer.query('LOCK TABLE events IN ROW EXCLUSIVE MODE');
        const store = new PgStore({ url, poolSize: 2 });
        const failed = store.migrate().then(
          () => null,
          (err: Error) => err,
        );
        const pid = await until('the concurrent build to wait for the open writer', async () => {
          const { rows } = await c.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity
             WHERE query LIKE 'CREATE INDEX CONCURRENTLY%' AND wait_event_type = 'Lock'`,
          );
          return rows[0]?.pid;
        });
        await c.query('SELECT pg_cancel_backend($1)', [pid]);
        const err = await failed;
        await store.close();
        assert.ok(err, 'the cancelled build fails its migrate');
        assert.equal((await indexOf(c))?.valid, false, 'an INVALID index is left behind');
        await writer.query('COMMIT');
      } finally {
        await writer.end();
      }
      const invalid = await indexOf(c);
      await migrated(url);
      const rebuilt = await indexOf(c);
      assert.equal(rebuilt?.valid, true);
      assert.notEqual(rebuilt?.oid, invalid?.oid, 'dropped and built again');
    });
  });
});
