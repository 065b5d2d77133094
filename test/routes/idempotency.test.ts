import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Store } from '../../src/store/store.js';
import { errorBody, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

for (const engine of ENGINES) {
  describe(`Idempotency-Key on POST /plants (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await harness(engine);
    });
    after(() => h?.close());

    it('the same key and body replay the first response and create nothing more', async () => {
      const c = await h.user();
      const key = { 'idempotency-key': 'order-1' };
      const first = await c.create({ name: 'Once', tag: 't' }, key);
      assert.equal(first.statusCode, 201);
      // The same JSON value, keys in another order.
      const again = await c.create({ tag: 't', name: 'Once' }, key);
      assert.equal(again.statusCode, 201);
      assert.deepEqual(again.json(), first.json());
      assert.equal(again.headers.location, first.headers.location);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal((await c.request({ method: 'GET', url: '/plants' })).json().length, 1);
    });

    it('replays even after the plant was deleted', async () => {
      const c = await h.user();
      const key = { 'idempotency-key': 'order-2' };
      const first = await c.create({ name: 'Ephemeral' }, key);
      await c.request({ method: 'DELETE', url: first.headers.location as string });
      const again = await c.create({ name: 'Ephemeral' }, key);
      assert.equal(again.statusCode, 201);
      assert.equal(again.headers.location, first.headers.location);
      assert.deepEqual((await c.request({ method: 'GET', url: '/plants' })).json(), []);
    });

    it('the same key with a different body is 422 idempotency_key_reused and changes nothing', async () => {
      const c = await h.user();
      const key = { 'idempotency-key': 'order-3' };
      await c.create({ name: 'A' }, key);
      for (const body of [{ name: 'B' }, { name: 'A', tag: null }, { name: 'A', tag: 'x' }]) {
        const res = await c.create(body, key);
        assert.equal(res.statusCode, 422);
        assert.equal(errorBody(res).code, 'idempotency_key_reused');
      }
      assert.deepEqual((await c.request({ method: 'GET', url: '/plants' })).json(), [{ name: 'A' }]);
    });

    it('keys are scoped to the user', async () => {
      const a = await h.user();
      const b = await h.user();
      const key = { 'idempotency-key': 'shared-key' };
      const ra = await a.create({ name: 'Mine' }, key);
      const rb = await b.create({ name: 'Mine' }, key);
      assert.equal(rb.statusCode, 201);
      assert.notEqual(rb.headers.location, ra.headers.location);
      assert.equal(rb.headers['idempotent-replayed'], undefined);
    });

    it('a 409 plant_exists is replayed as a 409', async () => {
      const c = await h.user();
      const id = locationId(await c.create({ name: 'Taken' }));
      const key = { 'idempotency-key': 'dup-id' };
      assert.equal((await c.create({ id, name: 'Again' }, key)).statusCode, 409);
      await c.request({ method: 'DELETE', url: `/plants/${id}` });
      const res = await c.create({ id, name: 'Again' }, key);
      assert.equal(res.statusCode, 409);
      assert.equal(errorBody(res).code, 'plant_exists');
    });

    it('a request that failed validation does not use up the key', async () => {
      const c = await h.user();
      const key = { 'idempotency-key': 'after-400' };
      assert.equal((await c.create({ name: '' }, key)).statusCode, 400);
      assert.equal((await c.create({ name: 'Fine' }, key)).statusCode, 201);
    });

    for (const [what, value] of [
      ['empty', ''],
      ['too long', 'k'.repeat(256)],
      ['non-ASCII', 'clé'],
      ['a control character', 'a\tb'],
    ] as const) {
      it(`400 invalid_idempotency_key when the key is ${what}`, async () => {
        const c = await h.user();
        const res = await c.create({ name: 'x' }, { 'idempotency-key': value });
        assert.equal(res.statusCode, 400);
        assert.equal(errorBody(res).code, 'invalid_idempotency_key');
      });
    }

    it('accepts a key of 255 printable characters', async () => {
      const c = await h.user();
      assert.equal(
        (await c.create({ name: 'x' }, { 'idempotency-key': `${'~'.repeat(254)}!` })).statusCode,
        201,
      );
    });
  });

  describe(`Idempotency-Key in flight (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    let release: () => void = () => {};
    let gate: Promise<void> = Promise.resolve();
    let entered: () => void = () => {};
    before(async () => {
      // The store's create tells the test it has been entered (the request's key is claimed by
      // then), and waits at a gate: the first request is still in flight when the second arrives.
      const real = await engine.open();
      const slow = new Proxy(real, {
        get(target, prop, receiver) {
          if (prop === 'createPlant') {
            return async (...args: Parameters<Store['createPlant']>) => {
              entered();
              await gate;
              return target.createPlant(...args);
            };
          }
          const v = Reflect.get(target, prop, receiver);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
      h = await harness({ ...engine, open: async () => slow });
    });
    after(() => h?.close());

    it('the same key while the first request is in flight is 409 idempotency_key_in_flight', async () => {
      const c = await h.user();
      gate = new Promise((r) => {
        release = r;
      });
      const inStore = new Promise<void>((r) => {
        entered = r;
      });
      const key = { 'idempotency-key': 'slow-1' };
      const first = c.create({ name: 'Slow' }, key);
      await inStore;
      const second = await c.create({ name: 'Slow' }, key);
      assert.equal(second.statusCode, 409);
      assert.equal(errorBody(second).code, 'idempotency_key_in_flight');
      release();
      assert.equal((await first).statusCode, 201);
      const third = await c.create({ name: 'Slow' }, key);
      assert.equal(third.statusCode, 201);
      assert.equal(third.headers['idempotent-replayed'], 'true');
    });
  });
}
