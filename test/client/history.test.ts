import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PlantStore, type PlantStoreError } from '../../src/client/index.js';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

// store.plants.history, store.gardens.activity and store.trash against a real listening service:
// every page read through Link, newest first, as async iterators; the trash's restore (a new ETag,
// an Idempotency-Key replayed) and purge, refusals as PlantStoreErrors.

describe('the typed client: history, activity and the trash', { timeout: 60_000 }, () => {
  let h: Harness;
  let base: string;
  before(async () => {
    h = await harness(ENGINES[0]!);
    base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(() => h?.close());

  const all = async <T>(it: AsyncIterable<T>) => {
    const got: T[] = [];
    for await (const x of it) got.push(x);
    return got;
  };

  it('a plant history and a garden activity, every page, newest first; type filters; 404s as errors', async () => {
    const owner = await h.user();
    const friend = await h.user();
    const store = new PlantStore({ url: base, token: owner.token });
    const gid = (await store.gardens.create('Shared')).id;
    await store.gardens.share(gid, friend.user, 'viewer');
    const made = await store.create({ name: 'Fern' }, { garden: gid });
    for (const name of ['A', 'B', 'C']) await store.update(made.id, { name }, { ifMatch: '*' });
    await store.delete(made.id);

    const history = await all(store.plants.history(made.id, { limit: 2 }));
    assert.deepEqual(
      history.map((e) => e.type),
      ['plant.deleted', 'plant.updated', 'plant.updated', 'plant.updated', 'plant.created'],
    );
    assert.ok(history.every((e) => e.actor === owner.user && e.id.startsWith('evt_')));

    const viewer = new PlantStore({ url: base, token: friend.token });
    const activity = await all(viewer.gardens.activity(gid, { limit: 3 }));
    assert.equal(activity.length, 6);
    assert.equal(activity.at(-1)!.type, 'member.added');
    const some = await all(
      viewer.gardens.activity(gid, { type: ['plant.created', 'member.added'], limit: 1 }),
    );
    assert.deepEqual(
      some.map((e) => e.type),
      ['plant.created', 'member.added'],
    );

    // A page at a time: each page's `next` reads the one after it, the last has none.
    const first = await store.plants.historyPage(made.id, { limit: 3 });
    assert.deepEqual(
      first.events.map((e) => e.type),
      ['plant.deleted', 'plant.updated', 'plant.updated'],
    );
    assert.ok(first.next);
    const second = await store.plants.historyPage(made.id, { next: first.next });
    assert.deepEqual(
      second.events.map((e) => e.type),
      ['plant.updated', 'plant.created'],
    );
    assert.equal(second.next, null);
    const members = await viewer.gardens.activityPage(gid, { type: ['member.added'] });
    assert.deepEqual(
      members.events.map((e) => e.type),
      ['member.added'],
    );
    assert.equal(members.next, null);

    const stranger = new PlantStore({ url: base, token: (await h.user()).token });
    await assert.rejects(all(stranger.plants.history(made.id)), (e: PlantStoreError) => e.status === 404);
    await assert.rejects(all(stranger.gardens.activity(gid)), (e: PlantStoreError) => e.status === 404);
  });

  it('lists every page, restores with a new ETag (a key replays), purges; 404 and 409 as errors', async () => {
    const owner = await h.user();
    const store = new PlantStore({ url: base, token: owner.token });
    const gid = (await store.gardens.create('Bin')).id;
    const made = [];
    for (const name of ['A', 'B', 'C']) made.push(await store.create({ name, tag: 't' }, { garden: gid }));
    for (const p of made) await store.delete(p.id);

    const listed = await all(store.trash.list({ garden: gid, limit: 2 }));
    assert.deepEqual(new Set(listed.map((t) => t.id)), new Set(made.map((p) => p.id)));
    assert.ok(listed.every((t) => t.garden === gid && t.deletedBy === owner.user && t.tag === 't'));
    const page = await store.trash.page({ garden: gid, limit: 2 });
    assert.equal(page.plants.length, 2);
    assert.match(page.next!, /^\/trash\?limit=2&cursor=/);

    const [a, b, c] = made;
    const key = `k-${a!.id}`;
    const back = await store.trash.restore(a!.id, { idempotencyKey: key });
    assert.deepEqual({ id: back.id, name: back.name, tag: back.tag }, { id: a!.id, name: 'A', tag: 't' });
    assert.notEqual(back.etag, a!.etag);
    assert.equal((await store.trash.restore(a!.id, { idempotencyKey: key })).etag, back.etag);
    assert.equal((await store.get(a!.id)).etag, back.etag);

    await store.trash.purge(b!.id);
    await assert.rejects(store.trash.restore(b!.id), (e: PlantStoreError) => e.status === 404);
    await assert.rejects(store.trash.purge(b!.id), (e: PlantStoreError) => e.status === 404);
    await store.create({ id: c!.id, name: 'Taker' }, { garden: gid });
    await assert.rejects(
      store.trash.restore(c!.id),
      (e: PlantStoreError) => e.status === 409 && e.code === 'plant_exists',
    );
    const stranger = new PlantStore({ url: base, token: (await h.user()).token });
    await assert.rejects(all(stranger.trash.list({ garden: gid })), (e: PlantStoreError) => e.status === 404);
    assert.deepEqual(await all(stranger.trash.list()), []);
  });

  it('the trash: pages, every page, restore with a new ETag, 409 when the id was taken, purge, 404 after', async () => {
    const owner = await h.user();
    const store = new PlantStore({ url: base, token: owner.token });
    const ids: number[] = [];
    for (const name of ['A', 'B', 'C']) {
      const made = await store.create({ name, tag: 'x' });
      ids.push(made.id);
      await store.delete(made.id);
    }
    const first = await store.trash.page({ limit: 2 });
    assert.deepEqual(
      first.plants.map((t) => t.name),
      ['C', 'B'],
    );
    assert.ok(first.next);
    const second = await store.trash.page({ next: first.next });
    assert.deepEqual(
      second.plants.map((t) => [t.id, t.name, t.deletedBy]),
      [[ids[0], 'A', owner.user]],
    );
    assert.equal(second.next, null);
    const names = [];
    for await (const t of store.trash.list({ limit: 1 })) names.push(t.name);
    assert.deepEqual(names, ['C', 'B', 'A']);

    const back = await store.trash.restore(ids[0]!, { idempotencyKey: 'restore-a' });
    assert.deepEqual({ name: back.name, tag: back.tag }, { name: 'A', tag: 'x' });
    assert.match(back.etag, /^"/);
    assert.equal((await store.get(ids[0]!)).etag, back.etag);

    await store.create({ id: ids[1]!, name: 'Taken' });
    await assert.rejects(
      store.trash.restore(ids[1]!),
      (e: PlantStoreError) => e.status === 409 && e.code === 'plant_exists',
    );
    await store.trash.purge(ids[2]!);
    await assert.rejects(store.trash.restore(ids[2]!), (e: PlantStoreError) => e.status === 404);
    assert.deepEqual(
      (await store.trash.page()).plants.map((t) => t.name),
      ['B'],
    );
  });
});
