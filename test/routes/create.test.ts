import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { errorBody, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { postBatch, postBatchJson } from '../helpers/plants.js';

/** Names with nothing to see, each kind: what it is, the name, the code point the 400 names. */
const INVISIBLE: [string, string, string][] = [
  ['a zero-width space', '\u200b', 'U+200B'],
  ['a zero-width non-joiner and joiner', '\u200c\u200d', 'U+200C'],
  ['a word joiner between spaces', ' \u2060 ', 'U+2060'],
  ['a BOM', '\ufeff', 'U+FEFF'],
  ['a soft hyphen', '\u00ad', 'U+00AD'],
  ['the Hangul filler', '\u3164', 'U+3164'],
  ['the Hangul choseong filler', '\u115f', 'U+115F'],
  ['variation selectors', '\ufe0f\u{e0100}', 'U+FE0F'],
  ['bidi controls', '\u202e\u2066\u2069', 'U+202E'],
  ['an ideographic space and a zero-width space', '\u3000\u200b', 'U+200B'],
  ['a C1 control', '\u0085\u0080', 'U+0085'],
];

for (const engine of ENGINES) {
  describe(`POST /plants (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await harness(engine);
    });
    after(() => h?.close());

    it('creates a plant: 201, exactly {name, tag}, Location /plants/{id}', async () => {
      const c = await h.user();
      const res = await c.create({ name: 'Monstera', tag: 'indoor' });
      assert.equal(res.statusCode, 201);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      assert.deepEqual(res.json(), { name: 'Monstera', tag: 'indoor' });
      const id = locationId(res);
      const read = await c.request({ method: 'GET', url: `/plants/${id}` });
      assert.deepEqual(read.json(), { name: 'Monstera', tag: 'indoor' });
    });

    it('omits tag when absent or null, and never returns id', async () => {
      const c = await h.user();
      const a = await c.create({ name: 'Cactus' });
      const b = await c.create({ name: 'Cactus', tag: null, id: null });
      assert.deepEqual(a.json(), { name: 'Cactus' });
      assert.deepEqual(b.json(), { name: 'Cactus' });
      assert.ok(locationId(b) > locationId(a));
    });

    it('accepts a client-chosen id and answers 409 plant_exists for any existing id, anyone’s', async () => {
      const c = await h.user();
      const other = await h.user();
      const id = 9_000_000_000 + Math.floor(Math.random() * 1_000_000);
      const res = await c.create({ id, name: 'Chosen' });
      assert.equal(res.statusCode, 201);
      assert.equal(res.headers.location, `/plants/${id}`);
      const dup = await other.create({ id, name: 'Mine now?' });
      assert.equal(dup.statusCode, 409);
      assert.equal(errorBody(dup).code, 'plant_exists');
      const list = await other.request({ method: 'GET', url: '/plants' });
      assert.deepEqual(list.json(), [], 'a refused create stores nothing');
      const next = await c.create({ name: 'Server id' });
      assert.ok(locationId(next) > id, 'server ids jump past client-chosen ones');
    });

    it('a deleted id may be created again by a client, but the server never reuses it', async () => {
      const c = await h.user();
      const id = locationId(await c.create({ name: 'Temp' }));
      assert.equal((await c.request({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 204);
      assert.ok(locationId(await c.create({ name: 'New' })) > id);
      assert.equal((await c.create({ id, name: 'Back' })).statusCode, 201);
    });

    it('stores name and tag exactly as sent, at their length bounds in code points', async () => {
      const c = await h.user();
      const name = `${'🌵'.repeat(199)} `; // 200 code points, 399 UTF-16 units
      const tag = ' t'.repeat(50);
      const res = await c.create({ name, tag });
      assert.equal(res.statusCode, 201);
      assert.deepEqual(res.json(), { name, tag });
      assert.deepEqual((await c.request({ method: 'GET', url: res.headers.location as string })).json(), {
        name,
        tag,
      });
    });

    const bad: [string, unknown, string, string][] = [
      ['name missing', { tag: 'x' }, '/name', 'name is required'],
      ['name empty', { name: '' }, '/name', 'name must not be empty'],
      ['name blank', { name: ' \t ' }, '/name', 'name must not contain control characters'],
      ['name only spaces', { name: '   ' }, '/name', 'name must not be blank'],
      ['name with NUL', { name: 'a\u0000b' }, '/name', 'name must not contain control characters'],
      ['name with DEL', { name: 'a\u007f' }, '/name', 'name must not contain control characters'],
      ['name too long', { name: 'x'.repeat(201) }, '/name', 'name must be at most 200 characters'],
      ['name not a string', { name: 42 }, '/name', 'name must be a string'],
      ['name null', { name: null }, '/name', 'name must be a string'],
      ['tag empty', { name: 'a', tag: '' }, '/tag', 'tag must not be empty'],
      ['tag blank', { name: 'a', tag: '\u3000 ' }, '/tag', 'tag must not be blank'],
      ['tag too long', { name: 'a', tag: 'y'.repeat(101) }, '/tag', 'tag must be at most 100 characters'],
      ['tag a number', { name: 'a', tag: 5 }, '/tag', 'tag must be a string or null'],
      // Over-long text ending in a control character once cost its pattern quadratic time.
      [
        'name 16,300 long, ending in NUL',
        { name: `${'a'.repeat(16_299)}\u0000` },
        '/name',
        'name must be at most 200 characters',
      ],
      [
        'tag 16,300 long, ending in NUL',
        { name: 'a', tag: `${' '.repeat(16_299)}\u0001` },
        '/tag',
        'tag must be at most 100 characters',
      ],
      // Version 5: valid Unicode only, and a name needs a character that shows.
      [
        'name holds a lone surrogate',
        { name: 'Fern\ud800' },
        '/name',
        'name must be valid Unicode (it holds \\ud800, half of a surrogate pair)',
      ],
      [
        'tag is a lone low surrogate',
        { name: 'a', tag: '\udc00' },
        '/tag',
        'tag must be valid Unicode (it holds \\udc00, half of a surrogate pair)',
      ],
      ...INVISIBLE.map(([what, name, shown]): [string, unknown, string, string] => [
        `name only ${what}`,
        { name },
        '/name',
        `name must have a visible character (it holds only spaces or invisible characters such as ${shown})`,
      ]),
      [
        'tag only a zero-width joiner and spaces',
        { name: 'a', tag: ' \u200d ' },
        '/tag',
        'tag must have a visible character (it holds only spaces or invisible characters such as U+200D)',
      ],
      ['id zero', { name: 'a', id: 0 }, '/id', 'id must be from 1 to 9007199254740991'],
      ['id negative', { name: 'a', id: -5 }, '/id', 'id must be from 1 to 9007199254740991'],
      ['id too large', { name: 'a', id: 9007199254740992 }, '/id', 'id must be from 1 to 9007199254740991'],
      ['id a fraction', { name: 'a', id: 1.5 }, '/id', 'id must be an integer or null'],
      ['id a string', { name: 'a', id: '7' }, '/id', 'id must be an integer or null'],
      ['unknown field', { name: 'a', color: 'green' }, '/color', 'color is not a known field'],
    ];
    for (const [what, body, field, message] of bad) {
      it(`400 invalid_body when ${what}, naming the field, storing nothing`, async () => {
        const c = await h.user();
        const res = await c.create(body);
        assert.equal(res.statusCode, 400);
        const err = errorBody(res);
        assert.equal(err.code, 'invalid_body');
        assert.equal(err.message, message);
        assert.deepEqual(err.details?.[0], { field, message: message.replace(/^\S+ (is|must)/, '$1') });
        assert.deepEqual((await c.request({ method: 'GET', url: '/plants' })).json(), []);
      });
    }

    it('a name with bidi controls and letters is stored and read back byte for byte, in a read, the list and the export', async () => {
      const c = await h.user();
      const name = '\u202eabc\u202c \u2067שלום\u2069 \u200dx\ufe0f';
      const tag = '\u2066t\u2069';
      const res = await c.create({ name, tag });
      assert.equal(res.statusCode, 201);
      assert.deepEqual(res.json(), { name, tag });
      const read = await c.request({ method: 'GET', url: res.headers.location as string });
      assert.deepEqual(read.json(), { name, tag });
      assert.ok(read.rawPayload.includes(Buffer.from(name, 'utf8')), 'the name as UTF-8 bytes, unescaped');
      assert.deepEqual((await c.request({ method: 'GET', url: '/plants' })).json(), [{ name, tag }]);
      const line = JSON.parse((await c.request({ method: 'GET', url: '/plants/export' })).body);
      assert.equal(line.name, name);
    });

    it('a JSON body that is not UTF-8 is 400 invalid_json, never stored with U+FFFD', async () => {
      const c = await h.user();
      const send = (payload: Buffer) =>
        c.request({
          method: 'POST',
          url: '/plants',
          headers: { 'content-type': 'application/json' },
          payload,
        });
      // ISO-8859-1 sent unlabelled: it was stored as "Gr\ufffd\ufffde".
      const latin1 = await send(Buffer.from('{"name":"Gr\xf6\xdfe"}', 'latin1'));
      assert.equal(latin1.statusCode, 400, latin1.body);
      assert.deepEqual(errorBody(latin1), {
        error: 400,
        code: 'invalid_json',
        message: 'request body is not valid UTF-8: JSON must be sent as UTF-8',
      });
      // CESU-8 (a surrogate as three bytes), a truncated sequence and an overlong one are not UTF-8 either.
      for (const bytes of [
        [0xed, 0xa0, 0x80],
        [0xe2, 0x82],
        [0xc0, 0xaf],
      ]) {
        const res = await send(
          Buffer.concat([Buffer.from('{"name":"a'), Buffer.from(bytes), Buffer.from('"}')]),
        );
        assert.equal(res.statusCode, 400, `${bytes}: ${res.body}`);
        assert.equal(errorBody(res).code, 'invalid_json');
      }
      assert.deepEqual((await c.request({ method: 'GET', url: '/plants' })).json(), []);
    });

    it('text nobody can see or that is not Unicode is refused by every batch form, naming the row, creating nothing', async () => {
      const c = await h.user();
      for (const [what, name, shown] of INVISIBLE) {
        const message = `must have a visible character (it holds only spaces or invisible characters such as ${shown})`;
        const json = await postBatchJson(c, { plants: [{ name: 'ok' }, { name }] });
        assert.equal(json.statusCode, 400, `${what} JSON: ${json.body}`);
        assert.deepEqual(errorBody(json).details, [{ field: '/plants/1/name', message }], what);
        // CSV cells are never quoted here: none of these characters needs it.
        const csv = await postBatch(c, `name,tag\nok,\n${name},t\n`, 'text/csv');
        assert.equal(csv.statusCode, 400, `${what} CSV: ${csv.body}`);
        assert.deepEqual(errorBody(csv).details, [{ field: '/rows/2/name', message }], what);
        const ndjson = await postBatch(
          c,
          `{"name":"ok"}\n${JSON.stringify({ name: 'x', tag: name })}\n`,
          'application/x-ndjson',
        );
        assert.equal(ndjson.statusCode, 400, `${what} NDJSON: ${ndjson.body}`);
        assert.deepEqual(errorBody(ndjson).details, [{ field: '/rows/2/tag', message }], what);
      }
      const surrogate = 'must be valid Unicode (it holds \\ud83c, half of a surrogate pair)';
      const json = await postBatchJson(c, { plants: [{ name: 'ok' }, { name: 'ok' }, { name: 'a\ud83c' }] });
      assert.equal(json.statusCode, 400);
      assert.deepEqual(errorBody(json).details, [{ field: '/plants/2/name', message: surrogate }]);
      const ndjson = await postBatch(c, '{"name":"ok"}\n{"name":"a\\ud83c"}\n', 'application/x-ndjson');
      assert.equal(ndjson.statusCode, 400);
      assert.deepEqual(errorBody(ndjson).details, [{ field: '/rows/2/name', message: surrogate }]);
      const garden = await postBatch(c, '{"name":"ok","garden":"\\udfff"}\n', 'application/x-ndjson');
      assert.equal(garden.statusCode, 400);
      assert.equal(errorBody(garden).details?.length, 1);
      assert.deepEqual(
        (await c.request({ method: 'GET', url: '/plants' })).json(),
        [],
        'nothing was created',
      );
    });

    it('reports every offending field at once', async () => {
      const c = await h.user();
      const err = errorBody(await c.create({ name: '', tag: '', id: 'x', extra: 1 }));
      assert.deepEqual((err.details as { field: string }[]).map((d) => d.field).sort(), [
        '/extra',
        '/id',
        '/name',
        '/tag',
      ]);
    });

    for (const [what, payload, message] of [
      ['malformed JSON', '{"name":', /not valid JSON/],
      ['an empty body', '', /must not be empty/],
      ['a JSON array', '[{"name":"a"}]', /request body must be a JSON object/],
      ['a JSON string', '"Fern"', /request body must be a JSON object/],
      ['JSON null', 'null', /request body must be a JSON object/],
      ['a __proto__ key', '{"name":"a","__proto__":{"admin":true}}', /__proto__/],
      [
        'a constructor.prototype key',
        '{"name":"a","constructor":{"prototype":{"x":1}}}',
        /constructor\.prototype/,
      ],
    ] as const) {
      it(`400 for ${what}`, async () => {
        const c = await h.user();
        const res = await c.request({
          method: 'POST',
          url: '/plants',
          headers: { 'content-type': 'application/json' },
          payload,
        });
        assert.equal(res.statusCode, 400);
        assert.match(errorBody(res).message, message);
      });
    }

    it('takes duplicate keys as JSON.parse does (the last wins)', async () => {
      const c = await h.user();
      const res = await c.request({
        method: 'POST',
        url: '/plants',
        headers: { 'content-type': 'application/json' },
        payload: '{"name":"first","name":"second"}',
      });
      assert.equal(res.statusCode, 201);
      assert.deepEqual(res.json(), { name: 'second' });
    });
  });
}
