import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { type Client, type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

// Seeded and reproducible: FAST_CHECK_SEED=<n> replays a run; the default seed is fixed.
const SEED = Number(process.env.FAST_CHECK_SEED ?? 20261121);
// 4 × 2,500 = 10,000 generated requests on SQLite; PostgreSQL gets a fifth of that (a round trip each).
const RUNS = Number(process.env.FAST_CHECK_RUNS ?? 2500);
const runsOn = (engine: string) => (engine === 'sqlite' ? RUNS : Math.ceil(RUNS / 5));

const ALLOWED = new Set([200, 201, 204, 400, 404, 405, 409, 413, 415, 422]);

function assertContractAnswer(res: LightMyRequestResponse): void {
  assert.ok(res.statusCode < 500, `5xx: ${res.statusCode} ${res.body}`);
  // A generated `/plants/..` resolves to `/`, which redirects to the web console (section 11).
  if (res.statusCode === 302 && res.raw.req.url === '/') {
    assert.equal(res.headers.location, '/console/');
    return;
  }
  assert.ok(ALLOWED.has(res.statusCode), `unexpected status ${res.statusCode} ${res.body}`);
  if (res.statusCode >= 400) {
    const body = res.json();
    assert.equal(body.error, res.statusCode);
    assert.match(body.code, /^[a-z_]+$/);
    assert.equal(typeof body.message, 'string');
  }
}

// Keys that have hurt JSON handling elsewhere, mixed into generated objects.
const nastyKey = fc.constantFrom(
  '__proto__',
  'constructor',
  'prototype',
  'name',
  'id',
  'tag',
  'toString',
  '',
);
const nastyString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }),
  fc.constantFrom(
    '\u0000',
    ' ',
    '\u3000',
    '\uFEFF',
    '\uD800',
    'a\uDC00',
    '\u200B',
    '\u202Ea\u202C',
    'a'.repeat(201),
    '🌵'.repeat(200),
    '\\u0000',
  ),
);
const jsonish: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    nastyString,
    fc.integer(),
    fc.double(),
    fc.bigInt().map((b) => b * 10n ** 20n),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(nastyKey, fc.string()), tie('value'), { maxKeys: 5 }),
  ),
})).value;

const toJson = (v: unknown) =>
  JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? Number(x) : x)) ?? 'null';

// A body as raw text: valid JSON of odd values, plant-shaped objects with odd fields, or garbage.
const body = fc.oneof(
  jsonish.map(toJson),
  fc
    .record(
      { name: fc.option(jsonish), id: fc.option(jsonish), tag: fc.option(jsonish) },
      { requiredKeys: [] },
    )
    .map(toJson),
  fc.tuple(nastyKey, jsonish).map(([k, v]) => `{"name":"ok",${JSON.stringify(k)}:${toJson(v)}}`),
  // A plant whose name and tag are odd text alone, so that many are created and read back.
  fc.record({ name: nastyString, tag: fc.option(nastyString) }).map(toJson),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.constantFrom(
    '{"name":"a","__proto__":{"x":1}}',
    '{"name":"a","name":1}',
    '[]',
    '{',
    '',
    '{"name":"a"}'.repeat(2),
    // Deep nesting, as deep as 16 KiB allows: closed, unclosed, and under a known field.
    `{"name":${'['.repeat(8000)}${']'.repeat(8000)}}`,
    '['.repeat(16_000),
    `${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}`,
    `{"name":"a","tag":${'{"__proto__":'.repeat(1000)}1${'}'.repeat(1000)}}`,
  ),
);
const contentType = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=iso-8859-1',
  'application/json; charset="utf-16"',
  'APPLICATION/JSON',
  'text/plain',
  'application/x-www-form-urlencoded',
  'application/json-patch+json',
  '',
);
const queryPart = fc.oneof(
  fc.string(),
  fc.constantFrom(
    'limit=0',
    'limit=1001',
    'limit=1e3',
    'limit=%00',
    'limit=5&limit=5',
    'cursor=%FF',
    'tag=',
    'tag=%00',
  ),
  fc
    .tuple(fc.constantFrom('limit', 'tag', 'cursor', 'x'), fc.string())
    .map(([k, v]) => `${k}=${encodeURIComponent(v)}`),
);
const idSegment = fc.oneof(
  fc.string({ minLength: 1 }).map(encodeURIComponent),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
  fc.constantFrom('0', '-0', '1e3', '0x1', '9007199254740992', '%2e%2e', '..', '1.0', '%00'),
);

for (const engine of ENGINES)
  describe(`generated hostile requests on ${engine.name}: a contract status, never a 5xx, nothing changed when refused`, {
    skip: engine.skip,
  }, () => {
    const runs = runsOn(engine.name);
    let h: Harness;
    let c: Client;
    before(async () => {
      h = await harness(engine, { rateLimit: 0, authFailureLimit: 0 });
      c = await h.user();
    });
    after(() => h?.close());

    const count = async () => {
      const gardens = (await h.store.memberships(c.user)).map((m) => m.garden);
      return (await h.store.listPlants({ gardens, tag: null, afterId: 0, limit: 100_000 })).length;
    };

    it(`POST /plants with ${runs} generated bodies and content types`, async () => {
      await fc.assert(
        fc.asyncProperty(
          body,
          contentType,
          fc.option(fc.string({ maxLength: 300 })),
          async (payload, type, key) => {
            const before = await count();
            const headers: Record<string, string> = {};
            if (type) headers['content-type'] = type;
            if (key !== null) headers['idempotency-key'] = key.replace(/[\r\n]/g, '');
            const res = await c.request({ method: 'POST', url: '/plants', headers, payload });
            assertContractAnswer(res);
            // What a 201 echoes is what is stored: a read gives it back under the same ETag.
            if (res.statusCode === 201) {
              const read = await c.request({ method: 'GET', url: String(res.headers.location) });
              assert.deepEqual(read.json(), res.json(), payload);
              assert.equal(read.headers.etag, res.headers.etag);
            }
            const after = await count();
            assert.equal(
              after,
              before + (res.statusCode === 201 && res.headers['idempotent-replayed'] === undefined ? 1 : 0),
            );
          },
        ),
        { seed: SEED, numRuns: runs },
      );
    });

    it(`GET /plants with ${runs} generated query strings`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(queryPart, { maxLength: 4 }), async (parts) => {
          const res = await c.request({ method: 'GET', url: `/plants?${parts.join('&')}` });
          assertContractAnswer(res);
        }),
        { seed: SEED, numRuns: runs },
      );
    });

    it(`GET and DELETE /plants/{id} with ${runs} generated ids, deleting nothing that is not the caller's`, async () => {
      const other = await h.user();
      const theirs = Number(
        /[0-9]+$/.exec(String((await other.create({ name: 'not yours' })).headers.location))![0],
      );
      await fc.assert(
        fc.asyncProperty(idSegment, fc.constantFrom('GET', 'DELETE'), async (id, method) => {
          const res = await c.request({ method, url: `/plants/${id}` });
          assertContractAnswer(res);
        }),
        { seed: SEED, numRuns: runs },
      );
      assert.ok(await h.store.getPlant(theirs), "another user's plant survived");
    });

    it(`${runs} generated Authorization headers never get past authentication or crash`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            fc.string({ maxLength: 200 }),
            fc.string().map((s) => `Bearer ${s}`),
            fc.string().map((s) => `bearer pst_${s}`),
            fc.constantFrom(
              'Bearer',
              'Bearer ',
              'Basic Og==',
              `Bearer ${c.token} extra`,
              `Bearer ${c.token.slice(0, -1)}`,
            ),
          ),
          async (value) => {
            const clean = value.replace(/[\r\n\u0000-\u001f\u007f-\uffff]/g, '');
            const res = await h.app.inject({
              method: 'GET',
              url: '/plants',
              headers: { authorization: clean },
            });
            if (clean === `Bearer ${c.token}` || clean === `bearer ${c.token}`) return;
            assert.equal(res.statusCode, 401, `${JSON.stringify(clean)} → ${res.statusCode}`);
          },
        ),
        { seed: SEED, numRuns: runs },
      );
    });
  });
