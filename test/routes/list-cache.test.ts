import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Scope } from '../../src/schemas/token.js';
import { PgStore } from '../../src/store/postgres/store.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { type Client, clientAs, type Harness, harness, locationId } from '../helpers/app.js';
import { createPgDatabase, ENGINES, type Engine } from '../helpers/engines.js';
import { home as homeOf } from '../helpers/gardens.js';

const names = (res: { json(): unknown }) => (res.json() as { name: string }[]).map((p) => p.name);

/**
 * A harness on a store of its own whose listPlants calls are counted (the app times the store's
 * methods as it is built, so they cannot be swapped afterwards); `marked` says whether the engine
 * gives list marks, i.e. whether pages are cached at all.
 */
async function countedHarness(engine: Engine) {
  let n = 0;
  let marks = false;
  const counted = await harness({
    ...engine,
    async open() {
      const store = await engine.open();
      const listPlants = store.listPlants;
      store.listPlants = (...args) => {
        n++;
        return listPlants.apply(store, args);
      };
      marks = store.listMarks !== undefined;
      return store;
    },
  });
  return { counted, calls: () => n, marked: () => marks };
}

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
      const { counted, calls, marked } = await countedHarness(engine);
      try {
        const c = await counted.user();
        for (let i = 0; i < 3; i++) await c.create({ name: `s${i}` });
        await c.request({ method: 'GET', url: '/plants' }); // the token is verified and cached
        const before = calls();
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
        assert.equal(calls() - before, marked() ? 1 : 10);
      } finally {
        await counted.close();
      }
    });

    it('a create after every id renews only the last pages; one below the newest, or a delete, renews all', async () => {
      const { counted, calls, marked } = await countedHarness(engine);
      try {
        const c = await counted.user();
        const base = 4_000_000 + Math.floor(Math.random() * 1_000_000) * 10;
        for (const i of [1, 3, 5, 7]) await c.create({ id: base + i, name: `p${i}`, tag: 'k' });
        const get = async (url: string) => {
          const before = calls();
          const res = await c.request({ method: 'GET', url });
          assert.equal(res.statusCode, 200);
          return {
            names: names(res),
            queried: calls() - before,
            link: res.headers.link as string | undefined,
          };
        };
        const first = await get('/plants?limit=2');
        assert.deepEqual(first.names, ['p1', 'p3']);
        const second = `/plants${/<\/plants([^>]*)>/.exec(first.link!)![1]}`;
        assert.deepEqual((await get(second)).names, ['p5', 'p7']);
        assert.deepEqual((await get('/plants?limit=2&tag=k')).names, ['p1', 'p3']);
        // A server-assigned id lands after every page but the last.
        await c.create({ name: 'p9', tag: 'k' });
        const again = await get('/plants?limit=2');
        assert.deepEqual(again.names, ['p1', 'p3']);
        assert.equal(again.link, first.link);
        assert.deepEqual((await get('/plants?limit=2&tag=k')).names, ['p1', 'p3']);
        const last = await get(second);
        assert.deepEqual(last.names, ['p5', 'p7'], 'the page that was last is full, and now has a next');
        assert.ok(last.link, 'and it links to the new plant');
        const third = `/plants${/<\/plants([^>]*)>/.exec(last.link!)![1]}`;
        assert.deepEqual((await get(third)).names, ['p9']);
        if (marked()) {
          assert.equal(again.queried, 0, 'the first page is kept across a create after it');
          assert.equal(last.queried, 1, 'the last page is built again');
        }
        // A client's id below the newest lands inside earlier pages.
        await c.create({ id: base + 2, name: 'p2', tag: 'k' });
        assert.deepEqual((await get('/plants?limit=2')).names, ['p1', 'p2']);
        assert.deepEqual((await get('/plants?limit=2&tag=k')).names, ['p1', 'p2']);
        // A delete renews every page of the owner.
        assert.equal((await c.request({ method: 'DELETE', url: `/plants/${base + 1}` })).statusCode, 204);
        assert.deepEqual((await get('/plants?limit=2')).names, ['p2', 'p3']);
        assert.deepEqual((await get('/plants?limit=2&tag=k')).names, ['p2', 'p3']);
        // Another user's writes leave this user's pages alone.
        const other = await counted.user();
        await other.create({ name: 'theirs' });
        const kept = await get('/plants?limit=2');
        assert.deepEqual(kept.names, ['p2', 'p3']);
        if (marked()) assert.equal(kept.queried, 0);
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
    const garden = await homeOf(other, c.user);
    await other.createPlant({ id: null, owner: c.user, garden, name: 'from elsewhere', tag: null });
    await other.close();
    assert.deepEqual(names(await c.request({ method: 'GET', url: '/plants' })), ['from elsewhere']);
  });

  it('a delete and a create below the newest through another connection reach a kept first page', async () => {
    const c = await h.user();
    const ids: number[] = [];
    for (let i = 0; i < 4; i++) ids.push(locationId(await c.create({ name: `n${i}` })));
    const first = () => c.request({ method: 'GET', url: '/plants?limit=2' });
    assert.deepEqual(names(await first()), ['n0', 'n1']);
    assert.deepEqual(names(await first()), ['n0', 'n1']);
    const other = new SqliteStore({ path, durability: 'full' });
    assert.deepEqual(await other.deletePlant(ids[0]!, null), { ok: true });
    assert.deepEqual(names(await first()), ['n1', 'n2']);
    const garden = await homeOf(other, c.user);
    await other.createPlant({ id: ids[1]! + 0, owner: c.user, garden, name: 'dup', tag: null }); // taken: nothing changes
    await other.createPlant({ id: ids[0]!, owner: c.user, garden, name: 'back', tag: null });
    await other.close();
    assert.deepEqual(names(await first()), ['back', 'n1']);
  });

  it('a plant deleted through another connection is gone from the next single read', async () => {
    const c = await h.user();
    const id = locationId(await c.create({ name: 'doomed' }));
    assert.equal((await c.request({ method: 'GET', url: `/plants/${id}` })).statusCode, 200);
    assert.equal((await c.request({ method: 'GET', url: `/plants/${id}` })).statusCode, 200);
    const other = new SqliteStore({ path, durability: 'full' });
    assert.deepEqual(await other.deletePlant(id, null), { ok: true });
    await other.close();
    assert.equal((await c.request({ method: 'GET', url: `/plants/${id}` })).statusCode, 404);
  });
});

describe('list pages and writes from another instance (PostgreSQL)', { skip: ENGINES[1]!.skip }, () => {
  let h: Harness;
  let db: { url: string; drop(): Promise<void> };
  before(async () => {
    db = await createPgDatabase();
    h = await harness({
      ...ENGINES[1]!,
      async open() {
        const s = new PgStore({ url: db.url, poolSize: 2 });
        await s.migrate();
        return s;
      },
    });
  });
  after(async () => {
    await h?.close();
    await db?.drop();
  });

  it('a create and a delete through another instance reach a kept page', async () => {
    const c = await h.user();
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) ids.push(locationId(await c.create({ name: `m${i}`, tag: 'k' })));
    const first = () => c.request({ method: 'GET', url: '/plants?limit=2&tag=k' });
    const all = () => c.request({ method: 'GET', url: '/plants' });
    assert.deepEqual(names(await first()), ['m0', 'm1']);
    assert.deepEqual(names(await all()), ['m0', 'm1', 'm2']);
    const other = new PgStore({ url: db.url, poolSize: 1 });
    try {
      const garden = await homeOf(other, c.user);
      await other.createPlant({ id: null, owner: c.user, garden, name: 'm3', tag: 'k' });
      assert.deepEqual(names(await all()), ['m0', 'm1', 'm2', 'm3'], 'the last page shows it');
      assert.deepEqual(names(await first()), ['m0', 'm1']);
      assert.deepEqual(await other.deletePlant(ids[0]!, null), { ok: true });
      assert.deepEqual(names(await first()), ['m1', 'm2'], 'a delete elsewhere renews the kept page');
    } finally {
      await other.close();
    }
  });
});

describe('list pages kept by two app instances on one PostgreSQL', { skip: ENGINES[1]!.skip }, () => {
  // Two instances, each with its own store (pool) and list cache; the pages instance b builds are
  // counted, so the test sees that b serves from its cache and that each write through a renews it.
  let a: Harness;
  let b: Awaited<ReturnType<typeof countedHarness>>;
  let db: { url: string; drop(): Promise<void> };
  before(async () => {
    db = await createPgDatabase();
    const open = async () => {
      const s = new PgStore({ url: db.url, poolSize: 2 });
      await s.migrate();
      return s;
    };
    a = await harness({ ...ENGINES[1]!, open });
    b = await countedHarness({ ...ENGINES[1]!, open });
  });
  after(async () => {
    await a?.close();
    await b?.counted.close();
    await db?.drop();
  });

  const JSON_TYPE = { 'content-type': 'application/json' };
  // The same user on each instance (a token made through each).
  const both = async (scopes?: Scope[]) => {
    const onA = await a.user(scopes);
    return { a: onA, b: await clientAs(b.counted, onA.user, scopes) };
  };

  it('every kind of write through one instance is in the next list through the other', async () => {
    const alice = await both();
    const bob = await both();
    const admin = await a.user(['plants:admin']);
    const ids: number[] = [];
    for (let i = 0; i < 4; i++) ids.push(locationId(await alice.a.create({ name: `a${i}`, tag: 'k' })));
    const home = ((await alice.a.request({ method: 'GET', url: '/gardens' })).json() as { id: string }[])[0]!
      .id;
    // Each list through b, twice: the second must come from b's cache while nothing was written.
    const kept = async (c: Client, url: string) => {
      const first = await c.request({ method: 'GET', url });
      const n = b.calls();
      const again = await c.request({ method: 'GET', url });
      assert.equal(again.body, first.body);
      assert.equal(b.calls(), n, `${url}: the repeat is served from b's cache`);
      return first.statusCode === 200 ? names(first) : first.statusCode;
    };
    const firstPage = '/plants?limit=2';
    const lists = async () => ({
      first: await kept(alice.b, firstPage),
      all: await kept(alice.b, '/plants'),
      tag: await kept(alice.b, '/plants?tag=k'),
      garden: await kept(alice.b, `/gardens/${home}/plants?limit=2`),
    });
    assert.deepEqual(await lists(), {
      first: ['a0', 'a1'],
      all: ['a0', 'a1', 'a2', 'a3'],
      tag: ['a0', 'a1', 'a2', 'a3'],
      garden: ['a0', 'a1'],
    });

    // A create (server id, after every other): the last pages show it, the others are kept.
    const a4 = locationId(await alice.a.create({ name: 'a4', tag: 'k' }));
    const n = b.calls();
    assert.deepEqual(await kept(alice.b, firstPage), ['a0', 'a1']);
    assert.equal(b.calls(), n, 'a first page that is not the last survives a create after it');
    assert.deepEqual(await kept(alice.b, '/plants'), ['a0', 'a1', 'a2', 'a3', 'a4']);
    assert.deepEqual(await kept(alice.b, '/plants?tag=k'), ['a0', 'a1', 'a2', 'a3', 'a4']);

    // PATCH: a name, then a tag.
    const patch = (id: number, body: unknown) =>
      alice.a.request({
        method: 'PATCH',
        url: `/plants/${id}`,
        headers: { 'content-type': 'application/merge-patch+json', 'if-match': '*' },
        payload: JSON.stringify(body),
      });
    assert.equal((await patch(ids[1]!, { name: 'renamed' })).statusCode, 200);
    assert.deepEqual(await kept(alice.b, firstPage), ['a0', 'renamed']);
    assert.equal((await patch(ids[0]!, { tag: null })).statusCode, 200);
    assert.deepEqual(await kept(alice.b, '/plants?tag=k'), ['renamed', 'a2', 'a3', 'a4']);
    assert.deepEqual(await kept(alice.b, `/gardens/${home}/plants?limit=2`), ['a0', 'renamed']);

    // A delete, by the owner and by an admin.
    assert.equal((await alice.a.request({ method: 'DELETE', url: `/plants/${ids[0]}` })).statusCode, 204);
    assert.deepEqual(await kept(alice.b, firstPage), ['renamed', 'a2']);
    assert.equal((await admin.request({ method: 'DELETE', url: `/plants/${a4}` })).statusCode, 204);
    assert.deepEqual(await kept(alice.b, '/plants'), ['renamed', 'a2', 'a3']);

    // A client's id below the newest lands inside the first page.
    assert.equal((await alice.a.create({ id: ids[0]!, name: 'back', tag: 'k' })).statusCode, 201);
    assert.deepEqual(await kept(alice.b, firstPage), ['back', 'renamed']);
    assert.deepEqual(await kept(alice.b, '/plants?tag=k'), ['back', 'renamed', 'a2', 'a3']);

    // Membership: bob is added to alice's home garden, then removed.
    assert.deepEqual(await kept(bob.b, '/plants'), []);
    const member = (method: 'PUT' | 'DELETE') =>
      alice.a.request({
        method,
        url: `/gardens/${home}/members/${bob.a.user}`,
        ...(method === 'PUT' ? { headers: JSON_TYPE, payload: JSON.stringify({ role: 'viewer' }) } : {}),
      });
    assert.equal((await member('PUT')).statusCode, 201);
    assert.deepEqual(await kept(bob.b, '/plants'), ['back', 'renamed', 'a2', 'a3']);
    assert.deepEqual(await kept(bob.b, `/gardens/${home}/plants?limit=2`), ['back', 'renamed']);
    // Bob's own plant: his list now merges two gardens, and a write in either renews it.
    assert.equal((await bob.a.create({ name: 'b0' })).statusCode, 201);
    assert.deepEqual(await kept(bob.b, '/plants?limit=5'), ['back', 'renamed', 'a2', 'a3', 'b0']);
    assert.equal((await patch(ids[2]!, { name: 'a2 again' })).statusCode, 200);
    assert.deepEqual(await kept(bob.b, '/plants?limit=3'), ['back', 'renamed', 'a2 again']);
    assert.equal((await member('DELETE')).statusCode, 204);
    assert.deepEqual(await kept(bob.b, '/plants?limit=5'), ['b0']);
    assert.equal(await kept(bob.b, `/gardens/${home}/plants?limit=2`), 404);

    // A garden made, shared and filled through a, then emptied and deleted.
    const made = await alice.a.request({
      method: 'POST',
      url: '/gardens',
      headers: JSON_TYPE,
      payload: JSON.stringify({ name: 'shared' }),
    });
    assert.equal(made.statusCode, 201);
    const gid = (made.json() as { id: string }).id;
    const share = await alice.a.request({
      method: 'PUT',
      url: `/gardens/${gid}/members/${bob.a.user}`,
      headers: JSON_TYPE,
      payload: JSON.stringify({ role: 'editor' }),
    });
    assert.equal(share.statusCode, 201);
    assert.deepEqual(await kept(bob.b, '/plants?limit=5'), ['b0']);
    const s0 = await alice.a.request({
      method: 'POST',
      url: `/gardens/${gid}/plants`,
      headers: JSON_TYPE,
      payload: JSON.stringify({ name: 's0' }),
    });
    assert.equal(s0.statusCode, 201);
    assert.deepEqual(await kept(bob.b, '/plants?limit=5'), ['b0', 's0']);
    assert.deepEqual(await kept(bob.b, `/gardens/${gid}/plants`), ['s0']);
    assert.equal(
      (await alice.a.request({ method: 'DELETE', url: `/plants/${locationId(s0)}` })).statusCode,
      204,
    );
    assert.deepEqual(await kept(bob.b, `/gardens/${gid}/plants`), []);
    assert.equal((await alice.a.request({ method: 'DELETE', url: `/gardens/${gid}` })).statusCode, 204);
    assert.deepEqual(await kept(bob.b, '/plants?limit=5'), ['b0']);
    assert.equal(await kept(bob.b, `/gardens/${gid}/plants`), 404);
  });

  it('a write through another instance to a garden of a several-garden list renews even its first page', async () => {
    // Ids are global but marks are per garden: a server id committed in one garden may land below
    // another garden's newest id, inside an earlier page of the merged list.
    const alice = await both();
    const bob = await both();
    const home = async (c: Client) =>
      ((await c.request({ method: 'GET', url: '/gardens' })).json() as { id: string }[])[0]!.id;
    await alice.a.create({ name: 'x0' });
    await bob.a.create({ name: 'y0' });
    const aliceHome = await home(alice.a);
    const put = await alice.a.request({
      method: 'PUT',
      url: `/gardens/${aliceHome}/members/${bob.a.user}`,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ role: 'editor' }),
    });
    assert.equal(put.statusCode, 201);
    const first = () => bob.b.request({ method: 'GET', url: '/plants?limit=1' });
    assert.deepEqual(names(await first()), ['x0']);
    await alice.a.create({ name: 'x1' });
    assert.deepEqual(names(await first()), ['x0']);
    const n = b.calls();
    await first();
    assert.equal(b.calls(), n, 'kept while nothing is written');
    await bob.a.create({ name: 'y1' });
    await first();
    assert.equal(b.calls(), n + 1, 'a create in either garden renews every page of the merged list');
  });
});
