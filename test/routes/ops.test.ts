import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';

// The contract's plant API: path → method → the statuses it may answer. The served OpenAPI
// document must say exactly this, so the two cannot drift apart unnoticed.
const CONTRACT: Record<string, Record<string, number[]>> = {
  '/plants': {
    post: [201, 400, 401, 403, 409, 413, 415, 422, 429, 500, 503],
    get: [200, 400, 401, 403, 404, 429, 500, 503],
  },
  '/plants/{id}': {
    get: [200, 304, 400, 401, 403, 404, 429, 500, 503],
    patch: [200, 400, 401, 403, 404, 409, 412, 413, 415, 422, 428, 429, 500, 503],
    delete: [204, 400, 401, 403, 404, 412, 429, 500, 503],
  },
  // Version 4: batch creates and exports (section 2).
  '/plants/batch': { post: [201, 400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503] },
  '/plants/export': { get: [200, 400, 401, 403, 404, 429, 500, 503] },
  // Version 3: gardens (section 3.2).
  '/gardens': {
    post: [201, 400, 401, 403, 409, 413, 415, 429, 500, 503],
    get: [200, 401, 403, 429, 500, 503],
  },
  '/gardens/{gid}': {
    get: [200, 401, 403, 404, 429, 500, 503],
    patch: [200, 400, 401, 403, 404, 413, 415, 429, 500, 503],
    delete: [204, 401, 403, 404, 409, 429, 500, 503],
  },
  '/gardens/{gid}/members': { get: [200, 401, 403, 404, 429, 500, 503] },
  '/gardens/{gid}/activity': { get: [200, 400, 401, 403, 404, 429, 500, 503] },
  '/plants/{id}/history': { get: [200, 400, 401, 403, 404, 429, 500, 503] },
  '/gardens/{gid}/members/{user}': {
    put: [200, 201, 400, 401, 403, 404, 409, 413, 415, 429, 500, 503],
    delete: [204, 400, 401, 403, 404, 409, 429, 500, 503],
  },
  // Version 3: who am I, and tokens over HTTP (section 3.3).
  '/me': { get: [200, 401, 429, 500, 503] },
  '/tokens': {
    post: [201, 400, 401, 403, 413, 415, 429, 500, 503],
    get: [200, 400, 401, 403, 429, 500, 503],
  },
  '/tokens/{id}': {
    get: [200, 401, 403, 404, 429, 500, 503],
    delete: [204, 401, 403, 404, 429, 500, 503],
  },
  '/gardens/{gid}/plants': {
    get: [200, 400, 401, 403, 404, 429, 500, 503],
    post: [201, 400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503],
  },
};

const PACKAGE = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

/** Keeps the event loop of this process (the server's own) busy, 100 ms a turn, until stopped. */
function busyLoop(): () => void {
  let on = true;
  const turn = () => {
    const end = performance.now() + 100;
    while (performance.now() < end);
    if (on) setImmediate(turn);
  };
  turn();
  return () => {
    on = false;
  };
}

for (const engine of ENGINES) {
  describe(`operations endpoints (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await harness(engine);
    });
    after(() => h?.close());

    it('/healthz and /readyz answer 200 without a token; /healthz says which release and schema run', async () => {
      const health = await h.app.inject('/healthz');
      assert.equal(health.statusCode, 200);
      const newest = (engine.name === 'sqlite' ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS).length;
      assert.deepEqual(health.json(), { status: 'ok', version: PACKAGE.version, schema: newest });
      assert.match(PACKAGE.version, /^\d+\.\d+\.\d+$/);
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
      assert.equal(doc.info.version, PACKAGE.version, "info.version is this release's");
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
        'garden',
        'include',
        'limit',
        'q',
        'tag',
      ]);
      assert.deepEqual(Object.keys(doc.components.schemas.Error.properties).sort(), [
        'code',
        'details',
        'error',
        'message',
      ]);
    });

    it('/openapi.json is complete enough to generate a client from (CONTRACT.md section 9)', async () => {
      const res = await h.app.inject({ url: '/openapi.json', headers: { host: 'plants.example:8080' } });
      // biome-ignore lint/suspicious/noExplicitAny: a JSON document walked generically
      type Json = any;
      const doc = res.json() as Json;
      assert.deepEqual(doc.servers, [{ url: 'http://plants.example:8080' }], 'this service as reached');
      const ids = new Set<string>();
      for (const [path, methods] of Object.entries(doc.paths) as [string, Record<string, Json>][]) {
        for (const [method, op] of Object.entries(methods)) {
          const where = `${method} ${path}`;
          assert.match(op.operationId ?? '', /^[a-z][A-Za-z]+$/, `${where}: operationId`);
          assert.ok(!ids.has(op.operationId), `${where}: operationId ${op.operationId} twice`);
          ids.add(op.operationId);
          if (op.requestBody) {
            assert.ok(op.requestBody.content['application/json'].example, `${where}: a request example`);
          }
          for (const p of op.parameters ?? []) {
            if (p.in === 'path') {
              assert.ok(p.example ?? p.examples ?? p.schema.examples, `${where}: an example for ${p.name}`);
            }
          }
          const guarded = ['/plants', '/gardens', '/trash', '/webhooks', '/tokens'].some((p) =>
            path.startsWith(p),
          );
          if (guarded || path === '/events' || path === '/me') {
            assert.ok(op.security.length > 0, `${where}: needs a token`);
          } else {
            assert.deepEqual(op.security, [], `${where}: public`);
          }
          for (const [status, r] of Object.entries(op.responses) as [string, Json][]) {
            assert.ok(r.description && r.description !== 'Default Response', `${where} ${status}: described`);
            assert.ok(r.headers?.['x-request-id'], `${where} ${status}: X-Request-Id declared`);
          }
          if (op.responses['401']) assert.ok(op.responses['401'].headers['www-authenticate']);
          if (op.responses['429']) assert.ok(op.responses['429'].headers['retry-after']);
          if (op.responses['503']) assert.ok(op.responses['503'].headers['retry-after']);
        }
      }
      // What the service reads as strict text, the document types as the integers they are.
      const list = doc.paths['/plants'].get;
      const limit = list.parameters.find((p: { name: string }) => p.name === 'limit');
      assert.deepEqual([limit.schema.type, limit.schema.minimum, limit.schema.maximum], ['integer', 1, 1000]);
      const id = doc.paths['/plants/{id}'].get.parameters.find((p: { name: string }) => p.name === 'id');
      assert.deepEqual(
        [id.schema.type, id.schema.minimum, id.schema.maximum],
        ['integer', 1, 9007199254740991],
      );
      assert.ok(list.responses['200'].headers.link, 'Link, the only way to the next page, is declared');
      assert.ok(list.responses['200'].headers['ratelimit-remaining']);
      const create = doc.paths['/plants'].post;
      assert.ok(create.responses['201'].headers.location);
      assert.ok(create.responses['201'].headers['idempotent-replayed']);
      assert.deepEqual(create.requestBody.content['application/json'].example, {
        name: 'Monstera',
        tag: 'indoor',
      });
      // Tokens (section 3.3): paged by Link like plants; the secret only in a create's answer.
      const tokens = doc.paths['/tokens'].get;
      const tokenLimit = tokens.parameters.find((p: { name: string }) => p.name === 'limit');
      assert.deepEqual(
        [tokenLimit.schema.type, tokenLimit.schema.minimum, tokenLimit.schema.maximum],
        ['integer', 1, 1000],
      );
      assert.deepEqual(tokens.parameters.map((p: { name: string }) => p.name).sort(), [
        'cursor',
        'limit',
        'user',
      ]);
      assert.ok(tokens.responses['200'].headers.link, 'the tokens list declares Link');
      const made = doc.paths['/tokens'].post.responses['201'];
      assert.ok(made.headers.location && made.headers['cache-control']);
      const shown = (r: Json) => {
        const schema = r.content['application/json'].schema;
        return schema.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema;
      };
      assert.ok('token' in shown(made).properties, 'a create answers the secret');
      const item = shown(tokens.responses['200']);
      const listed = item.items.$ref ? doc.components.schemas[item.items.$ref.split('/').pop()] : item.items;
      assert.ok(!('token' in listed.properties), 'a list never carries a secret');
      assert.ok(!('token' in shown(doc.paths['/tokens/{id}'].get.responses['200']).properties));
      // ... and still answers its text rules: a generated client's numbers pass, other spellings do not.
      const c = await h.user();
      const plant = locationId(await c.create({ name: 'Monstera', tag: 'indoor' }));
      assert.equal((await c.request({ method: 'GET', url: `/plants/${plant}` })).statusCode, 200);
      assert.equal((await c.request({ method: 'GET', url: `/plants/0${plant}` })).statusCode, 400);
      assert.equal((await c.request({ method: 'GET', url: '/plants?limit=20' })).statusCode, 200);
      assert.equal((await c.request({ method: 'GET', url: '/plants?limit=20.0' })).statusCode, 400);
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

  describe(`/openapi.json made once (${engine.name})`, { skip: engine.skip }, () => {
    it('/openapi.json sends the one Buffer it made to every request from an origin, with an ETag answered by 304', async () => {
      const h = await harness(engine);
      const sent: unknown[] = [];
      h.app.addHook('onSend', async (request, _reply, payload) => {
        if (request.url === '/openapi.json') sent.push(payload);
        return payload;
      });
      try {
        const a = await h.app.inject('/openapi.json');
        const b = await h.app.inject('/openapi.json');
        assert.equal(a.statusCode, 200);
        assert.equal(a.headers['content-type'], 'application/json; charset=utf-8');
        assert.equal(a.body, b.body);
        assert.ok(Buffer.isBuffer(sent[0]), 'the answer is bytes made before, not an object serialized now');
        assert.equal(sent[0], sent[1], 'both answers sent the same Buffer: the document was serialized once');
        const etag = String(a.headers.etag);
        assert.match(etag, /^"[A-Za-z0-9_.-]+"$/);
        assert.equal(b.headers.etag, etag);
        for (const held of [etag, `"other", ${etag}`, '*']) {
          const c = await h.app.inject({ url: '/openapi.json', headers: { 'if-none-match': held } });
          assert.equal(c.statusCode, 304, held);
          assert.equal(c.body, '');
          assert.equal(c.headers.etag, etag);
        }
        const stale = await h.app.inject({ url: '/openapi.json', headers: { 'if-none-match': '"other"' } });
        assert.equal(stale.statusCode, 200);
        // Another origin: its own `servers`, its own ETag; the first origin's bytes are kept.
        const other = await h.app.inject({ url: '/openapi.json', headers: { host: 'api.example.test' } });
        assert.deepEqual(other.json().servers, [{ url: 'http://api.example.test' }]);
        assert.notEqual(other.headers.etag, etag);
        assert.deepEqual({ ...(other.json() as object), servers: a.json().servers }, a.json());
        await h.app.inject('/openapi.json');
        assert.equal(sent.at(-1), sent[0]);
      } finally {
        await h.close();
      }
    });
  });

  describe(`load shedding (${engine.name})`, { skip: engine.skip }, () => {
    it('with the event loop behind, the paths that need no token answer 503 with Retry-After; health, readiness and the API still answer', async () => {
      const h = await harness(engine, { maxEventLoopDelay: 30 });
      const c = await h.user();
      let stop = () => {};
      try {
        assert.equal((await h.app.inject('/openapi.json')).statusCode, 200);
        stop = busyLoop();
        await until(
          '/openapi.json to be shed',
          async () => (await h.app.inject('/openapi.json')).statusCode === 503,
        );
        for (const url of [
          '/openapi.json',
          '/metrics',
          '/docs',
          '/docs/',
          '/docs/js/scalar.js',
          '/favicon.svg',
        ]) {
          const res = await h.app.inject(url);
          assert.equal(res.statusCode, 503, url);
          assert.equal(res.headers['retry-after'], '2', url);
          assert.deepEqual(Object.keys(res.json()).sort(), ['code', 'error', 'message'], url);
          assert.equal(res.json().error, 503);
          assert.equal(res.json().code, 'overloaded');
        }
        assert.equal((await h.app.inject('/healthz')).statusCode, 200);
        assert.equal((await h.app.inject('/readyz')).statusCode, 200);
        assert.equal((await c.create({ name: 'under load' })).statusCode, 201);
        assert.equal((await c.request({ method: 'GET', url: '/plants' })).statusCode, 200);
      } finally {
        stop();
      }
      try {
        await until(
          '/openapi.json to answer again',
          async () => (await h.app.inject('/openapi.json')).statusCode === 200,
        );
        assert.equal((await h.app.inject('/metrics')).statusCode, 200);
      } finally {
        await h.close();
      }
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
