// What `migrate --dry-run`, /healthz and `serve` read of a store's schema, on both engines: the
// pending migrations without applying any, the schema version, and a schema newer than this
// release knows refused by name.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openStore } from '../../src/store/index.js';
import { NewerSchemaError } from '../../src/store/migrate.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { ENGINES, recordMigration } from '../helpers/engines.js';

for (const engine of ENGINES)
  describe(`the schema's version and pending migrations (${engine.name})`, { skip: engine.skip }, () => {
    const known = engine.name === 'sqlite' ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS;

    it('lists every migration as pending on a new store and applies none; after migrate, none pend', async () => {
      const db = await engine.database();
      const store = await openStore({ url: db.url, durability: 'full', poolSize: 2 });
      try {
        const pending = await store.migrationsPending();
        assert.deepEqual(
          pending.map((m) => m.name),
          known.map((m) => m.name),
        );
        assert.equal(await store.schemaVersion(), 0);
        // Each says whether it is safe while the previous release serves, as its definition does.
        for (const [i, m] of pending.entries())
          assert.equal(m.unsafeWhileServing, known[i]!.unsafeWhileServing, m.name);
        // Listing applied nothing: migrate then applies every one.
        assert.equal((await store.migrate()).length, known.length);
        assert.deepEqual(await store.migrationsPending(), []);
        assert.equal(await store.schemaVersion(), known.length);
      } finally {
        await store.close();
        await db.drop();
      }
    });

    it('a schema newer than this release knows: the version reads it, listing and migrating refuse it by name', async () => {
      const db = await engine.database();
      const store = await openStore({ url: db.url, durability: 'full', poolSize: 2 });
      try {
        await store.migrate();
        const newer = known.length + 1;
        await recordMigration(db.url, newer);
        assert.equal(await store.schemaVersion(), newer);
        const refused = (err: unknown) =>
          err instanceof NewerSchemaError && err.schema === newer && err.known === known.length;
        await assert.rejects(store.migrationsPending(), refused);
        await assert.rejects(store.migrate(), refused);
      } finally {
        await store.close();
        await db.drop();
      }
    });
  });
