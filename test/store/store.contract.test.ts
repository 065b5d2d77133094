import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { MAX_PLANT_ID } from '../../src/schemas/plant.js';
import type { Store, TokenRecord } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';

const owner = () => `owner-${randomUUID()}`;
const idemOpts = (now = new Date()) => ({ now, staleAfterMs: 60_000, retainMs: 86_400_000 });

for (const engine of ENGINES) {
  describe(`store contract: ${engine.name}`, { skip: engine.skip }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(async () => {
      await store?.close();
    });

    const create = async (o: string, id: number | null = null, tag: string | null = null, name = 'Fern') => {
      const r = await store.createPlant({ id, owner: o, name, tag });
      assert.ok('created' in r, 'expected a created plant');
      return r.created;
    };

    it('migrate is idempotent', async () => {
      assert.deepEqual(await store.migrate(), []);
    });

    it('list marks: a create after the newest id moves top only; one below it, or a delete, moves reorder', async () => {
      const marks = store.listMarks?.bind(store);
      if (!marks) {
        // PostgreSQL keeps none: a per-owner row updated by every create serialised one owner's
        // creates (docs/benchmarks.md), so its pages are not cached.
        assert.equal(engine.name, 'postgres');
        return;
      }
      const o = owner();
      const other = owner();
      assert.deepEqual(await marks(o, null), { reorder: 0, top: 0 });
      const a = await create(o, null, 'green');
      assert.deepEqual(await marks(o, null), { reorder: 0, top: a.id });
      assert.deepEqual(await marks(o, 'green'), { reorder: 0, top: a.id });
      assert.deepEqual(await marks(o, 'red'), { reorder: 0, top: 0 });
      const b = await create(o, null, null);
      assert.deepEqual(await marks(o, null), { reorder: 0, top: b.id });
      assert.deepEqual(await marks(o, 'green'), { reorder: 0, top: a.id }, 'untagged: the tag keeps its top');
      await create(other);
      assert.deepEqual(await marks(o, null), { reorder: 0, top: b.id }, 'another owner changes nothing');
      assert.equal(await store.deletePlant(a.id, o), true);
      assert.deepEqual(await marks(o, null), { reorder: 1, top: b.id });
      assert.deepEqual(await marks(o, 'green'), { reorder: 1, top: a.id });
      await create(o, a.id, 'green'); // the freed id, below top
      assert.deepEqual(await marks(o, null), { reorder: 2, top: b.id });
      // Everyone's lists have marks of their own.
      const all = await marks(null, null);
      assert.ok(all.top >= b.id);
      assert.ok(all.reorder >= 2);
    });

    it('server-assigned ids increase and are not reused after a delete', async () => {
      const o = owner();
      const a = await create(o);
      const b = await create(o);
      assert.ok(b.id > a.id);
      assert.equal(await store.deletePlant(b.id, o), true);
      const c = await create(o);
      assert.ok(c.id > b.id, 'a deleted id is never handed out again');
    });

    it('server-assigned ids jump past a client-chosen id', async () => {
      const o = owner();
      const a = await create(o);
      const chosen = await create(o, a.id + 1000);
      assert.equal(chosen.id, a.id + 1000);
      const next = await create(o);
      assert.ok(next.id > chosen.id);
    });

    it('a client may re-create a deleted id; an existing id reports exists', async () => {
      const o = owner();
      const p = await create(o, null, 'x', 'Aloe');
      assert.deepEqual(await store.createPlant({ id: p.id, owner: owner(), name: 'Other', tag: null }), {
        exists: true,
      });
      assert.equal(await store.deletePlant(p.id, o), true);
      const again = await create(owner(), p.id);
      assert.equal(again.id, p.id);
    });

    it('stores name and tag exactly, including spaces and odd Unicode', async () => {
      const o = owner();
      const name = '  Ficus  lyrata 🌿 \u00e9\u0301 ';
      const p = await create(o, null, ' 彩 ', name);
      assert.deepEqual(await store.getPlant(p.id), { id: p.id, owner: o, name, tag: ' 彩 ' });
      assert.equal(await store.getPlant(MAX_PLANT_ID), null);
    });

    it('lists by id ascending after a cursor, filtered by owner and tag', async () => {
      const o = owner();
      const other = owner();
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) ids.push((await create(o, null, i % 2 ? 'odd' : 'even', `p${i}`)).id);
      await create(other, null, 'odd');
      const all = await store.listPlants({ owner: o, tag: null, afterId: 0, limit: 100 });
      assert.deepEqual(
        all.map((p) => p.id),
        ids,
      );
      const page = await store.listPlants({ owner: o, tag: null, afterId: ids[1]!, limit: 2 });
      assert.deepEqual(
        page.map((p) => p.id),
        [ids[2], ids[3]],
      );
      const odd = await store.listPlants({ owner: o, tag: 'odd', afterId: 0, limit: 100 });
      assert.deepEqual(
        odd.map((p) => p.name),
        ['p1', 'p3'],
      );
      const everyone = await store.listPlants({ owner: null, tag: 'odd', afterId: ids[0]!, limit: 1000 });
      assert.ok(everyone.some((p) => p.owner === other));
      assert.ok(everyone.every((p, i) => i === 0 || p.id > everyone[i - 1]!.id));
    });

    it('deletes only what the owner owns, unless owner is null', async () => {
      const o = owner();
      const p = await create(o);
      assert.equal(await store.deletePlant(p.id, owner()), false);
      assert.ok(await store.getPlant(p.id));
      assert.equal(await store.deletePlant(p.id, null), true);
      assert.equal(await store.deletePlant(p.id, null), false);
      assert.equal(await store.getPlant(p.id), null);
    });

    it('idempotency keys: claim, in flight, mismatch, done, release, stale takeover, expiry', async () => {
      const ref = { user: owner(), key: 'k-1' };
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'h1', idemOpts()), { state: 'claimed' });
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'h1', idemOpts()), { state: 'in_flight' });
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'h2', idemOpts()), { state: 'mismatch' });
      const r = await store.createPlant({ id: null, owner: ref.user, name: 'Idem', tag: null }, ref);
      assert.ok('created' in r);
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'h1', idemOpts()), {
        state: 'done',
        outcome: { status: 201, plantId: r.created.id },
      });
      // The same key for another user is another key.
      assert.deepEqual(await store.claimIdempotencyKey({ ...ref, user: owner() }, 'h9', idemOpts()), {
        state: 'claimed',
      });

      const ref2 = { user: ref.user, key: 'k-2' };
      await store.claimIdempotencyKey(ref2, 'h', idemOpts());
      await store.releaseIdempotencyKey(ref2);
      assert.deepEqual(await store.claimIdempotencyKey(ref2, 'other', idemOpts()), { state: 'claimed' });
      const later = new Date(Date.now() + 61_000);
      assert.deepEqual(await store.claimIdempotencyKey(ref2, 'other', idemOpts(later)), { state: 'claimed' });

      const conflict = await store.createPlant(
        { id: r.created.id, owner: ref.user, name: 'x', tag: null },
        ref2,
      );
      assert.deepEqual(conflict, { exists: true });
      assert.deepEqual(await store.claimIdempotencyKey(ref2, 'other', idemOpts()), {
        state: 'done',
        outcome: { status: 409, plantId: null },
      });
      const dayLater = new Date(Date.now() + 86_400_001);
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'new', idemOpts(dayLater)), { state: 'claimed' });
      assert.ok((await store.purgeIdempotencyKeys(dayLater)) >= 1);
    });

    it('tokens: insert, find by hash, list by user, revoke once', async () => {
      const user = owner();
      const t: TokenRecord = {
        id: `tok_${randomUUID()}`,
        user,
        name: 'ci',
        scopes: ['plants:read', 'plants:admin'],
        hash: randomUUID().replace(/-/g, ''),
        createdAt: new Date(1_700_000_000_000),
        expiresAt: new Date(1_800_000_000_000),
        revokedAt: null,
      };
      await store.insertToken(t);
      assert.deepEqual(await store.findTokenByHash(t.hash), t);
      assert.equal(await store.findTokenByHash('nope'), null);
      assert.deepEqual(await store.listTokens(user), [t]);
      assert.ok((await store.listTokens(null)).some((x) => x.id === t.id));
      const at = new Date(1_750_000_000_000);
      assert.equal(await store.revokeToken(t.id, at), true);
      assert.equal(await store.revokeToken(t.id, new Date()), false);
      assert.equal(await store.revokeToken('tok_missing', new Date()), false);
      assert.deepEqual((await store.findTokenByHash(t.hash))?.revokedAt, at);
    });

    it('ping answers', async () => {
      await store.ping();
    });
  });
}
