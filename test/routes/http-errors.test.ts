import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Store } from '../../src/store/store.js';
import { errorBody, type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

for (const engine of ENGINES) {
  describe(`HTTP errors and cross-cutting behaviour (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await harness(engine);
    });
    after(() => h?.close());

    it('an unknown path is 404 not_found with the error body, even without a token', async () => {
      for (const url of ['/nope', '/plants/1/leaves', '/plants/', '/Plants']) {
        const res = await h.app.inject({ method: 'GET', url });
        assert.equal(res.statusCode, 404, url);
        assert.equal(errorBody(res).code, 'not_found');
      }
    });

    for (const [url, allow, methods] of [
      ['/plants', 'GET, HEAD, POST', ['PUT', 'PATCH', 'DELETE', 'OPTIONS']],
      ['/plants/1', 'DELETE, GET, HEAD, PATCH', ['PUT', 'POST', 'OPTIONS']],
    ] as const) {
      for (const method of methods) {
        it(`${method} ${url} is 405 with Allow: ${allow}, before any token check`, async () => {
          const res = await h.app.inject({ method, url });
          assert.equal(res.statusCode, 405);
          assert.equal(res.headers.allow, allow);
          assert.equal(errorBody(res).code, 'method_not_allowed');
        });
      }
    }

    it('415 when Content-Type is missing or not application/json; parameters are allowed', async () => {
      const c = await h.user();
      for (const type of [
        undefined,
        'text/plain',
        'application/x-www-form-urlencoded',
        'application/jsonx',
        'text/json',
      ]) {
        const headers: Record<string, string> = type ? { 'content-type': type } : {};
        const res = await c.request({ method: 'POST', url: '/plants', headers, payload: '{"name":"a"}' });
        assert.equal(res.statusCode, 415, String(type));
        assert.equal(errorBody(res).code, 'unsupported_media_type');
      }
      for (const type of [
        'application/json; charset=utf-8',
        'Application/JSON',
        'application/json;charset=UTF-8',
      ]) {
        const res = await c.request({
          method: 'POST',
          url: '/plants',
          headers: { 'content-type': type },
          payload: '{"name":"a"}',
        });
        assert.equal(res.statusCode, 201, type);
      }
    });

    it('415 for a JSON body declared in a charset other than UTF-8, on every route that takes JSON, before 413; nothing stored', async () => {
      const c = await h.user(['plants:read', 'plants:write', 'tokens:manage']);
      const routes: [string, string, string][] = [
        ['POST', '/plants', 'application/json'],
        ['POST', '/gardens/gdn_x/plants', 'application/json'],
        ['PATCH', '/plants/1', 'application/merge-patch+json'],
        ['PATCH', '/plants/1', 'application/json'],
        ['POST', '/plants/batch', 'application/json'],
        ['POST', '/plants/batch', 'application/x-ndjson'],
        ['POST', '/gardens', 'application/json'],
        ['PATCH', '/gardens/gdn_x', 'application/json'],
        ['PUT', '/gardens/gdn_x/members/bob', 'application/json'],
        ['POST', '/tokens', 'application/json'],
        ['POST', '/webhooks', 'application/json'],
        ['POST', '/webhooks/whk_x/recover', 'application/json'],
      ];
      const charsets = ['iso-8859-1', 'windows-1252', '"UTF-16"', 'utf-16le', 'latin1', 'shift_jis', ''];
      for (const [method, url, type] of routes) {
        for (const charset of charsets) {
          const res = await c.request({
            method: method as 'POST',
            url,
            headers: { 'content-type': `${type}; charset=${charset}` },
            // Over every limit: the 415 comes first, before the body is read.
            payload: 'x'.repeat(1024 * 1024 + 1),
          });
          assert.equal(res.statusCode, 415, `${method} ${url} ${type} ${charset}: ${res.body}`);
          // An NDJSON batch's refusal is the batch route's, with advice on saving a file as UTF-8.
          if (type === 'application/x-ndjson') {
            assert.equal(errorBody(res).code, 'unsupported_media_type');
            continue;
          }
          assert.deepEqual(errorBody(res), {
            error: 415,
            code: 'unsupported_media_type',
            message: `${type} must be UTF-8, but Content-Type names the charset ${JSON.stringify(charset.replace(/"/g, ''))}: send the body as UTF-8, with charset=utf-8 or no charset`,
          });
        }
      }
      // What was reported stored garbled: ISO-8859-1 bytes, labelled as such.
      const latin1 = await c.request({
        method: 'POST',
        url: '/plants',
        headers: { 'content-type': 'application/json; charset=iso-8859-1' },
        payload: Buffer.from('{"name":"Gr\xf6\xdfe F\xe4cherpalme"}', 'latin1'),
      });
      assert.equal(latin1.statusCode, 415);
      assert.deepEqual((await c.request({ method: 'GET', url: '/plants' })).json(), []);
      // UTF-8 in any spelling, US-ASCII (whose every text is UTF-8) and other parameters are read.
      for (const type of [
        'application/json; charset=utf-8',
        'application/json; charset="utf-8"',
        'application/json;charset=UTF8',
        'application/json; Charset = "UTF-8"',
        'application/json; charset=us-ascii',
        'application/json; profile=x',
      ]) {
        const res = await c.request({
          method: 'POST',
          url: '/plants',
          headers: { 'content-type': type },
          payload: Buffer.from('{"name":"Große Fächerpalme"}', 'utf8'),
        });
        assert.equal(res.statusCode, 201, `${type}: ${res.body}`);
        assert.deepEqual(res.json(), { name: 'Große Fächerpalme' });
      }
    });

    it('415 comes before 413 and 400', async () => {
      const c = await h.user();
      const res = await c.request({
        method: 'POST',
        url: '/plants',
        headers: { 'content-type': 'text/plain' },
        payload: 'x'.repeat(20_000),
      });
      assert.equal(res.statusCode, 415);
    });

    it('413 body_too_large over 16 KiB; 16 KiB itself is read', async () => {
      const c = await h.user();
      const big = JSON.stringify({ name: 'a', tag: 'b' }).padEnd(16 * 1024 + 1, ' ');
      const res = await c.request({
        method: 'POST',
        url: '/plants',
        headers: { 'content-type': 'application/json' },
        payload: big,
      });
      assert.equal(res.statusCode, 413);
      assert.equal(errorBody(res).code, 'body_too_large');
      assert.equal(errorBody(res).message, 'request body must be at most 16 KiB');
      const exact = JSON.stringify({ name: 'a' }).padEnd(16 * 1024, ' ');
      const ok = await c.request({
        method: 'POST',
        url: '/plants',
        headers: { 'content-type': 'application/json' },
        payload: exact,
      });
      assert.equal(ok.statusCode, 201);
    });

    it("a 413 names the route's own limit: 1 MiB for a batch create, in each of its body forms", async () => {
      const c = await h.user();
      for (const type of ['application/json', 'text/csv', 'application/x-ndjson']) {
        const res = await c.request({
          method: 'POST',
          url: '/plants/batch',
          headers: { 'content-type': type },
          payload: 'x'.repeat(1024 * 1024 + 1),
        });
        assert.equal(res.statusCode, 413, type);
        assert.deepEqual(errorBody(res), {
          error: 413,
          code: 'body_too_large',
          message: 'request body must be at most 1 MiB',
        });
      }
    });

    it('413 comes before 400 for a large malformed body', async () => {
      const c = await h.user();
      const res = await c.request({
        method: 'POST',
        url: '/plants',
        headers: { 'content-type': 'application/json' },
        payload: '{'.repeat(17_000),
      });
      assert.equal(res.statusCode, 413);
    });

    it('keeps a well-formed X-Request-Id and replaces a bad one, on every response', async () => {
      const good = 'abc.DEF_123-xyz';
      const kept = await h.app.inject({ method: 'GET', url: '/nope', headers: { 'x-request-id': good } });
      assert.equal(kept.headers['x-request-id'], good);
      for (const bad of ['', 'has space', 'x'.repeat(129), 'semi;colon', 'ünï']) {
        const res = await h.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': bad } });
        const id = String(res.headers['x-request-id']);
        assert.notEqual(id, bad);
        assert.match(id, /^[A-Za-z0-9._-]{1,128}$/);
      }
      const c = await h.user();
      const created = await c.create({ name: 'x' }, { 'x-request-id': 'create-1' });
      assert.equal(created.headers['x-request-id'], 'create-1');
      const max = 'r'.repeat(128);
      assert.equal(
        (await h.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': max } })).headers[
          'x-request-id'
        ],
        max,
      );
    });

    it('every error the framework raises itself has the contract body and a request id', async () => {
      const c = await h.user();
      const json = { 'content-type': 'application/json' };
      const cases: [string, Parameters<typeof c.request>[0], number][] = [
        ['a malformed percent-encoding in the path', { method: 'GET', url: '/plants/%ZZ' }, 400],
        ['a truncated percent-encoding', { method: 'DELETE', url: '/plants/1%' }, 400],
        ['a bad percent-encoding on another route', { method: 'GET', url: '/webhooks/%E0%A4%A' }, 400],
        ['a bad percent-encoding on an unknown path', { method: 'GET', url: '/no/%zz' }, 400],
        ['a path segment over the router limit', { method: 'GET', url: `/plants/${'9'.repeat(3000)}` }, 414],
        [
          'a body over the limit',
          { method: 'POST', url: '/plants', headers: json, payload: 'x'.repeat(17_000) },
          413,
        ],
        [
          'a media type not taken',
          { method: 'POST', url: '/plants', headers: { 'content-type': 'text/xml' }, payload: '<a/>' },
          415,
        ],
        ['an empty JSON body', { method: 'POST', url: '/plants', headers: json, payload: '' }, 400],
        [
          'JSON that does not parse',
          { method: 'PATCH', url: '/plants/1', headers: json, payload: '{"name"' },
          400,
        ],
        // A method the router does not know at all (not one of its supported methods): no route.
        ['a method the router does not know', { method: 'PROPFIND' as 'GET', url: '/plants' }, 404],
      ];
      for (const [what, req, status] of cases) {
        // The router's refusals come before any token check: they are the same without one.
        const anonymous = status === 400 && /percent/.test(what) ? [await h.app.inject(req)] : [];
        for (const res of [...anonymous, await c.request(req)]) {
          assert.equal(res.statusCode, status, `${what}: ${res.statusCode} ${res.body}`);
          const body = errorBody(res);
          assert.equal(body.error, status, what);
          assert.match(body.code, /^[a-z][a-z_]*[a-z]$/, what);
          assert.doesNotMatch(res.body, /FST_|statusCode|Bad Request"/, `${what}: Fastify's own body`);
          assert.match(String(res.headers['x-request-id']), /^[A-Za-z0-9._-]{1,128}$/, what);
        }
      }
    });

    it('authenticated responses carry RateLimit headers', async () => {
      const c = await h.user();
      const res = await c.request({ method: 'GET', url: '/plants' });
      assert.equal(res.headers['ratelimit-limit'], '6000');
      assert.equal(res.headers['ratelimit-remaining'], '5999');
      assert.match(String(res.headers['ratelimit-reset']), /^[1-9][0-9]*$/);
    });
  });

  describe(`store failures (${engine.name})`, { skip: engine.skip }, () => {
    it('an unexpected error is a 500 that names the request id and reveals no internals', async () => {
      const real = await engine.open();
      const faulty = new Proxy(real, {
        get(target, prop, receiver) {
          if (prop === 'listPlants') {
            return async () => {
              throw new Error('SQLITE_ERROR: near "SELECT": syntax error in SELECT * FROM plants');
            };
          }
          const v = Reflect.get(target, prop, receiver);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      }) as Store;
      const h = await harness({ ...engine, open: async () => faulty });
      try {
        const c = await h.user();
        const res = await c.request({
          method: 'GET',
          url: '/plants',
          headers: { 'x-request-id': 'trace-me' },
        });
        assert.equal(res.statusCode, 500);
        const err = errorBody(res);
        assert.equal(err.code, 'internal_error');
        assert.match(err.message, /trace-me/);
        assert.doesNotMatch(res.body, /SQLITE|SELECT|plants|at .*\.ts/);
      } finally {
        await h.close();
      }
    });

    it('a store that went away: plant requests 503 with Retry-After, /readyz 503, /healthz 200', async () => {
      const h = await harness(engine);
      const c = await h.user();
      assert.equal((await c.request({ method: 'GET', url: '/plants' })).statusCode, 200);
      await h.store.close();
      const res = await c.request({ method: 'GET', url: '/plants' });
      assert.equal(res.statusCode, 503);
      assert.equal(res.headers['retry-after'], '1');
      assert.equal(errorBody(res).code, 'store_unavailable');
      const ready = await h.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(ready.statusCode, 503);
      assert.equal(errorBody(ready).code, 'store_unavailable');
      assert.equal((await h.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
      await h.app.close();
    });
  });
}
