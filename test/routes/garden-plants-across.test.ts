// Contract 3.2 and the version-3 parts of section 2: GET /plants across the caller's gardens.
// Every garden in id order, garden= and include=, cursors bound to their garden, tag, user and
// path, and paging that visits every plant still visible exactly once while plants and
// memberships change; on every engine.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  homeOf,
  MISSING_GID,
  newGarden,
  newPlant,
  nextLink,
  refused,
  share,
  unshare,
} from '../helpers/gardens.js';
import { del, get, ids, type Listed, walk } from '../helpers/plants.js';
import { suiteHarness } from '../helpers/suite.js';

const T = { timeout: 30_000 };

const ascending = (xs: number[]) => xs.every((x, i) => i === 0 || xs[i - 1]! < x);

for (const engine of ENGINES) {
  describe(`plants in gardens (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);

    describe('GET /plants across gardens', () => {
      it(
        'every garden of the caller, in id order; garden= filters (non-member 404); include in any order',
        T,
        async () => {
          const o = await h.user();
          const u = await h.user();
          const g1 = await newGarden(o, 'G1');
          const g2 = await newGarden(o, 'G2');
          const oHome = await homeOf(o);
          const uHome = await homeOf(u);
          await share(o, g1, u.user, 'editor');
          await share(o, g2, u.user, 'viewer');
          const expected: { id: number; garden: string; name: string }[] = [];
          for (let i = 0; i < 4; i++) {
            for (const [g, c] of [
              [g1, o],
              [g2, o],
              [uHome, u],
            ] as const) {
              const name = `${i}-${g.slice(-4)}`;
              expected.push({ id: (await newPlant(c, g, { name })).id, garden: g, name });
            }
            await newPlant(o, oHome, { name: `hidden-${i}` });
          }
          const mine = await get(u, '/plants?include=id,garden&limit=1000');
          assert.equal(mine.statusCode, 200);
          assert.deepEqual(mine.json(), expected);
          assert.ok(ascending(ids(mine.json())));
          assert.deepEqual(
            (await get(u, '/plants')).json(),
            expected.map(({ name }) => ({ name })),
            'without include: exactly {name, tag}',
          );
          for (const g of [g1, g2, uHome]) {
            const only = await get(u, `/plants?garden=${g}&include=id,garden`);
            assert.equal(only.statusCode, 200);
            assert.deepEqual(
              only.json(),
              expected.filter((p) => p.garden === g),
            );
          }
          const notMine = await get(u, `/plants?garden=${oHome}`);
          refused(notMine, 404, undefined, 'garden= of a garden the caller is not in');
          assert.deepEqual(
            notMine.json(),
            (await get(u, `/plants?garden=${MISSING_GID}`)).json(),
            'as one that does not exist',
          );
          // include: any order of id, garden, version; each at most once.
          const orders = [
            'id',
            'garden',
            'version',
            'id,garden',
            'garden,id',
            'garden,version',
            'version,garden',
            'id,version',
            'id,garden,version',
            'id,version,garden',
            'garden,id,version',
            'garden,version,id',
            'version,id,garden',
            'version,garden,id',
          ];
          for (const include of orders) {
            const res = await get(u, `/plants?include=${include}&garden=${g1}`);
            assert.equal(res.statusCode, 200, include);
            const want = include.split(',');
            for (const p of res.json() as Listed[]) {
              assert.deepEqual(Object.keys(p).sort(), [...want, 'name'].sort(), include);
              if (want.includes('version')) assert.ok(Number.isInteger(p.version) && p.version! >= 1);
              if (want.includes('garden')) assert.equal(p.garden, g1);
            }
          }
          for (const bad of [
            'id,garden,id',
            'garden,garden',
            'version,garden,version',
            'id,garden,version,id',
            'Garden',
            'gardens',
            'id,,garden',
            ',id',
            'id,garden,',
            'id%2Cgarden%2Cname',
          ]) {
            refused(await get(u, `/plants?include=${bad}`), 400, undefined, bad);
          }
          // The next link repeats garden= and include.
          const first = await get(u, `/plants?garden=${g1}&limit=1&include=version,garden`);
          const link = nextLink(first)!;
          assert.match(link, new RegExp(`&garden=${g1}`));
          assert.match(link, /&include=version,garden/);
          assert.ok(link.startsWith('/plants?limit=1&cursor='));
          const walked = await walk(u, `/plants?garden=${g1}&limit=1&include=id`, '/plants?limit=1&cursor=');
          assert.deepEqual(
            ids(walked.items),
            expected.filter((p) => p.garden === g1).map((p) => p.id),
          );
        },
      );

      it(
        'a cursor issued for another garden, for all gardens, another tag, another user or path is 400',
        T,
        async () => {
          const o = await h.user();
          const u = await h.user();
          const w = await h.user();
          const g1 = await newGarden(o, 'C1');
          const g2 = await newGarden(o, 'C2');
          for (const g of [g1, g2]) {
            await share(o, g, u.user, 'viewer');
            await share(o, g, w.user, 'viewer');
            for (const name of ['a', 'b', 'c']) await newPlant(o, g, { name, tag: 'x' });
          }
          const cursorOf = async (c: Client, url: string) => {
            const link = nextLink(await get(c, url));
            assert.ok(link, url);
            return new URL(link, 'http://x').searchParams.get('cursor')!;
          };
          const forG1 = await cursorOf(u, `/plants?garden=${g1}&limit=1`);
          const forAll = await cursorOf(u, '/plants?limit=1');
          const forTag = await cursorOf(u, `/plants?garden=${g1}&tag=x&limit=1`);
          const nested = await cursorOf(u, `/gardens/${g1}/plants?limit=1`);
          // Each works where it was issued.
          assert.equal((await get(u, `/plants?garden=${g1}&limit=1&cursor=${forG1}`)).statusCode, 200);
          assert.equal((await get(u, `/plants?limit=1&cursor=${forAll}`)).statusCode, 200);
          assert.equal((await get(u, `/gardens/${g1}/plants?limit=1&cursor=${nested}`)).statusCode, 200);
          for (const [what, c, url] of [
            ['G1’s cursor for G2', u, `/plants?garden=${g2}&cursor=${forG1}`],
            ['G1’s cursor for all gardens', u, `/plants?cursor=${forG1}`],
            ['G1’s cursor with a tag', u, `/plants?garden=${g1}&tag=x&cursor=${forG1}`],
            ['all gardens’ cursor for G1', u, `/plants?garden=${g1}&cursor=${forAll}`],
            ['a tag’s cursor without it', u, `/plants?garden=${g1}&cursor=${forTag}`],
            ['a tag’s cursor for another tag', u, `/plants?garden=${g1}&tag=y&cursor=${forTag}`],
            ['nested G1 cursor on nested G2', u, `/gardens/${g2}/plants?cursor=${nested}`],
            ['G1’s cursor on nested G2', u, `/gardens/${g2}/plants?cursor=${forG1}`],
            ['another member’s cursor, same garden', w, `/plants?garden=${g1}&cursor=${forG1}`],
            ['another member’s cursor, nested', w, `/gardens/${g1}/plants?cursor=${nested}`],
            ['another member’s cursor, all gardens', w, `/plants?cursor=${forAll}`],
          ] as const) {
            const res = await get(c, url);
            refused(res, 400, undefined, what);
            assert.deepEqual(
              res.json().details.map((d: { field: string }) => d.field),
              ['/cursor'],
              what,
            );
          }
        },
      );

      it('following next across k gardens visits every plant that stays visible exactly once, in id order, while plants and memberships change', {
        timeout: 60_000,
      }, async () => {
        const o = await h.user();
        const u = await h.user();
        const K = 6;
        const gardens: string[] = [];
        for (let i = 0; i < K; i++) gardens.push(await newGarden(o, `k${i}`));
        const uHome = await homeOf(u);
        const stays = [uHome, ...gardens.slice(0, 4)];
        const leaves = gardens[4]!; // u is removed from it half-way
        const joins = gardens[5]!; // u is added to it half-way
        for (const g of gardens.slice(0, 5))
          await share(o, g, u.user, g === gardens[1] ? 'editor' : 'viewer');
        // Ids interleaved across every garden: round-robin creates.
        const plants = new Map<number, { garden: string; doomed: boolean }>();
        for (let round = 0; round < 12; round++) {
          for (const g of [uHome, ...gardens]) {
            const c = g === uHome ? u : o;
            const { id } = await newPlant(c, g, {
              name: `r${round}`,
              tag: round % 3 === 0 ? 'third' : 'other',
            });
            plants.set(id, { garden: g, doomed: round % 4 === 1 });
          }
        }
        const doomed = [...plants].filter(([, p]) => p.doomed && stays.includes(p.garden)).map(([id]) => id);
        const stable = [...plants]
          .filter(([, p]) => !p.doomed && stays.includes(p.garden))
          .map(([id]) => id)
          .sort((a, b) => a - b);
        const everVisible = new Set([uHome, ...gardens]);
        const seen: Listed[] = [];
        let next: string | null = '/plants?limit=5&include=id,garden';
        let page = 0;
        let removedAfter = Number.POSITIVE_INFINITY;
        let addedAfter = Number.POSITIVE_INFINITY;
        const pageOf = new Map<number, number>();
        while (next !== null) {
          const res = await get(u, next);
          assert.equal(res.statusCode, 200, res.body);
          const items = res.json() as Listed[];
          for (const p of items) pageOf.set(p.id!, page);
          seen.push(...items);
          for (const p of items) {
            assert.ok(everVisible.has(p.garden!), `${p.id} from a garden u never belonged to`);
            if (p.garden === leaves)
              assert.ok(page <= removedAfter, `${p.id} of the garden u left, listed after`);
            if (p.garden === joins)
              assert.ok(page > addedAfter, `${p.id} of the garden u joined, listed before`);
          }
          next = nextLink(res);
          if (next) assert.match(next, /&include=id,garden$/);
          // Between pages: plants come and go everywhere, and u's memberships change.
          const g = gardens[page % K]!;
          await newPlant(o, g, { name: `new-${page}` });
          const victim = doomed.shift();
          if (victim !== undefined) {
            const c = plants.get(victim)!.garden === uHome ? u : o;
            assert.equal((await del(c, victim)).statusCode, 204);
          }
          if (page === 2) {
            await unshare(o, leaves, u.user);
            removedAfter = page;
          }
          if (page === 5) {
            await share(o, joins, u.user, 'viewer');
            addedAfter = page;
          }
          page++;
          assert.ok(page < 500, 'the walk ends');
        }
        const listed = ids(seen);
        assert.ok(ascending(listed), 'in id order, each at most once');
        const missed = stable.filter((id) => !pageOf.has(id));
        assert.deepEqual(missed, [], 'every plant that stayed visible was listed');
        assert.ok(
          removedAfter < Number.POSITIVE_INFINITY && addedAfter < Number.POSITIVE_INFINITY,
          'the memberships did change mid-walk',
        );
        // The tag filter walks the same way.
        const third = await walk(u, '/plants?limit=3&tag=third&include=id', '/plants?limit=3&cursor=');
        assert.ok(ascending(ids(third.items)));
      });
    });
  });
}
