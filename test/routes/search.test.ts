// GET /plants?q= (contract 2): every term a prefix of a word of the name, ignoring case and accents,
// combined with tag, garden, include and keyset pages; checked against a model of its own over
// random names in many scripts, with creates, renames, deletes and membership changes between pages.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { createGarden, homeOf, JSON_TYPE, nextLink, share, unshare } from '../helpers/gardens.js';
import { del, get, patch } from '../helpers/plants.js';
import { suiteHarness } from '../helpers/suite.js';

// The contract's folding, written out here for the model: NFKD, combining marks removed, lower case.
const fold = (s: string) =>
  s.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase().normalize('NFKD').replace(/\p{M}/gu, '');
const words = (name: string) => fold(name).match(/[\p{L}\p{N}]+/gu) ?? [];
function matches(name: string, q: string): boolean {
  const ws = words(name);
  return q
    .trim()
    .split(/\s+/u)
    .map(fold)
    .every((t) => /^[\p{L}\p{N}]+$/u.test(t) && ws.some((w) => w.startsWith(t)));
}

// Words in many scripts, with accents, ligatures, compatibility forms and digits.
const VOCAB = [
  'Monstera',
  'deliciosa',
  'Café',
  'crème',
  'Ficus',
  'Elástica',
  'Λευκή',
  'Φτέρη',
  'Фикус',
  'Кактус',
  '君子蘭',
  '蘭花',
  'Ørkidé',
  'Straße',
  'naïve',
  'ﬁcus',
  'Ⅻ',
  'İstanbul',
  'ǅungla',
  '42',
  '٣٤',
  'Ōsaka',
  'rose',
  'Rosé',
  'ROSA',
  'fern',
  'Fernández',
  'aloe',
  'Aloë',
  'pilea',
  'peperomia',
  'sansevieria',
  'o’neil',
  'x-ray',
  'mon',
  'Mön',
  'del',
  'Dél',
  'नीम',
  'تين',
  'שושן',
  '🌱',
  'Ça',
  'ça va',
];
const pick = <T>(xs: readonly T[], r: () => number) => xs[Math.floor(r() * xs.length)]!;

// A small seeded generator, so that a failure can be run again.
function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

const randomName = (r: () => number) =>
  Array.from({ length: 1 + Math.floor(r() * 3) }, () => pick(VOCAB, r)).join(pick([' ', ' ', '-', ', '], r));

// A query: a prefix of a word of the vocabulary, in its own case or not, or a term that matches nothing.
function randomQuery(r: () => number): string {
  const terms = Array.from({ length: 1 + Math.floor(r() * 2) }, () => {
    const w = pick(VOCAB, r);
    if (r() < 0.1) return 'zqx';
    const cut = [...w].slice(0, 1 + Math.floor(r() * 4)).join('');
    return r() < 0.3 ? cut.toUpperCase() : cut;
  });
  return terms.join(' ');
}

interface ModelPlant {
  id: number;
  garden: string;
  name: string;
  tag: string | null;
}

async function batch(c: Client, garden: string, plants: { name: string; tag?: string }[]): Promise<number[]> {
  const res = await c.request({
    method: 'POST',
    url: `/plants/batch?garden=${garden}`,
    headers: JSON_TYPE,
    payload: JSON.stringify({ plants }),
  });
  assert.equal(res.statusCode, 201, res.body);
  return res.json().ids;
}

for (const engine of ENGINES) {
  describe(`search: GET /plants?q= (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);

    it('finds by word prefixes, ignoring case and accents, in any script', async () => {
      const c = await h.user();
      const home = await homeOf(c);
      const [monstera, cafe, lan, rose, ligature] = await batch(c, home, [
        { name: 'Monstera deliciosa' },
        { name: 'Café rose', tag: 'pink' },
        { name: '君子蘭' },
        { name: 'ROSÉ of Ōsaka' },
        { name: 'ﬁcus Ⅻ' },
      ]);
      const found = async (q: string, more = '') => {
        const res = await get(c, `/plants?include=id&q=${encodeURIComponent(q)}${more}`);
        assert.equal(res.statusCode, 200, `${q}: ${res.body}`);
        return res.json().map((p: { id: number }) => p.id);
      };
      assert.deepEqual(await found('mon del'), [monstera]);
      assert.deepEqual(await found('cafe'), [cafe]);
      assert.deepEqual(await found('CAFÉ'), [cafe]);
      assert.deepEqual(await found('ros'), [cafe, rose]);
      assert.deepEqual(await found('ros', '&tag=pink'), [cafe]);
      assert.deepEqual(await found('osaka rose'), [rose]);
      assert.deepEqual(await found('君子'), [lan]);
      assert.deepEqual(await found('子'), [], 'a prefix of a word, not any part of it');
      assert.deepEqual(await found('fi xii'), [ligature], 'compatibility forms fold (NFKD)');
      assert.deepEqual(await found('eliciosa'), []);
      assert.deepEqual(await found('  mon  '), [monstera], 'trimmed');
      assert.deepEqual(await found('mon zzz'), [], 'every term must match');
    });

    it('finds a name whose folded word is over 100 characters by a term that folds as long (both cut at 100)', async () => {
      const c = await h.user();
      const home = await homeOf(c);
      // "ﬃ" folds to "ffi": 40 of them are a word of 120 characters, indexed by its first 100.
      const [long, other] = await batch(c, home, [{ name: `Ficus ${'ﬃ'.repeat(40)}` }, { name: 'ffi' }]);
      const found = async (q: string) => {
        const res = await get(c, `/plants?include=id&q=${encodeURIComponent(q)}`);
        assert.equal(res.statusCode, 200, `${q}: ${res.body}`);
        return res.json().map((p: { id: number }) => p.id);
      };
      assert.deepEqual(await found('ﬃ'.repeat(40)), [long], 'the whole name as typed');
      assert.deepEqual(await found(`${'ﬃ'.repeat(33)}f`), [long], '100 characters folded');
      assert.deepEqual(await found(`ficus ${'ﬃ'.repeat(34)}`), [long]);
      assert.deepEqual(await found('ﬃ'), [long, other]);
      assert.deepEqual(await found(`${'ﬃ'.repeat(34)}%`), [], 'a symbol past the cut still matches nothing');
    });

    it('takes operators, wildcards and quotes literally, and answers 400 for what is no query', async () => {
      const c = await h.user();
      const home = await homeOf(c);
      const [near] = await batch(c, home, [
        { name: 'NEAR the window' },
        { name: 'OR else' },
        { name: 'a_b %c' },
      ]);
      for (const q of [
        '%',
        '_',
        '*',
        '"',
        "'",
        'mon*',
        '"mon"',
        '-mon',
        'a OR b',
        'NEAR(a b)',
        'a_b',
        '🌱',
        '%c',
      ]) {
        const res = await get(c, `/plants?q=${encodeURIComponent(q)}`);
        assert.equal(res.statusCode, 200, `${q}: ${res.body}`);
        assert.deepEqual(res.json(), [], `${q} is taken literally`);
      }
      const res = await get(c, `/plants?include=id&q=near`);
      assert.deepEqual(
        res.json().map((p: { id: number }) => p.id),
        [near],
        'NEAR is a word like any other',
      );
      // The detail says what is wrong with q, the message the same after "query parameter q".
      for (const [q, detail] of [
        ['', 'must not be empty'],
        ['   ', 'must not be empty'],
        ['a\u0001b', 'must not contain control characters'],
        ['a\nb', 'must not contain control characters'],
        ['x'.repeat(101), 'must be at most 100 characters'],
        ['a b c d e f g h i', 'must have at most 8 terms'],
        ['\u0301', 'must have a letter, digit or symbol besides accents in each term'],
        ['fern \u0301\u0301', 'must have a letter, digit or symbol besides accents in each term'],
      ]) {
        const bad = await get(c, `/plants?q=${encodeURIComponent(q!)}`);
        assert.equal(bad.statusCode, 400, `${JSON.stringify(q)}: ${bad.body}`);
        assert.deepEqual(bad.json().details, [{ field: '/q', message: detail }], JSON.stringify(q));
        assert.equal(bad.json().message, `query parameter q ${detail}`, JSON.stringify(q));
      }
      assert.equal(
        (await get(c, `/plants?q=${' '.repeat(50)}${'x'.repeat(100)}`)).statusCode,
        200,
        '100 after trimming',
      );
      assert.equal((await get(c, '/plants?q=a&q=b')).statusCode, 400, 'repeated');
    });

    it('binds cursors to q and repeats q in the next link; another q is 400', async () => {
      const c = await h.user();
      const home = await homeOf(c);
      await batch(
        c,
        home,
        Array.from({ length: 5 }, (_, i) => ({ name: `Aloe ${i}` })),
      );
      const first = await get(c, '/plants?limit=2&q=aloe');
      const next = nextLink(first);
      assert.ok(next?.includes('q=aloe'), String(next));
      const cursor = /cursor=([^&]+)/.exec(next!)![1];
      assert.equal((await get(c, `/plants?limit=2&q=aloe&cursor=${cursor}`)).statusCode, 200);
      assert.equal((await get(c, `/plants?limit=2&q=alo&cursor=${cursor}`)).statusCode, 400);
      assert.equal((await get(c, `/plants?limit=2&cursor=${cursor}`)).statusCode, 400);
    });

    it('a bad q or cursor answers 400 before a garden the caller cannot see is looked up (404 comes after)', async () => {
      const c = await h.user();
      const other = await h.user();
      const hidden = await homeOf(other);
      const unknown = 'gdn_000000000000000000000000';
      for (const gid of [unknown, hidden]) {
        for (const [url, code] of [
          [`/plants?garden=${gid}&q=%20`, 'invalid_parameter'],
          [`/plants?garden=${gid}&cursor=forged`, 'invalid_cursor'],
          [`/gardens/${gid}/plants?q=%20`, 'invalid_parameter'],
          [`/gardens/${gid}/plants?cursor=forged`, 'invalid_cursor'],
          [`/plants/export?garden=${gid}&q=%20`, 'invalid_parameter'],
        ] as const) {
          const res = await get(c, url);
          assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
          assert.equal(JSON.parse(res.body).code, code, url);
        }
        assert.equal((await get(c, `/plants?garden=${gid}&q=aloe`)).statusCode, 404, 'a good q: 404');
      }
    });

    it('answers a repeated search from the list cache only while it is exact: after each write the page follows', async () => {
      const a = await h.user();
      const b = await h.user();
      const home = await homeOf(a);
      const shared = (await createGarden(b, 'Shared')).id;
      const [m1, f2] = await batch(a, home, [{ name: 'Monstera one' }, { name: 'Ficus two' }]);
      const found = async (q: string, more = '') => {
        const res = await get(a, `/plants?include=id&q=${encodeURIComponent(q)}${more}`);
        assert.equal(res.statusCode, 200, `${q}: ${res.body}`);
        return res.json().map((p: { id: number }) => p.id);
      };
      assert.deepEqual(await found('mon'), [m1]);
      assert.deepEqual(await found('mon'), [m1], 'asked again, nothing written');
      assert.equal((await patch(a, f2!, { name: 'Monstera two' }, { 'if-match': '*' })).statusCode, 200);
      assert.deepEqual(await found('mon'), [m1, f2], 'a rename into the matches');
      assert.deepEqual(await found('fic'), []);
      const [m3] = await batch(a, home, [{ name: 'monstera three' }]);
      assert.deepEqual(await found('mon'), [m1, f2, m3], 'a create after every other plant');
      assert.equal((await patch(a, m1!, { name: 'Ficus again' }, { 'if-match': '*' })).statusCode, 200);
      assert.deepEqual(await found('mon'), [f2, m3], 'a rename out of the matches');
      assert.deepEqual(await found('fic'), [m1]);
      assert.equal((await del(a, m3!)).statusCode, 204);
      assert.deepEqual(await found('mon'), [f2], 'a delete');
      // Pages: a kept first page stays exact when a new match lands on the last one.
      const first = await get(a, '/plants?include=id&limit=1&q=mon');
      const [m4] = await batch(a, home, [{ name: 'Monstera four' }]);
      const again = await get(a, '/plants?include=id&limit=1&q=mon');
      assert.equal(again.body, first.body);
      assert.deepEqual(await found('mon', '&limit=5'), [f2, m4]);
      // Membership: a garden joined shows its matches at once, and a garden left hides them at once.
      const [b1] = await batch(b, shared, [{ name: 'Monstera of b' }]);
      assert.deepEqual(await found('mon'), [f2, m4]);
      await share(b, shared, a.user, 'viewer');
      assert.deepEqual(await found('mon'), [f2, m4, b1]);
      await unshare(b, shared, a.user);
      assert.deepEqual(await found('mon'), [f2, m4]);
    });

    it('agrees with a model over random names, with writes and membership changes between pages', async () => {
      const r = rng(Number(process.env.SEARCH_SEED ?? 20261124));
      const a = await h.user();
      const b = await h.user();
      const homeA = await homeOf(a);
      const shared = (await createGarden(b, 'Shared')).id;
      const hidden = (await createGarden(b, 'Hidden')).id;
      await share(b, shared, a.user, 'editor');
      const model = new Map<number, ModelPlant>();
      const member = { shared: true };
      const add = async (who: Client, garden: string, n: number) => {
        const plants = Array.from({ length: n }, () => ({
          name: randomName(r),
          ...(r() < 0.3 ? { tag: pick(['x', 'y'], r) } : {}),
        }));
        const ids = await batch(who, garden, plants);
        ids.forEach((id, i) => {
          model.set(id, { id, garden, name: plants[i]!.name, tag: plants[i]!.tag ?? null });
        });
      };
      await add(a, homeA, 60);
      await add(b, shared, 60);
      await add(b, hidden, 30);
      const visible = (p: ModelPlant) => p.garden === homeA || (p.garden === shared && member.shared);
      const shown = (q: string, tag: string | null) =>
        new Set(
          [...model.values()]
            .filter((p) => visible(p) && matches(p.name, q) && (tag === null || p.tag === tag))
            .map((p) => p.id),
        );
      // One random write between pages: a create, a rename, a delete, or A leaving or rejoining.
      const mutate = async () => {
        const roll = r();
        const mine = [...model.values()];
        const writer = (p: ModelPlant) => (p.garden === homeA ? a : b);
        if (roll < 0.15) await add(a, homeA, 2);
        else if (roll < 0.3) await add(b, pick([shared, hidden], r), 2);
        else if (roll < 0.55 && mine.length > 0) {
          const p = pick(mine, r);
          const name = randomName(r);
          const res = await patch(writer(p), p.id, { name }, { 'if-match': '*' });
          assert.equal(res.statusCode, 200, res.body);
          p.name = name;
        } else if (roll < 0.8 && mine.length > 0) {
          const p = pick(mine, r);
          assert.equal((await del(writer(p), p.id)).statusCode, 204);
          model.delete(p.id);
        } else if (member.shared) {
          await unshare(b, shared, a.user);
          member.shared = false;
        } else {
          await share(b, shared, a.user, 'viewer');
          member.shared = true;
        }
      };
      for (let round = 0; round < 30; round++) {
        const q = randomQuery(r);
        const tag = r() < 0.2 ? 'x' : null;
        const limit = 1 + Math.floor(r() * 8);
        const url = `/plants?include=id,garden&limit=${limit}&q=${encodeURIComponent(q)}${tag ? `&tag=${tag}` : ''}`;
        let always = shown(q, tag);
        const ever = new Set(always);
        const got: number[] = [];
        for (let next: string | null = url; next !== null; ) {
          const res = await get(a, next);
          assert.equal(res.statusCode, 200, `${q}: ${res.body}`);
          const page = res.json() as { id: number; garden: string; name: string }[];
          assert.ok(page.length <= limit);
          for (const p of page) {
            assert.ok(ever.has(p.id), `q=${q}: ${p.id} "${p.name}" was never visible and matching`);
            assert.notEqual(p.garden, hidden);
            got.push(p.id);
          }
          next = nextLink(res);
          if (next !== null) assert.ok(next.includes(`q=${encodeURIComponent(q)}`));
          if (r() < 0.5) {
            await mutate();
            const now = shown(q, tag);
            always = new Set([...always].filter((id) => now.has(id)));
            for (const id of now) ever.add(id);
          }
        }
        assert.deepEqual(
          got,
          [...got].sort((x, y) => x - y),
          `q=${q}: in id order`,
        );
        assert.equal(new Set(got).size, got.length, `q=${q}: none twice`);
        for (const id of always)
          assert.ok(
            got.includes(id),
            `q=${q}: ${id} "${model.get(id)?.name}" was visible and matching throughout but not listed`,
          );
      }
    });
  });
}
