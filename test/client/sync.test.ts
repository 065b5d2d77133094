import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type PlantChange, PlantStore, PlantStoreError, type SyncPage } from '../../src/client/index.js';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { listed, settled, sorted } from '../helpers/feed.js';

// store.plants.sync against a real listening service: pages of changes until the copy is up to
// date, the next position as the generator's value, and a restart from scratch on 410, said so.

describe('the typed client: plants.sync', { timeout: 60_000 }, () => {
  let h: Harness;
  let base: string;
  before(async () => {
    h = await harness(ENGINES[0]!);
    base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(() => h?.close());

  type Held = Extract<PlantChange, { op: 'upsert' }>['plant'];
  async function run(store: PlantStore, copy: Map<number, Held>, from: string | null, limit?: number) {
    const pages: SyncPage[] = [];
    const sync = store.plants.sync(from, limit === undefined ? {} : { limit });
    for (let r = await sync.next(); ; r = await sync.next()) {
      if (r.done) return { position: r.value, pages };
      pages.push(r.value);
      if (r.value.restarted) copy.clear();
      for (const c of r.value.changes) {
        if (c.op === 'upsert') copy.set(c.id, c.plant);
        else copy.delete(c.id);
      }
    }
  }
  const held = (m: Map<number, Held>) =>
    new Map([...m].map(([id, { id: _id, ...rest }]) => [id, rest as Omit<Held, 'id'>]));

  it('syncs from scratch, then only what changed; a 410 restarts from scratch and says so', async () => {
    const me = await h.user();
    const store = new PlantStore({ url: base, token: me.token });
    const a = await store.create({ name: 'Fern', tag: 'shade' });
    const b = await store.create({ name: 'Ivy' });
    const copy = new Map<number, Held>();
    const first = await run(store, copy, null, 1);
    assert.equal(first.pages.length >= 2, true);
    assert.ok(first.pages.every((p) => !p.restarted && p.changes.length <= 1));
    assert.deepEqual(sorted(held(copy)), sorted(await listed(me)));

    await store.delete(b.id);
    await store.update(a.id, { name: 'Boston fern' }, { ifMatch: '*' });
    await settled(h.store);
    const second = await run(store, copy, first.position);
    assert.deepEqual(
      second.pages.flatMap((p) => p.changes.map((c) => [c.id, c.op])),
      [
        [a.id, 'upsert'],
        [b.id, 'delete'],
      ],
    );
    assert.equal(copy.get(a.id)?.name, 'Boston fern');
    assert.deepEqual(sorted(held(copy)), sorted(await listed(me)));

    // A change, then every event purged: the position has expired; the sync starts again by itself.
    await store.create({ name: 'Aloe' });
    await h.store.purgeEvents(new Date(Date.now() + 60_000));
    copy.set(999_999, { id: 999_999, name: 'stale', garden: 'gdn_x', version: 1 });
    const third = await run(store, copy, second.position);
    assert.equal(third.pages[0]!.restarted, true);
    assert.ok(third.pages.slice(1).every((p) => !p.restarted));
    assert.deepEqual(sorted(held(copy)), sorted(await listed(me)));

    // Another user's position: a 400, as an error.
    const other = new PlantStore({ url: base, token: (await h.user()).token });
    await assert.rejects(
      run(other, new Map(), third.position),
      (e: PlantStoreError) => e instanceof PlantStoreError && e.status === 400,
    );
  });
});
