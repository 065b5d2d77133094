import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

const names = (res: { json(): unknown }) => (res.json() as { name: string }[]).map((p) => p.name);

for (const engine of ENGINES) {
  describe(`list pages stay exact under writes (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await harness(engine);
    });
    after(() => h?.close());

    it('a repeated page is byte-for-byte the same, Link header included', async () => {
      const c = await h.user();
      for (let i = 0; i < 3; i++) await c.create({ name: `r${i}`, tag: 'k' });
      const a = await c.request({ method: 'GET', url: '/plants?limit=2&tag=k' });
      const b = await c.request({ method: 'GET', url: '/plants?limit=2&tag=k' });
      assert.equal(b.body, a.body);
      assert.equal(b.headers.link, a.headers.link);
      assert.equal(b.headers['content-type'], 'application/json; charset=utf-8');
    });

    it('requests that miss the cache together build the page once', async () => {
      // A store of its own whose listPlants calls are counted (the app times the store's methods
      // as it is built, so they cannot be swapped afterwards).
      let calls = 0;
      let versioned = false;
      const counted = await harness({
        ...engine,
        async open() {
          const store = await engine.open();
          const listPlants = store.listPlants;
          store.listPlants = (...args) => {
            calls++;
            return listPlants.apply(store, args);
          };
          versioned = store.listVersion !== undefined;
          return store;
        },
      });
      try {
        const c = await counted.user();
        for (let i = 0; i < 3; i++) await c.create({ name: `s${i}` });
        await c.request({ method: 'GET', url: '/plants' }); // the token is verified and cached
        calls = 0;
        const all = await Promise.all(
          Array.from({ length: 10 }, () => c.request({ method: 'GET', url: '/plants?limit=2' })),
        );
        for (const res of all) {
          assert.equal(res.statusCode, 200);
          assert.deepEqual(names(res), ['s0', 's1']);
          assert.ok(res.headers.link);
          assert.equal(res.headers.link, all[0]!.headers.link);
        }
        // Engines that cannot version their pages (PostgreSQL) never cache, so they query each time.
        assert.equal(calls, versioned ? 1 : 10);
      } finally {
        await counted.close();
      }
    });

    it('a cached page with non-ASCII names keeps its UTF-8 bytes and Content-Length', async () => {
      const c = await h.user();
      await c.create({ name: 'Fougère 🌿', tag: 'ünï' });
      for (let i = 0; i < 2; i++) {
        const res = await c.request({ method: 'GET', url: '/plants' });
        assert.deepEqual(res.json(), [{ name: 'Fougère 🌿', tag: 'ünï' }]);
        assert.equal(Number(res.headers['content-length']), Buffer.byteLength(res.body));
        assert.equal(Buffer.byteLength(res.body), Buffer.byteLength('[{"name":"Fougère 🌿","tag":"ünï"}]'));
      }
    });

    it('creates and deletes show up in the very next list, own and admin’s', async () => {
      const c = await h.user();
      const admin = await h.user(['plants:admin']);
      const tag = `t-${c.user}`;
      const list = () => c.request({ method: 'GET', url: '/plants' });
      const adminList = () => admin.request({ method: 'GET', url: `/plants?tag=${tag}` });
      assert.deepEqual(names(await list()), []);
      assert.deepEqual(names(await adminList()), []);
      const id = locationId(await c.create({ name: 'fresh', tag }));
      assert.deepEqual(names(await list()), ['fresh']);
      assert.deepEqual(names(await adminList()), ['fresh']);
      assert.equal((await admin.request({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 204);
      assert.deepEqual(names(await list()), [], 'an admin’s delete reaches the owner’s page');
      assert.deepEqual(names(await adminList()), []);
    });

    it('a single read follows own deletes, an admin’s delete and a re-create with the same id', async () => {
      const c = await h.user();
      const admin = await h.user(['plants:admin']);
      const read = (id: number, who = c) => who.request({ method: 'GET', url: `/plants/${id}` });
      const id = locationId(await c.create({ name: 'first' }));
      for (let i = 0; i < 2; i++) assert.deepEqual((await read(id)).json(), { name: 'first' });
      assert.deepEqual((await read(id, admin)).json(), { name: 'first' });
      assert.equal((await c.request({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 204);
      assert.equal((await read(id)).statusCode, 404, 'own delete');
      assert.equal((await read(id, admin)).statusCode, 404, 'the admin’s view too');
      assert.equal((await c.create({ id, name: 'second', tag: 'x' })).statusCode, 201);
      assert.deepEqual((await read(id)).json(), { name: 'second', tag: 'x' });
      assert.deepEqual((await read(id, admin)).json(), { name: 'second', tag: 'x' });
      assert.equal((await admin.request({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 204);
      assert.equal((await read(id)).statusCode, 404, 'an admin’s delete reaches the owner’s read');
      const other = await h.user();
      assert.equal((await read(locationId(await other.create({ name: 'theirs' })))).statusCode, 404);
    });
  });
}

describe('list pages and writes from another process (SQLite file)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-cache-'));
  const path = join(dir, 'shared.db');
  let h: Harness;
  before(async () => {
    h = await harness({
      ...ENGINES[0]!,
      async open() {
        const s = new SqliteStore({ path, durability: 'full' });
        await s.migrate();
        return s;
      },
    });
  });
  after(async () => {
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a plant written through another connection appears in the next list', async () => {
    const c = await h.user();
    assert.deepEqual(names(await c.request({ method: 'GET', url: '/plants' })), []);
    const other = new SqliteStore({ path, durability: 'full' });
    await other.createPlant({ id: null, owner: c.user, name: 'from elsewhere', tag: null });
    await other.close();
    assert.deepEqual(names(await c.request({ method: 'GET', url: '/plants' })), ['from elsewhere']);
  });

  it('a plant deleted through another connection is gone from the next single read', async () => {
    const c = await h.user();
    const id = locationId(await c.create({ name: 'doomed' }));
    assert.equal((await c.request({ method: 'GET', url: `/plants/${id}` })).statusCode, 200);
    assert.equal((await c.request({ method: 'GET', url: `/plants/${id}` })).statusCode, 200);
    const other = new SqliteStore({ path, durability: 'full' });
    assert.equal(await other.deletePlant(id, null), true);
    await other.close();
    assert.equal((await c.request({ method: 'GET', url: `/plants/${id}` })).statusCode, 404);
  });
});
