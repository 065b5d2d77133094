// Contract 3.2: plants in one garden through its own path. POST /gardens/{gid}/plants by role
// (editors and owners 201, a viewer 403, a non-member 404) with Idempotency-Key per garden, and
// GET /gardens/{gid}/plants: id order, Link next on the nested path, its link to
// GET /plants?garden=, and the parameter rules; on every engine.
//
// Contract 3.2 and the version-3 parts of section 2: GET /plants across the caller's gardens.
// Every garden in id order, garden= and include=, cursors bound to their garden, tag, user and
// path, and paging that visits every plant still visible exactly once while plants and
// memberships change; on every engine.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { Client } from '../helpers/app.js';
import { errorBody, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  clientTeam,
  homeOf,
  insufficientRole,
  JSON_TYPE,
  MISSING_GID,
  newGarden,
  newPlant,
  nextLink,
  plantIn,
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
    const team = () => clientTeam(h);

    describe('POST /gardens/{gid}/plants', () => {
      it(
        'editors and owners 201 into that garden (Location, ETag); a viewer 403; a non-member 404',
        T,
        async () => {
          const { o, e, v, n, g } = await team();
          const byOwner = await plantIn(o, g, { name: 'Owner’s', tag: 't' });
          assert.equal(byOwner.statusCode, 201);
          assert.deepEqual(byOwner.json(), { name: 'Owner’s', tag: 't' });
          assert.match(String(byOwner.headers.location), /^\/plants\/[0-9]+$/);
          assert.match(String(byOwner.headers.etag), /^"[^"]+"$/);
          const chosen = 8_200_000_000_000 + Math.floor(Math.random() * 1e9);
          const byEditor = await plantIn(e, g, { id: chosen, name: 'Editor’s' });
          assert.equal(byEditor.statusCode, 201);
          assert.equal(byEditor.headers.location, `/plants/${chosen}`);
          insufficientRole(await plantIn(v, g, { name: 'Viewer’s' }), 'viewer');
          const missing = await plantIn(n, g, { name: 'Stranger’s' });
          refused(missing, 404, undefined, 'non-member');
          const nowhere = await plantIn(n, MISSING_GID, { name: 'Stranger’s' });
          assert.deepEqual(missing.json(), nowhere.json(), 'exactly as a garden that does not exist');
          // Both plants are in the garden, and only there.
          const listed = (await get(v, `/plants?garden=${g}&include=id,garden`)).json();
          assert.deepEqual(listed, [
            { id: locationId(byOwner), garden: g, name: 'Owner’s', tag: 't' },
            { id: chosen, garden: g, name: 'Editor’s' },
          ]);
          assert.deepEqual(
            (await get(e, `/plants?garden=${await homeOf(e)}`)).json(),
            [],
            'not in the editor’s home',
          );
          assert.equal((await get(v, `/plants/${chosen}`)).statusCode, 200, 'a viewer reads it');
          assert.equal((await get(n, `/plants/${chosen}`)).statusCode, 404, 'a non-member does not');
          // An id that exists (anyone's) is 409 plant_exists for an editor; the create's body rules hold.
          refused(await plantIn(e, g, { id: chosen, name: 'Again' }), 409, 'plant_exists');
          const elsewhere = locationId(await n.create({ name: 'In n’s home' }));
          refused(await plantIn(e, g, { id: elsewhere, name: 'Again' }), 409, 'plant_exists');
          for (const [what, payload, headers, status] of [
            ['another field', { name: 'x', garden: g }, JSON_TYPE, 400],
            ['no name', { tag: 'x' }, JSON_TYPE, 400],
            ['array', [{ name: 'x' }], JSON_TYPE, 400],
            ['text/plain', '{"name":"x"}', { 'content-type': 'text/plain' }, 415],
            ['over 16 KiB', { name: 'x', tag: 'y'.repeat(17 * 1024) }, JSON_TYPE, 413],
          ] as const) {
            const payloadText = typeof payload === 'string' ? payload : JSON.stringify(payload);
            refused(
              await e.request({ method: 'POST', url: `/gardens/${g}/plants`, headers, payload: payloadText }),
              status,
              undefined,
              `editor, ${what}`,
            );
            // Body checks come before the store's: a non-member with a bad body gets the same answer.
            refused(
              await n.request({ method: 'POST', url: `/gardens/${g}/plants`, headers, payload: payloadText }),
              status,
              undefined,
              `non-member, ${what}`,
            );
          }
          assert.equal((await get(o, `/gardens/${g}/plants`)).json().length, 2, 'nothing else made');
        },
      );

      it(
        'Idempotency-Key: a retry replays the 201; the same key for another garden or for /plants is 422',
        T,
        async () => {
          const o = await h.user();
          const e = await h.user();
          const g1 = await newGarden(o, 'One');
          const g2 = await newGarden(o, 'Two');
          await share(o, g1, e.user, 'editor');
          await share(o, g2, e.user, 'editor');
          const key = { 'idempotency-key': `k-${randomUUID()}` };
          const first = await plantIn(e, g1, { name: 'Once', tag: 'k' }, key);
          assert.equal(first.statusCode, 201);
          const again = await plantIn(e, g1, { tag: 'k', name: 'Once' }, key);
          assert.equal(again.statusCode, 201);
          assert.equal(again.headers['idempotent-replayed'], 'true');
          assert.equal(again.headers.location, first.headers.location);
          assert.equal(again.headers.etag, first.headers.etag);
          assert.deepEqual(again.json(), first.json());
          refused(
            await plantIn(e, g2, { name: 'Once', tag: 'k' }, key),
            422,
            'idempotency_key_reused',
            'another garden',
          );
          refused(
            await e.create({ name: 'Once', tag: 'k' }, key),
            422,
            'idempotency_key_reused',
            'POST /plants',
          );
          refused(
            await plantIn(e, g1, { name: 'Twice', tag: 'k' }, key),
            422,
            'idempotency_key_reused',
            'another body',
          );
          assert.deepEqual((await get(o, `/plants?garden=${g1}&include=id`)).json(), [
            { id: locationId(first), name: 'Once', tag: 'k' },
          ]);
          assert.deepEqual((await get(o, `/plants?garden=${g2}`)).json(), []);
          // A key of /plants is 422 on a garden too.
          const homeKey = { 'idempotency-key': `k-${randomUUID()}` };
          assert.equal((await e.create({ name: 'Home' }, homeKey)).statusCode, 201);
          refused(await plantIn(e, g1, { name: 'Home' }, homeKey), 422, 'idempotency_key_reused');
          // Once the editor is removed, a retry is 404: the garden is gone for it before any replay.
          await unshare(o, g1, e.user);
          refused(
            await plantIn(e, g1, { name: 'Once', tag: 'k' }, key),
            404,
            undefined,
            'a retry after removal',
          );
          // Demoted to viewer, a retry is 403.
          await share(o, g2, e.user, 'viewer');
          const k2 = { 'idempotency-key': `k-${randomUUID()}` };
          await share(o, g2, e.user, 'editor');
          assert.equal((await plantIn(e, g2, { name: 'Then viewer' }, k2)).statusCode, 201);
          await share(o, g2, e.user, 'viewer');
          insufficientRole(await plantIn(e, g2, { name: 'Then viewer' }, k2), 'a retry after demotion');
        },
      );
    });

    describe('GET /gardens/{gid}/plants', () => {
      it(
        'one garden’s plants in id order, to any member; Link next repeats on the nested path with tag and include',
        T,
        async () => {
          const o = await h.user();
          const v = await h.user();
          const g = await newGarden(o, 'Listed');
          const other = await newGarden(o, 'Not listed');
          await share(o, g, v.user, 'viewer');
          await share(o, other, v.user, 'viewer');
          const inG: { id: number; name: string; tag?: string }[] = [];
          for (let i = 0; i < 7; i++) {
            const tag = i % 2 === 0 ? 'even' : undefined;
            const body = tag ? { name: `p${i}`, tag } : { name: `p${i}` };
            inG.push({ id: (await newPlant(o, g, body)).id, ...body });
            await newPlant(o, other, { name: `q${i}`, tag: 'even' });
          }
          await o.create({ name: 'o’s home', tag: 'even' });
          const first = await get(v, `/gardens/${g}/plants?limit=3`);
          assert.equal(first.statusCode, 200);
          assert.equal(first.headers['content-type'], 'application/json; charset=utf-8');
          assert.deepEqual(
            first.json(),
            inG.slice(0, 3).map(({ name, tag }) => (tag ? { name, tag } : { name })),
          );
          const link = nextLink(first)!;
          assert.match(link, new RegExp(`^/gardens/${g}/plants\\?limit=3&cursor=[^&]+$`));
          const all = await walk(
            v,
            `/gardens/${g}/plants?limit=3&include=id`,
            `/gardens/${g}/plants?limit=3&cursor=`,
          );
          assert.equal(all.pages, 3);
          assert.deepEqual(
            ids(all.items),
            inG.map((p) => p.id),
          );
          // tag and include repeat; garden appears in elements when asked, never as a query of the nested link.
          const tagged = await get(v, `/gardens/${g}/plants?limit=2&tag=even&include=garden,version,id`);
          const tagLink = nextLink(tagged)!;
          assert.match(tagLink, /&tag=even/);
          assert.match(tagLink, /&include=garden,version,id/);
          assert.doesNotMatch(tagLink, /garden=/);
          const walked = await walk(
            v,
            `/gardens/${g}/plants?limit=2&tag=even&include=garden,version,id`,
            `/gardens/${g}/plants?`,
          );
          assert.deepEqual(
            walked.items.map((p) => [p.id, p.garden, p.name, p.tag]),
            inG.filter((p) => p.tag === 'even').map((p) => [p.id, g, p.name, 'even']),
          );
          for (const p of walked.items) {
            assert.ok(Number.isInteger(p.version) && p.version! > 0, 'version a positive integer');
            assert.deepEqual(Object.keys(p).sort(), ['garden', 'id', 'name', 'tag', 'version']);
          }
          // Empty: [] and no link.
          const empty = await newGarden(o, 'Empty');
          const none = await get(o, `/gardens/${empty}/plants`);
          assert.deepEqual(none.json(), []);
          assert.equal(none.headers.link, undefined);
        },
      );

      it(
        'GET /plants?garden=G and GET /gardens/G/plants link each to its own path, whichever is asked first',
        T,
        async () => {
          // Both ask for the same page, which the list cache keeps once: the Link must still be the
          // one of the path asked (/plants?garden=G once answered the nested one's).
          const o = await h.user();
          for (const order of [
            ['query', 'nested'],
            ['nested', 'query'],
          ] as const) {
            const g = await newGarden(o, `Links, ${order[0]} first`);
            const made = [];
            for (const name of ['a', 'b', 'c']) made.push((await newPlant(o, g, { name, tag: 't' })).id);
            const url = {
              query: `/plants?garden=${g}&limit=2&tag=t&include=id`,
              nested: `/gardens/${g}/plants?limit=2&tag=t&include=id`,
            };
            const want = {
              query: new RegExp(`^/plants\\?limit=2&cursor=[^&]+&tag=t&garden=${g}&include=id$`),
              nested: new RegExp(`^/gardens/${g}/plants\\?limit=2&cursor=[^&]+&tag=t&include=id$`),
            };
            // Twice each: the second of each is answered from the kept page.
            for (const path of [...order, ...order]) {
              const res = await get(o, url[path]);
              assert.equal(res.statusCode, 200, `${path}: ${res.body}`);
              assert.deepEqual(ids(res.json()), made.slice(0, 2), path);
              const link = nextLink(res);
              assert.match(String(link), want[path], `${order[0]} first, ${path}`);
              const rest = await get(o, link!);
              assert.equal(rest.statusCode, 200, `${path} next: ${rest.body}`);
              assert.deepEqual(ids(rest.json()), made.slice(2), `${path} next`);
              assert.equal(rest.headers.link, undefined);
            }
          }
        },
      );

      it(
        'the same parameter rules: bad limit, include, cursor, unknown parameters 400; a non-member 404; admin 200',
        T,
        async () => {
          const o = await h.user();
          const n = await h.user();
          const admin = await h.user(['plants:admin']);
          const g = await newGarden(o, 'Params');
          await newPlant(o, g, { name: 'a' });
          await newPlant(o, g, { name: 'b' });
          const wrong: string[] = [];
          for (const q of [
            'limit=0',
            'limit=01',
            'limit=1001',
            'limit=-1',
            'limit=1.5',
            'limit=1e2',
            'limit=',
            'limit=2&limit=2',
            'include=id,id',
            'include=name',
            'include=garden,garden',
            'include=',
            'cursor=nonsense',
            'color=green',
            `garden=${g}`,
            `garden=${MISSING_GID}`,
          ]) {
            // Every parameter is checked before any failure is reported, so one run names them all.
            const res = await get(o, `/gardens/${g}/plants?${q}`);
            if (res.statusCode !== 400) wrong.push(`${q}: ${res.statusCode}`);
            else errorBody(res);
          }
          assert.deepEqual(
            wrong,
            [],
            'GET /gardens/{gid}/plants takes the parameters of GET /plants, no others',
          );
          const missing = await get(n, `/gardens/${g}/plants`);
          refused(missing, 404);
          assert.deepEqual(missing.json(), (await get(n, `/gardens/${MISSING_GID}/plants`)).json());
          const seen = await get(admin, `/gardens/${g}/plants?include=garden`);
          assert.equal(seen.statusCode, 200);
          assert.deepEqual(seen.json(), [
            { garden: g, name: 'a' },
            { garden: g, name: 'b' },
          ]);
        },
      );
    });
  });
}

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
