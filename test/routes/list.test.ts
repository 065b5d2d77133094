import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Client, errorBody, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

/** The target of a `Link: <…>; rel="next"` header, or null. */
function nextLink(res: { headers: Record<string, unknown> }): string | null {
  const link = res.headers.link;
  if (link === undefined) return null;
  const m = /^<([^>]+)>; rel="next"$/.exec(String(link));
  assert.ok(m, `malformed Link header ${String(link)}`);
  return m[1]!;
}

async function walk(c: Client, url: string): Promise<{ names: string[]; pages: number }> {
  const names: string[] = [];
  let pages = 0;
  for (let next: string | null = url; next !== null; pages++) {
    const res = await c.request({ method: 'GET', url: next });
    assert.equal(res.statusCode, 200);
    names.push(...res.json().map((p: { name: string }) => p.name));
    next = nextLink(res);
  }
  return { names, pages };
}

for (const engine of ENGINES) {
  describe(`GET /plants (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await harness(engine);
    });
    after(() => h?.close());

    it('details[].field is a JSON pointer wherever the field is: query, path, cursor and body alike', async () => {
      const c = await h.user();
      const field = async (url: string, method = 'GET') =>
        (await c.request({ method: method as 'GET', url }))
          .json()
          .details.map((d: { field: string }) => d.field);
      assert.deepEqual(await field('/plants?limit=0'), ['/limit']);
      assert.deepEqual(await field('/plants?color=green'), ['/color']);
      assert.deepEqual(await field('/plants?cursor=nonsense'), ['/cursor']);
      assert.deepEqual(await field('/plants/007'), ['/id']);
      assert.deepEqual(await field('/plants/9007199254740992', 'DELETE'), ['/id']);
      const body = await c.create({ name: '' });
      assert.deepEqual(
        body.json().details.map((d: { field: string }) => d.field),
        ['/name'],
      );
    });

    it('include=id adds each id, on every page, and the next link repeats it; other values are 400', async () => {
      const c = await h.user();
      const ids: number[] = [];
      for (const [name, tag] of [
        ['a', 'x'],
        ['b', null],
        ['c', 'x'],
      ] as const) {
        ids.push(locationId(await c.create(tag === null ? { name } : { name, tag })));
      }
      const first = await c.request({ method: 'GET', url: '/plants?limit=2&include=id' });
      assert.deepEqual(first.json(), [
        { id: ids[0], name: 'a', tag: 'x' },
        { id: ids[1], name: 'b' },
      ]);
      const next = nextLink(first);
      assert.match(next!, /&include=id$/);
      assert.deepEqual((await c.request({ method: 'GET', url: next! })).json(), [
        { id: ids[2], name: 'c', tag: 'x' },
      ]);
      const plain = await c.request({ method: 'GET', url: '/plants?limit=2' });
      assert.deepEqual(plain.json(), [{ name: 'a', tag: 'x' }, { name: 'b' }]);
      assert.doesNotMatch(String(plain.headers.link), /include/);
      for (const bad of [
        'include=',
        'include=ID',
        'include=name',
        'include=id&include=id',
        'include=id,name',
        'include=id,id',
        'include=version,version',
        'include=id,version,',
        'include=id;version',
      ]) {
        const res = await c.request({ method: 'GET', url: `/plants?${bad}` });
        assert.equal(res.statusCode, 400, bad);
        errorBody(res);
      }
    });

    it('include=version (alone or with id, in any order) gives each plant the version its ETag names', async () => {
      const c = await h.user();
      const made = [];
      for (const body of [{ name: 'v1', tag: 'x' }, { name: 'v2' }, { name: 'v3' }]) {
        const res = await c.create(body);
        made.push({ id: locationId(res), etag: String(res.headers.etag) });
      }
      const changed = await c.request({
        method: 'PATCH',
        url: `/plants/${made[1]!.id}`,
        headers: { 'content-type': 'application/merge-patch+json', 'if-match': made[1]!.etag },
        payload: '{"tag":"y"}',
      });
      made[1]!.etag = String(changed.headers.etag);
      const version = (etag: string) => Number(etag.slice(1, -1));
      for (const include of ['id,version', 'version,id']) {
        const first = await c.request({ method: 'GET', url: `/plants?limit=2&include=${include}` });
        assert.equal(first.statusCode, 200);
        assert.deepEqual(first.json(), [
          { id: made[0]!.id, version: version(made[0]!.etag), name: 'v1', tag: 'x' },
          { id: made[1]!.id, version: version(made[1]!.etag), name: 'v2', tag: 'y' },
        ]);
        const next = nextLink(first)!;
        assert.match(next, new RegExp(`&include=${include}$`));
        assert.deepEqual((await c.request({ method: 'GET', url: next })).json(), [
          { id: made[2]!.id, version: version(made[2]!.etag), name: 'v3' },
        ]);
      }
      const only = await c.request({ method: 'GET', url: '/plants?include=version&tag=y' });
      assert.deepEqual(only.json(), [{ version: version(made[1]!.etag), name: 'v2', tag: 'y' }]);
      // The listed version, quoted, is the If-Match of a change.
      const listed = (await c.request({ method: 'GET', url: '/plants?include=id,version' })).json()[0];
      const patched = await c.request({
        method: 'PATCH',
        url: `/plants/${listed.id}`,
        headers: { 'content-type': 'application/merge-patch+json', 'if-match': `"${listed.version}"` },
        payload: '{"name":"from the list"}',
      });
      assert.equal(patched.statusCode, 200);
      const after = (await c.request({ method: 'GET', url: '/plants?include=id,version&limit=1' })).json()[0];
      assert.equal(after.name, 'from the list');
      assert.equal(`"${after.version}"`, patched.headers.etag, 'the next list shows the new version at once');
    });

    it('lists only the caller’s plants, by id ascending, as {name, tag}', async () => {
      const a = await h.user();
      const b = await h.user();
      await a.create({ id: 8_100_000_000_003, name: 'third' });
      await a.create({ id: 8_100_000_000_001, name: 'first', tag: 'x' });
      await b.create({ id: 8_100_000_000_002, name: 'not mine' });
      const res = await a.request({ method: 'GET', url: '/plants' });
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      assert.deepEqual(res.json(), [{ name: 'first', tag: 'x' }, { name: 'third' }]);
      assert.equal(res.headers.link, undefined, 'no next link on the last page');
    });

    it('answers an empty array when nothing matches', async () => {
      const c = await h.user();
      const res = await c.request({ method: 'GET', url: '/plants' });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), []);
    });

    it('defaults to 100 per page and pages with an RFC 8288 next link', async () => {
      const c = await h.user();
      for (let i = 0; i < 101; i++) await c.create({ name: `p${i}` });
      const first = await c.request({ method: 'GET', url: '/plants' });
      assert.equal(first.json().length, 100);
      const next = nextLink(first);
      assert.match(next ?? '', /^\/plants\?limit=100&cursor=[A-Za-z0-9_-]+$/);
      const second = await c.request({ method: 'GET', url: next! });
      assert.deepEqual(second.json(), [{ name: 'p100' }]);
      assert.equal(nextLink(second), null);
    });

    it('limit bounds the page; following next visits every plant exactly once in order', async () => {
      const c = await h.user();
      for (let i = 0; i < 7; i++) await c.create({ name: `n${i}` });
      const { names, pages } = await walk(c, '/plants?limit=3');
      assert.deepEqual(names, ['n0', 'n1', 'n2', 'n3', 'n4', 'n5', 'n6']);
      assert.equal(pages, 3);
      assert.equal((await walk(c, '/plants?limit=1000')).pages, 1);
      assert.equal((await walk(c, '/plants?limit=7')).pages, 1, 'an exactly full last page has no next link');
    });

    it('paging stays exact while plants are created and deleted between pages', async () => {
      const c = await h.user();
      const ids: number[] = [];
      for (let i = 0; i < 6; i++) ids.push(locationId(await c.create({ name: `s${i}` })));
      const first = await c.request({ method: 'GET', url: '/plants?limit=2' });
      assert.deepEqual(
        first.json().map((p: { name: string }) => p.name),
        ['s0', 's1'],
      );
      await c.request({ method: 'DELETE', url: `/plants/${ids[0]}` });
      await c.request({ method: 'DELETE', url: `/plants/${ids[3]}` });
      await c.create({ name: 's6' });
      const rest = await walk(c, nextLink(first)!);
      assert.deepEqual(rest.names, ['s2', 's4', 's5', 's6']);
    });

    it('filters by exact tag and repeats tag in the next link', async () => {
      const c = await h.user();
      for (let i = 0; i < 5; i++) await c.create({ name: `t${i}`, tag: i % 2 ? 'a b&c' : 'other' });
      await c.create({ name: 'case', tag: 'A B&C' });
      const first = await c.request({ method: 'GET', url: '/plants?limit=1&tag=a%20b%26c' });
      assert.deepEqual(first.json(), [{ name: 't1', tag: 'a b&c' }]);
      assert.match(nextLink(first)!, /&tag=a%20b%26c$/);
      const all = await walk(c, '/plants?limit=1&tag=a%20b%26c');
      assert.deepEqual(all.names, ['t1', 't3']);
    });

    it('plants:admin lists every user’s plants', async () => {
      const a = await h.user();
      await a.create({ name: 'visible to admin', tag: 'admin-test' });
      const admin = await h.user(['plants:admin']);
      const res = await admin.request({ method: 'GET', url: '/plants?tag=admin-test&limit=1000' });
      assert.ok(res.json().some((p: { name: string }) => p.name === 'visible to admin'));
    });

    for (const q of [
      'limit=',
      'limit=0',
      'limit=-1',
      'limit=+5',
      'limit=1.5',
      'limit=1e2',
      'limit=abc',
      'limit=1001',
      'limit=01',
      'limit=%201',
      'limit=5&limit=6',
      'limit=99999999999999999999',
    ]) {
      it(`400 invalid_parameter for ${q}`, async () => {
        const c = await h.user();
        const res = await c.request({ method: 'GET', url: `/plants?${q}` });
        assert.equal(res.statusCode, 400);
        const err = errorBody(res);
        assert.equal(err.code, 'invalid_parameter');
        assert.match(err.message, /limit/);
      });
    }

    for (const q of ['tag=', 'tag=a&tag=b', `tag=${'x'.repeat(101)}`, 'bogus=1']) {
      it(`400 invalid_parameter for ${q.slice(0, 20)}`, async () => {
        const c = await h.user();
        const res = await c.request({ method: 'GET', url: `/plants?${q}` });
        assert.equal(res.statusCode, 400);
        assert.equal(errorBody(res).code, 'invalid_parameter');
      });
    }

    // These once took the tag's pattern time quadratic in their length. The recheck test
    // (test/unit/redos.test.ts) keeps the patterns linear; this one keeps the answers right.
    for (const [what, tag, message] of [
      ['15,500 characters ending in a control character', `${'a'.repeat(15_500)}%01`, 'must be at most 100'],
      ['one ending in a control character', 'abc%01', 'must not contain control characters'],
      ['a blank one', '%20%E3%80%80', 'must not be blank'],
    ]) {
      it(`400 invalid_parameter for a tag of ${what}`, async () => {
        const c = await h.user();
        const res = await c.request({ method: 'GET', url: `/plants?tag=${tag}` });
        assert.equal(res.statusCode, 400);
        const err = errorBody(res);
        assert.equal(err.code, 'invalid_parameter');
        assert.match(err.message, new RegExp(`^query parameter tag ${message}`));
      });
    }

    it('a query parameter that is not percent-encoded UTF-8 is 400 naming it, on the list, a garden list and the export', async () => {
      const c = await h.user();
      await c.create({ name: 'Fern', tag: '%FF' });
      const cases: [string, string][] = [
        ['tag=%FF', 'tag'], // Latin-1 ÿ, not UTF-8: it once listed the plant tagged with the text "%FF"
        ['tag=%ED%A0%80', 'tag'], // a surrogate encoded as UTF-8 (CESU-8)
        ['tag=caf%E9', 'tag'],
        ['q=100%', 'q'],
        ['q=%C3', 'q'],
        ['garden=%FE%FF', 'garden'],
        ['limit=5&t%FFg=x', 't%FFg'],
      ];
      for (const path of ['/plants', '/plants/export']) {
        for (const [q, name] of cases) {
          const res = await c.request({ method: 'GET', url: `${path}?${q}` });
          assert.equal(res.statusCode, 400, `${path}?${q}: ${res.body}`);
          assert.deepEqual(errorBody(res), {
            error: 400,
            code: 'invalid_parameter',
            message: `query parameter ${name} is not percent-encoded UTF-8: encode each byte of its UTF-8 form as %XX, and % itself as %25`,
            details: [{ field: `/${name}`, message: 'must be percent-encoded UTF-8' }],
          });
        }
      }
      const home = (await c.request({ method: 'GET', url: '/gardens' })).json()[0].id;
      const garden = await c.request({ method: 'GET', url: `/gardens/${home}/plants?tag=%FF` });
      assert.equal(garden.statusCode, 400);
      // The same text, encoded right, is an ordinary filter.
      const ok = await c.request({ method: 'GET', url: '/plants?tag=%25FF' });
      assert.deepEqual(ok.json(), [{ name: 'Fern', tag: '%FF' }]);
      assert.deepEqual((await c.request({ method: 'GET', url: '/plants?q=caf%C3%A9' })).json(), []);
    });

    it('400 invalid_cursor for a forged cursor, another user’s, or another tag’s', async () => {
      const a = await h.user();
      const b = await h.user();
      for (let i = 0; i < 3; i++) await a.create({ name: `c${i}`, tag: 'k' });
      const link = nextLink(await a.request({ method: 'GET', url: '/plants?limit=1&tag=k' }))!;
      const cursor = new URL(link, 'http://x').searchParams.get('cursor')!;
      for (const [who, url] of [
        [b, `/plants?limit=1&tag=k&cursor=${cursor}`],
        [a, `/plants?limit=1&cursor=${cursor}`],
        [a, `/plants?limit=1&tag=j&cursor=${cursor}`],
        [a, '/plants?cursor=not-a-cursor'],
        [a, '/plants?cursor=%00%01'],
        [a, `/plants?cursor=${Buffer.from('1.5.aaaaaaaaaaaaaaaa').toString('base64url')}`],
      ] as const) {
        const res = await who.request({ method: 'GET', url });
        assert.equal(res.statusCode, 400, url);
        assert.equal(errorBody(res).code, 'invalid_cursor');
      }
      const ok = await a.request({ method: 'GET', url: `/plants?limit=5&tag=k&cursor=${cursor}` });
      assert.deepEqual(
        ok.json().map((p: { name: string }) => p.name),
        ['c1', 'c2'],
        'limit may change between pages',
      );
    });
  });
}
