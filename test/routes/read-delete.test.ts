import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { errorBody, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

for (const engine of ENGINES) {
  describe(`GET and DELETE /plants/{id} (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await harness(engine);
    });
    after(() => h?.close());

    it('reads one plant as {name, tag}', async () => {
      const c = await h.user();
      const id = locationId(await c.create({ name: 'Basil', tag: 'herb' }));
      const res = await c.request({ method: 'GET', url: `/plants/${id}` });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { name: 'Basil', tag: 'herb' });
    });

    it('another user’s plant is 404 on read and delete, and is kept', async () => {
      const owner = await h.user();
      const stranger = await h.user();
      const id = locationId(await owner.create({ name: 'Private' }));
      const missing = id + 1_000_000;
      for (const target of [id, missing]) {
        const read = await stranger.request({ method: 'GET', url: `/plants/${target}` });
        const del = await stranger.request({ method: 'DELETE', url: `/plants/${target}` });
        assert.equal(read.statusCode, 404);
        assert.equal(del.statusCode, 404);
        // Existing-but-hidden and missing look the same.
        assert.deepEqual(errorBody(read), {
          error: 404,
          code: 'plant_not_found',
          message: 'plant not found',
        });
        assert.deepEqual(errorBody(del), { error: 404, code: 'plant_not_found', message: 'plant not found' });
      }
      assert.equal((await owner.request({ method: 'GET', url: `/plants/${id}` })).statusCode, 200);
    });

    it('delete answers 204 with no body; a second delete is 404', async () => {
      const c = await h.user();
      const id = locationId(await c.create({ name: 'Gone' }));
      const del = await c.request({ method: 'DELETE', url: `/plants/${id}` });
      assert.equal(del.statusCode, 204);
      assert.equal(del.body, '');
      assert.equal(del.headers['content-type'], undefined);
      assert.equal((await c.request({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 404);
      assert.equal((await c.request({ method: 'GET', url: `/plants/${id}` })).statusCode, 404);
    });

    it('a body sent with DELETE is ignored, whatever its Content-Type', async () => {
      const c = await h.user();
      for (const [type, payload] of [
        ['application/json', ''],
        ['application/json', '{'],
        ['text/plain', 'x'],
        ['application/xml', '<x/>'],
      ]) {
        const id = locationId(await c.create({ name: 'Labelled' }));
        const res = await c.request({
          method: 'DELETE',
          url: `/plants/${id}`,
          headers: { 'content-type': type! },
          payload,
        });
        assert.equal(res.statusCode, 204, `${type} ${payload}`);
      }
    });

    it('plants:admin reads and deletes any user’s plant', async () => {
      const c = await h.user();
      const admin = await h.user(['plants:admin']);
      const id = locationId(await c.create({ name: 'Adminable' }));
      assert.deepEqual((await admin.request({ method: 'GET', url: `/plants/${id}` })).json(), {
        name: 'Adminable',
      });
      assert.equal((await admin.request({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 204);
      assert.equal((await c.request({ method: 'GET', url: `/plants/${id}` })).statusCode, 404);
    });

    for (const bad of [
      'abc',
      '0',
      '-1',
      '1.5',
      '1e3',
      '01',
      '9007199254740992',
      '99999999999999999999',
      '%20',
      '0x10',
    ]) {
      it(`400 invalid_parameter for id ${bad} on GET and DELETE`, async () => {
        const c = await h.user();
        for (const method of ['GET', 'DELETE'] as const) {
          const res = await c.request({ method, url: `/plants/${bad}` });
          assert.equal(res.statusCode, 400);
          const err = errorBody(res);
          assert.equal(err.code, 'invalid_parameter');
          assert.equal(err.message, 'id must be a whole number from 1 to 9007199254740991');
        }
      });
    }

    it('the largest id is accepted', async () => {
      const c = await h.user();
      assert.equal((await c.request({ method: 'GET', url: '/plants/9007199254740991' })).statusCode, 404);
    });
  });
}
