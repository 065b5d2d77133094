import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

// The contract's plant API: path → method → the statuses it may answer. The served OpenAPI
// document must say exactly this, so the two cannot drift apart unnoticed.
const CONTRACT: Record<string, Record<string, number[]>> = {
  '/plants': {
    post: [201, 400, 401, 403, 409, 413, 415, 422, 429, 500, 503],
    get: [200, 400, 401, 403, 429, 500, 503],
  },
  '/plants/{id}': {
    get: [200, 400, 401, 403, 404, 429, 500, 503],
    delete: [204, 400, 401, 403, 404, 429, 500, 503],
  },
};

for (const engine of ENGINES) {
  describe(`operations endpoints (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await harness(engine);
    });
    after(() => h?.close());

    it('/healthz and /readyz answer 200 without a token', async () => {
      assert.equal((await h.app.inject('/healthz')).statusCode, 200);
      const ready = await h.app.inject('/readyz');
      assert.equal(ready.statusCode, 200);
      assert.deepEqual(ready.json(), { status: 'ready' });
    });

    it('/metrics counts requests by route and status and times the store', async () => {
      const c = await h.user();
      await c.create({ name: 'metered' });
      await c.request({ method: 'GET', url: '/plants/123456789' });
      const res = await h.app.inject('/metrics');
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^text\/plain/);
      assert.match(
        res.body,
        /plantstore_http_requests_total\{method="POST",route="\/plants",status="201"\} 1/,
      );
      assert.match(
        res.body,
        /plantstore_http_requests_total\{method="GET",route="\/plants\/:id",status="404"\} 1/,
      );
      assert.match(
        res.body,
        /plantstore_http_request_duration_seconds_bucket\{le="0.005",method="POST",route="\/plants",status="201"\}/,
      );
      assert.match(
        res.body,
        /plantstore_store_operation_duration_seconds_count\{operation="createPlant",outcome="ok"\} 1/,
      );
      assert.doesNotMatch(res.body, new RegExp(c.token));
    });

    it('/openapi.json is OpenAPI 3.1 and states every path, method and status of the contract', async () => {
      const res = await h.app.inject('/openapi.json');
      assert.equal(res.statusCode, 200);
      const doc = res.json();
      assert.equal(doc.openapi, '3.1.0');
      assert.deepEqual(doc.components.securitySchemes.bearerAuth, {
        type: 'http',
        scheme: 'bearer',
        description: 'A built-in token: `pst_` and 43 base64url characters, from `plantstore token create`.',
      });
      for (const [path, methods] of Object.entries(CONTRACT)) {
        assert.deepEqual(Object.keys(doc.paths[path]).sort(), Object.keys(methods).sort(), path);
        for (const [method, statuses] of Object.entries(methods)) {
          const op = doc.paths[path][method];
          assert.deepEqual(Object.keys(op.responses).map(Number).sort(), statuses, `${method} ${path}`);
          assert.deepEqual(op.security, [{ bearerAuth: [] }]);
          for (const s of statuses.filter((x) => x >= 400)) {
            assert.equal(
              op.responses[s].content['application/json'].schema.$ref,
              '#/components/schemas/Error',
            );
          }
        }
      }
      const create = doc.paths['/plants'].post;
      const body = create.requestBody.content['application/json'].schema;
      assert.deepEqual(Object.keys(body.properties).sort(), ['id', 'name', 'tag']);
      assert.deepEqual(body.required, ['name']);
      assert.equal(body.additionalProperties, false);
      assert.equal(body.properties.name.maxLength, 200);
      assert.equal(body.properties.tag.maxLength, 100);
      assert.equal(body.properties.id.maximum, 9007199254740991);
      const created = create.responses[201].content['application/json'].schema;
      assert.deepEqual(Object.keys(created.properties).sort(), ['name', 'tag']);
      assert.deepEqual(created.required, ['name']);
      const list = doc.paths['/plants'].get;
      assert.deepEqual(list.parameters.map((p: { name: string }) => p.name).sort(), [
        'cursor',
        'include',
        'limit',
        'tag',
      ]);
      assert.deepEqual(Object.keys(doc.components.schemas.Error.properties).sort(), [
        'code',
        'details',
        'error',
        'message',
      ]);
    });

    it('/docs serves an API reference with no external scripts or fonts', async () => {
      const res = await h.app.inject('/docs/');
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /text\/html/);
      const srcs = [...res.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
      assert.ok(srcs.length > 0);
      for (const src of srcs) assert.ok(!/^(https?:)?\/\//.test(src), `external resource ${src}`);
      const script = srcs.find((s) => s.endsWith('.js'));
      assert.ok(script, 'the reference script is served locally');
      const js = await h.app.inject(script!.startsWith('/') ? script! : `/docs/${script}`);
      assert.equal(js.statusCode, 200);
    });
  });

  describe(`metrics off (${engine.name})`, { skip: engine.skip }, () => {
    it('/metrics is 404 when turned off', async () => {
      const h = await harness(engine, { metrics: false });
      try {
        assert.equal((await h.app.inject('/metrics')).statusCode, 404);
      } finally {
        await h.close();
      }
    });
  });
}
