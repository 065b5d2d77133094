import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Client, errorBody, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

const MERGE = { 'content-type': 'application/merge-patch+json' };

for (const engine of ENGINES) {
  describe(`PATCH /plants/{id} and ETags (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await harness(engine);
    });
    after(() => h?.close());

    const make = async (c: Client, body: unknown = { name: 'Fern', tag: 'indoor' }) => {
      const res = await c.create(body);
      assert.equal(res.statusCode, 201);
      return { id: locationId(res), etag: String(res.headers.etag) };
    };
    const patch = (c: Client, id: number, body: unknown, headers: Record<string, string> = {}) =>
      c.request({
        method: 'PATCH',
        url: `/plants/${id}`,
        headers: { ...MERGE, ...headers },
        payload: typeof body === 'string' ? body : JSON.stringify(body),
      });
    const read = (c: Client, id: number, headers: Record<string, string> = {}) =>
      c.request({ method: 'GET', url: `/plants/${id}`, headers });

    it('every answer carrying one plant has a strong, quoted ETag: POST 201, GET 200, PATCH 200', async () => {
      const c = await h.user();
      const { id, etag } = await make(c);
      assert.match(etag, /^"[^"]+"$/);
      const got = await read(c, id);
      assert.equal(got.headers.etag, etag);
      const changed = await patch(c, id, { name: 'Boston fern' }, { 'if-match': etag });
      assert.equal(changed.statusCode, 200);
      assert.deepEqual(changed.json(), { name: 'Boston fern', tag: 'indoor' });
      assert.match(String(changed.headers.etag), /^"[^"]+"$/);
      assert.notEqual(changed.headers.etag, etag);
      assert.equal((await read(c, id)).headers.etag, changed.headers.etag);
    });

    it('merge-patch rules: absent fields stay, tag null removes the tag, application/json is accepted', async () => {
      const c = await h.user();
      const { id, etag } = await make(c);
      const a = await patch(c, id, { tag: 'outdoor' }, { 'if-match': etag });
      assert.deepEqual(a.json(), { name: 'Fern', tag: 'outdoor' });
      const b = await patch(c, id, { tag: null }, { 'if-match': String(a.headers.etag) });
      assert.equal(b.statusCode, 200);
      assert.deepEqual(b.json(), { name: 'Fern' });
      const json = await patch(
        c,
        id,
        { name: '  spaced  ', tag: 'x' },
        { 'if-match': String(b.headers.etag), 'content-type': 'application/json; charset=utf-8' },
      );
      assert.equal(json.statusCode, 200);
      assert.deepEqual((await read(c, id)).json(), { name: '  spaced  ', tag: 'x' });
    });

    it('a patch that changes nothing answers 200 with the same ETag', async () => {
      const c = await h.user();
      const { id, etag } = await make(c);
      for (const body of [{}, { name: 'Fern' }, { name: 'Fern', tag: 'indoor' }]) {
        const res = await patch(c, id, body, { 'if-match': etag });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers.etag, etag);
        assert.deepEqual(res.json(), { name: 'Fern', tag: 'indoor' });
      }
      const untagged = await make(c, { name: 'Bare' });
      const same = await patch(c, untagged.id, { tag: null }, { 'if-match': untagged.etag });
      assert.equal(same.headers.etag, untagged.etag);
    });

    it('order of checks: 415 → 413 → 400 → 428 → 404 → 412', async () => {
      const c = await h.user();
      const other = await h.user();
      const { id, etag } = await make(c);
      const text = await patch(c, id, { name: 'x' }, { 'content-type': 'text/plain', 'if-match': etag });
      assert.equal(text.statusCode, 415);
      assert.equal(errorBody(text).code, 'unsupported_media_type');
      const big = await patch(c, id, { name: 'x'.repeat(17_000) });
      assert.equal(big.statusCode, 413);
      const bad = await patch(c, id, { name: '' });
      assert.equal(bad.statusCode, 400, 'a bad body is 400 before a missing If-Match');
      const none = await patch(c, id, { name: 'x' });
      assert.equal(none.statusCode, 428);
      assert.equal(errorBody(none).code, 'precondition_required');
      assert.equal((await patch(c, id + 1_000_000, { name: 'x' })).statusCode, 428, '428 before 404');
      const hidden = await patch(other, id, { name: 'x' }, { 'if-match': etag });
      assert.equal(hidden.statusCode, 404, "another user's plant is 404, even with its right ETag");
      assert.equal(errorBody(hidden).code, 'plant_not_found');
      const missing = await patch(c, id + 1_000_000, { name: 'x' }, { 'if-match': '"1"' });
      assert.equal(missing.statusCode, 404);
      const stale = await patch(c, id, { name: 'x' }, { 'if-match': '"999999999"' });
      assert.equal(stale.statusCode, 412);
      assert.equal(errorBody(stale).code, 'precondition_failed');
      assert.deepEqual((await read(c, id)).json(), { name: 'Fern', tag: 'indoor' }, 'nothing changed');
      const noScope = await h.user(['plants:read']);
      assert.equal((await patch(noScope, id, { name: 'x' }, { 'if-match': etag })).statusCode, 403);
      const anon = await h.app.inject({
        method: 'PATCH',
        url: `/plants/${id}`,
        headers: MERGE,
        payload: '{}',
      });
      assert.equal(anon.statusCode, 401);
      assert.equal((await patch(c, 0, {}, { 'if-match': etag })).statusCode, 400);
    });

    it('If-Match: * matches any version; a list matches any of its ETags; weak and malformed ones never', async () => {
      const c = await h.user();
      const { id, etag } = await make(c);
      const star = await patch(c, id, { name: 'A' }, { 'if-match': '*' });
      assert.equal(star.statusCode, 200);
      const now = String(star.headers.etag);
      assert.equal((await patch(c, id, { name: 'B' }, { 'if-match': `${etag}, ${now}` })).statusCode, 200);
      const latest = String((await read(c, id)).headers.etag);
      for (const h of [`W/${latest}`, latest.slice(1, -1), '"', 'garbage']) {
        assert.equal((await patch(c, id, { name: 'C' }, { 'if-match': h })).statusCode, 412, h);
      }
    });

    it('an If-Match that is not a quoted ETag is 412 saying to send the ETag exactly as sent, quoted; PATCH and DELETE', async () => {
      const c = await h.user();
      const { id, etag } = await make(c);
      const bare = etag.slice(1, -1);
      // [If-Match, the part that is not an ETag, the ETag the message shows]
      const cases: [string, string, string][] = [
        [bare, bare, `"${bare}"`],
        [`W/${etag}`, `W/${etag}`, `"${bare}"`],
        [`"999999", ${bare}`, bare, `"${bare}"`],
        ['garbage', 'garbage', '"3"'],
      ];
      for (const [header, odd, example] of cases) {
        for (const res of [
          await patch(c, id, { name: 'C' }, { 'if-match': header }),
          await c.request({ method: 'DELETE', url: `/plants/${id}`, headers: { 'if-match': header } }),
        ]) {
          assert.equal(res.statusCode, 412, `${header}: ${res.body}`);
          const err = errorBody(res);
          assert.equal(err.code, 'precondition_failed');
          assert.equal(
            err.message,
            `If-Match must hold the ETag exactly as the service sent it, quotes included (If-Match: ${example}), or *; the value ${odd} is not, so it matched no version of the plant and nothing changed`,
          );
        }
      }
      assert.equal((await read(c, id)).headers.etag, etag, 'nothing changed');
      // A quoted ETag that is stale keeps the message it had.
      const stale = await patch(c, id, { name: 'D' }, { 'if-match': '"999999"' });
      assert.equal(stale.statusCode, 412);
      assert.match(errorBody(stale).message, /^the plant has changed since the ETag in If-Match was read/);
    });

    it('If-None-Match on GET: 304 with no body for the current ETag or *, 200 otherwise', async () => {
      const c = await h.user();
      const { id, etag } = await make(c);
      const same = await read(c, id, { 'if-none-match': etag });
      assert.equal(same.statusCode, 304);
      assert.equal(same.body, '');
      assert.equal(same.headers.etag, etag);
      assert.equal((await read(c, id, { 'if-none-match': '*' })).statusCode, 304);
      assert.equal((await read(c, id, { 'if-none-match': `"1", ${etag}` })).statusCode, 304);
      await patch(c, id, { name: 'New' }, { 'if-match': etag });
      const changed = await read(c, id, { 'if-none-match': etag });
      assert.equal(changed.statusCode, 200);
      assert.deepEqual(changed.json(), { name: 'New', tag: 'indoor' });
      const other = await h.user();
      assert.equal((await read(other, id, { 'if-none-match': '*' })).statusCode, 404);
    });

    it('DELETE with a stale If-Match is 412 and keeps the plant; with the current one, 204', async () => {
      const c = await h.user();
      const { id, etag } = await make(c);
      const changed = await patch(c, id, { name: 'Changed' }, { 'if-match': etag });
      const stale = await c.request({
        method: 'DELETE',
        url: `/plants/${id}`,
        headers: { 'if-match': etag },
      });
      assert.equal(stale.statusCode, 412);
      assert.equal(errorBody(stale).code, 'precondition_failed');
      assert.equal((await read(c, id)).statusCode, 200);
      const other = await h.user();
      const hidden = await other.request({
        method: 'DELETE',
        url: `/plants/${id}`,
        headers: { 'if-match': etag },
      });
      assert.equal(hidden.statusCode, 404, 'not visible: 404, not 412');
      const ok = await c.request({
        method: 'DELETE',
        url: `/plants/${id}`,
        headers: { 'if-match': String(changed.headers.etag) },
      });
      assert.equal(ok.statusCode, 204);
      assert.equal((await read(c, id)).statusCode, 404);
    });

    it('a plant re-created under a deleted id never repeats an ETag the deleted one had', async () => {
      const c = await h.user();
      const id = 8_000_000_000 + Math.floor(Math.random() * 1e9);
      const seen = new Set<string>();
      for (let round = 0; round < 3; round++) {
        const made = await c.create({ id, name: 'Phoenix' });
        assert.equal(made.statusCode, 201);
        const etags = [String(made.headers.etag)];
        const p = await patch(c, id, { tag: `r${round}` }, { 'if-match': etags[0]! });
        etags.push(String(p.headers.etag));
        for (const e of etags) {
          assert.ok(!seen.has(e), `ETag ${e} repeated`);
          seen.add(e);
        }
        assert.equal((await c.request({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 204);
      }
      // A stale ETag of an earlier incarnation never matches the new one.
      const again = await c.create({ id, name: 'Phoenix' });
      for (const old of seen) {
        assert.equal((await patch(c, id, { name: 'x' }, { 'if-match': old })).statusCode, 412);
      }
      assert.ok(!seen.has(String(again.headers.etag)));
    });

    it('an admin changes any plant; the owner sees the change', async () => {
      const owner = await h.user();
      const admin = await h.user(['plants:admin']);
      const { id, etag } = await make(owner);
      const res = await patch(admin, id, { name: 'By admin' }, { 'if-match': etag });
      assert.equal(res.statusCode, 200);
      assert.deepEqual((await read(owner, id)).json(), { name: 'By admin', tag: 'indoor' });
    });

    it('many concurrent PATCHes with one ETag: exactly one 200, the rest 412', async () => {
      const c = await h.user();
      const { id, etag } = await make(c);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => patch(c, id, { name: `racer ${i}` }, { 'if-match': etag })),
      );
      const codes = answers.map((r) => r.statusCode).sort();
      assert.deepEqual(codes, [200, ...Array(19).fill(412)]);
      const winner = answers.find((r) => r.statusCode === 200)!;
      assert.deepEqual((await read(c, id)).json(), winner.json());
      assert.equal((await read(c, id)).headers.etag, winner.headers.etag);
    });

    it('a patch racing a delete: either the change then the delete, or the delete and a 404', async () => {
      const c = await h.user();
      for (let i = 0; i < 10; i++) {
        const { id, etag } = await make(c);
        const [p, d] = await Promise.all([
          patch(c, id, { name: 'racing' }, { 'if-match': etag }),
          c.request({ method: 'DELETE', url: `/plants/${id}` }),
        ]);
        assert.equal(d.statusCode, 204);
        assert.ok([200, 404].includes(p.statusCode), `patch answered ${p.statusCode}`);
        assert.equal((await read(c, id)).statusCode, 404);
      }
    });

    it('Idempotency-Key: a retry replays the first 200 though its If-Match is stale; another body is 422', async () => {
      const c = await h.user();
      const { id, etag } = await make(c);
      const key = { 'idempotency-key': `patch-${Math.random()}`, 'if-match': etag };
      const first = await patch(c, id, { name: 'Once' }, key);
      assert.equal(first.statusCode, 200);
      await patch(c, id, { tag: 'later' }, { 'if-match': String(first.headers.etag) });
      const again = await patch(c, id, { name: 'Once' }, key);
      assert.equal(again.statusCode, 200);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.deepEqual(again.json(), first.json());
      assert.equal(again.headers.etag, first.headers.etag);
      const reused = await patch(c, id, { name: 'Twice' }, key);
      assert.equal(reused.statusCode, 422);
      assert.equal(errorBody(reused).code, 'idempotency_key_reused');
      // The key of a create is not the key of a change.
      const createKey = `create-${Math.random()}`;
      await c.create({ name: 'Made' }, { 'idempotency-key': createKey });
      const cross = await patch(c, id, { name: 'Made' }, { 'if-match': '*', 'idempotency-key': createKey });
      assert.equal(cross.statusCode, 422);
      // A refused patch (412) leaves its key free: the retry with a current ETag applies.
      const k2 = `patch-${Math.random()}`;
      const refused = await patch(c, id, { name: 'Late' }, { 'if-match': etag, 'idempotency-key': k2 });
      assert.equal(refused.statusCode, 412);
      const retried = await patch(c, id, { name: 'Late' }, { 'if-match': '*', 'idempotency-key': k2 });
      assert.equal(retried.statusCode, 200);
      assert.equal(retried.headers['idempotent-replayed'], undefined);
    });

    it('hostile bodies are 400 and change nothing', async () => {
      const c = await h.user();
      const { id, etag } = await make(c);
      let deep = '"x"';
      for (let i = 0; i < 2_000; i++) deep = `{"a":${deep}}`;
      const bodies: string[] = [
        '[]',
        '[{"name":"x"}]',
        'null',
        '"name"',
        '42',
        '',
        '{',
        '{"name":null}',
        '{"name":""}',
        '{"name":"   "}',
        '{"name":"a\\u0000b"}',
        '{"tag":""}',
        '{"tag":"\\n"}',
        `{"name":"${'x'.repeat(201)}"}`,
        `{"tag":"${'x'.repeat(101)}"}`,
        '{"id":5}',
        '{"garden":"gdn_x"}',
        '{"version":3}',
        '{"name":["x"]}',
        '{"name":{"first":"x"}}',
        '{"tag":5}',
        '{"__proto__":{"name":"x"}}',
        '{"constructor":{"prototype":{"name":"x"}}}',
        `{"name":${deep}}`,
      ];
      for (const body of bodies) {
        const res = await patch(c, id, body, { 'if-match': etag });
        assert.equal(res.statusCode, 400, `${body.slice(0, 60)} → ${res.statusCode} ${res.body}`);
        errorBody(res);
      }
      const now = await read(c, id);
      assert.deepEqual(now.json(), { name: 'Fern', tag: 'indoor' });
      assert.equal(now.headers.etag, etag);
    });

    it('a name or tag nobody can see, or not valid Unicode, is 400 naming the field; the plant keeps its ETag', async () => {
      const c = await h.user();
      const { id, etag } = await make(c);
      const cases: [string, string, string][] = [
        [
          '{"name":"\\u200b"}',
          '/name',
          'must have a visible character (it holds only spaces or invisible characters such as U+200B)',
        ],
        [
          '{"name":" \\u3164\\u00ad "}',
          '/name',
          'must have a visible character (it holds only spaces or invisible characters such as U+3164)',
        ],
        [
          '{"name":"\\u202e\\u2069"}',
          '/name',
          'must have a visible character (it holds only spaces or invisible characters such as U+202E)',
        ],
        [
          '{"tag":"\\ufeff"}',
          '/tag',
          'must have a visible character (it holds only spaces or invisible characters such as U+FEFF)',
        ],
        [
          '{"name":"Fern\\ud800"}',
          '/name',
          'must be valid Unicode (it holds \\ud800, half of a surrogate pair)',
        ],
        ['{"tag":"\\udfff"}', '/tag', 'must be valid Unicode (it holds \\udfff, half of a surrogate pair)'],
      ];
      for (const [body, field, message] of cases) {
        const res = await patch(c, id, body, { 'if-match': etag });
        assert.equal(res.statusCode, 400, `${body}: ${res.body}`);
        assert.deepEqual(errorBody(res), {
          error: 400,
          code: 'invalid_body',
          message: `${field.slice(1)} ${message}`,
          details: [{ field, message }],
        });
      }
      const now = await read(c, id);
      assert.deepEqual(now.json(), { name: 'Fern', tag: 'indoor' });
      assert.equal(now.headers.etag, etag);
      // Bidi controls with letters are a name like any other, kept as sent.
      const rtl = await patch(c, id, { name: '\u2067فرن\u2069 fern' }, { 'if-match': etag });
      assert.equal(rtl.statusCode, 200);
      assert.deepEqual((await read(c, id)).json(), { name: '\u2067فرن\u2069 fern', tag: 'indoor' });
    });

    it('a retag moves the plant between tag filters on the very next list; a rename shows at once', async () => {
      const c = await h.user();
      const { id, etag } = await make(c, { name: 'Mover', tag: 'left' });
      const list = async (q: string) =>
        (await c.request({ method: 'GET', url: `/plants?include=id${q}` })).json() as {
          id: number;
          name: string;
        }[];
      // Warm every page the change must reach (the list cache keeps pages between requests).
      assert.deepEqual(
        (await list('&tag=left')).map((p) => p.id),
        [id],
      );
      assert.deepEqual(await list('&tag=right'), []);
      assert.equal((await list('')).find((p) => p.id === id)?.name, 'Mover');
      await patch(c, id, { name: 'Moved', tag: 'right' }, { 'if-match': etag });
      assert.deepEqual(await list('&tag=left'), []);
      assert.deepEqual(
        (await list('&tag=right')).map((p) => p.id),
        [id],
      );
      assert.equal((await list('')).find((p) => p.id === id)?.name, 'Moved');
    });

    it('HEAD, OPTIONS and others on /plants/{id} name PATCH in Allow', async () => {
      const c = await h.user();
      const res = await c.request({ method: 'PUT', url: '/plants/1' });
      assert.equal(res.statusCode, 405);
      assert.equal(res.headers.allow, 'DELETE, GET, HEAD, PATCH');
    });
  });
}
