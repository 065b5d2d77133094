// Contract 3.2: home gardens. A new user has exactly one, made on first need (a first GET
// /gardens, or a POST /plants that puts the plant in it, also as its very first request);
// home: true only for its user; shared like any garden while its user stays its owner
// (409 home_garden); on every engine.
//
// Contract 3.2: POST, GET, PATCH and DELETE /gardens. The list (home first, then by creation,
// with the caller's role), name and body rules, the order of checks by role (a non-member 404,
// viewer and editor 403), a garden with plants is not deleted, and plants:admin as an owner of
// every garden; on every engine.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { clientAs, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  assertGardenShape,
  createGarden,
  deleteGarden,
  enc,
  type Garden,
  getGarden,
  insufficientRole,
  JSON_TYPE,
  listGardens,
  type Member,
  MISSING_GID,
  members,
  patchGarden,
  plantIn,
  postGarden,
  putMember,
  refused,
  removeMember,
  share,
} from '../helpers/gardens.js';
import { suiteHarness } from '../helpers/suite.js';

const T = { timeout: 30_000 };

/** Compares two error answers as the client sees them (status and body). */
function sameAnswer(a: LightMyRequestResponse, b: LightMyRequestResponse, what: string): void {
  assert.equal(a.statusCode, b.statusCode, what);
  assert.deepEqual(a.json(), b.json(), what);
}

for (const engine of ENGINES) {
  describe(`gardens and members (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);

    describe('home gardens', () => {
      it(
        'a new user has exactly its home garden, made on first need: {id, name, home: true, role: owner, createdAt}',
        T,
        async () => {
          const c = await h.user();
          const res = await c.request({ method: 'GET', url: '/gardens' });
          assert.equal(res.statusCode, 200);
          assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
          const list: Garden[] = res.json();
          assert.equal(list.length, 1);
          const home = list[0]!;
          assertGardenShape(home);
          assert.equal(home.home, true);
          assert.equal(home.role, 'owner');
          assert.ok(home.name.length >= 1 && home.name.length <= 100);
          assert.deepEqual(await listGardens(c), [home], 'made once, not again');
          const one = await getGarden(c, home.id);
          assert.equal(one.statusCode, 200);
          assert.deepEqual(one.json(), home);
          const mine = (await members(c, home.id)).json() as Member[];
          assert.deepEqual(
            mine.map((m) => [m.user, m.role]),
            [[c.user, 'owner']],
          );
        },
      );

      it(
        'POST /plants puts the plant in the home garden, also as the very first request of a user',
        T,
        async () => {
          const c = await h.user();
          const first = await c.create({ name: 'First ever' });
          assert.equal(first.statusCode, 201);
          const id = locationId(first);
          const gardens = await listGardens(c);
          assert.equal(gardens.length, 1, 'one home garden, made by the create');
          const home = gardens[0]!;
          assert.equal(home.home, true);
          const listed = (await c.request({ method: 'GET', url: '/plants?include=id,garden' })).json();
          assert.deepEqual(listed, [{ id, garden: home.id, name: 'First ever' }]);
          const nested = (
            await c.request({ method: 'GET', url: `/gardens/${home.id}/plants?include=id` })
          ).json();
          assert.deepEqual(nested, [{ id, name: 'First ever' }]);
          // A member of other gardens still creates into its home garden with POST /plants.
          const other = await createGarden(c, 'Elsewhere');
          const second = locationId(await c.create({ name: 'Second' }));
          const inHome = (
            await c.request({ method: 'GET', url: `/plants?garden=${home.id}&include=id` })
          ).json();
          assert.deepEqual(
            inHome.map((p: { id: number }) => p.id),
            [id, second],
          );
          const inOther = await c.request({ method: 'GET', url: `/gardens/${other.id}/plants` });
          assert.deepEqual(inOther.json(), []);
        },
      );

      it(
        'home: true only for its user; a shared home garden works; its user stays its owner (409 home_garden)',
        T,
        async () => {
          const o = await h.user();
          const m = await h.user();
          const [home] = await listGardens(o);
          assert.equal((await putMember(o, home!.id, m.user, 'editor')).statusCode, 201);
          // The member sees it, not as its home.
          const seen = await listGardens(m);
          assert.equal(seen.length, 2);
          assert.equal(seen[0]!.home, true, "the member's own home garden first");
          assert.notEqual(seen[0]!.id, home!.id);
          assert.deepEqual(seen[1], { ...home, home: false, role: 'editor' });
          assert.deepEqual((await getGarden(m, home!.id)).json(), { ...home, home: false, role: 'editor' });
          assert.deepEqual((await getGarden(o, home!.id)).json(), home);
          // The member creates into it; its user sees the plant; the member's POST /plants goes to its own home.
          const made = await plantIn(m, home!.id, { name: 'Shared fern' });
          assert.equal(made.statusCode, 201, made.body);
          const id = locationId(made);
          assert.equal((await o.request({ method: 'GET', url: `/plants/${id}` })).statusCode, 200);
          const own = locationId(await m.create({ name: 'Own' }));
          assert.equal((await o.request({ method: 'GET', url: `/plants/${own}` })).statusCode, 404);
          // The home garden's user: its membership cannot be changed or removed, by anyone.
          for (const role of ['editor', 'viewer'])
            refused(await putMember(o, home!.id, o.user, role), 409, 'home_garden', role);
          refused(
            await removeMember(o, home!.id, o.user),
            409,
            'home_garden',
            'leaving one’s own home garden',
          );
          assert.equal((await putMember(o, home!.id, m.user, 'owner')).statusCode, 200);
          refused(
            await putMember(m, home!.id, o.user, 'viewer'),
            409,
            'home_garden',
            'another owner demoting the home user',
          );
          refused(
            await removeMember(m, home!.id, o.user),
            409,
            'home_garden',
            'another owner removing the home user',
          );
          const admin = await h.user(['plants:admin']);
          refused(await putMember(admin, home!.id, o.user, 'viewer'), 409, 'home_garden', 'admin demoting');
          refused(await removeMember(admin, home!.id, o.user), 409, 'home_garden', 'admin removing');
          const roles = ((await members(o, home!.id)).json() as Member[]).map((x) => [x.user, x.role]).sort();
          assert.deepEqual(
            roles,
            [
              [m.user, 'owner'],
              [o.user, 'owner'],
            ].sort(),
          );
          // It cannot be deleted: empty or not, by its user, another owner or an admin.
          refused(await deleteGarden(o, home!.id), 409, 'home_garden');
          refused(await deleteGarden(m, home!.id), 409, 'home_garden');
          refused(await deleteGarden(admin, home!.id), 409, 'home_garden');
          const empty = await h.user();
          const [emptyHome] = await listGardens(empty);
          refused(await deleteGarden(empty, emptyHome!.id), 409, 'home_garden', 'an empty home garden');
          assert.equal((await getGarden(empty, emptyHome!.id)).statusCode, 200);
          // The other owner may leave the shared home garden.
          assert.equal((await removeMember(m, home!.id, m.user)).statusCode, 204);
          assert.equal((await getGarden(m, home!.id)).statusCode, 404);
        },
      );
    });
  });
}

for (const engine of ENGINES) {
  describe(`gardens and members (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);

    describe('POST, GET, PATCH, DELETE /gardens', () => {
      it(
        'POST /gardens: 201, the garden with the caller as owner, Location: /gardens/{id}; the name as sent',
        T,
        async () => {
          const c = await h.user();
          const res = await postGarden(c, { name: '  Back yard  ' });
          assert.equal(res.statusCode, 201);
          assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
          const g: Garden = res.json();
          assertGardenShape(g);
          assert.deepEqual(
            { name: g.name, home: g.home, role: g.role },
            { name: '  Back yard  ', home: false, role: 'owner' },
          );
          assert.equal(res.headers.location, `/gardens/${g.id}`);
          const read = await c.request({ method: 'GET', url: String(res.headers.location) });
          assert.equal(read.statusCode, 200);
          assert.deepEqual(read.json(), g);
          const again = await createGarden(c, '  Back yard  ');
          assert.notEqual(again.id, g.id, 'names need not be unique; ids are');
          const charset = await postGarden(
            c,
            { name: 'Charset' },
            { 'content-type': 'application/json; charset=utf-8' },
          );
          assert.equal(charset.statusCode, 201);
        },
      );

      it('GET /gardens: home first, then by creation, each with the caller’s role', T, async () => {
        const o = await h.user();
        const c = await h.user();
        // Created one after the other as fast as they go: several share a millisecond.
        const made: Garden[] = [];
        for (let i = 0; i < 25; i++) made.push(await createGarden(c, `g${i}`));
        const shared = await createGarden(o, 'Shared with c');
        await share(o, shared.id, c.user, 'viewer');
        const list = await listGardens(c);
        assert.equal(list.length, 27);
        assert.equal(list[0]!.home, true);
        assert.equal(list[0]!.role, 'owner');
        for (const g of list) assertGardenShape(g);
        assert.deepEqual(
          list.slice(1, 26).map((g) => g.name),
          made.map((g) => g.name),
          'by creation',
        );
        assert.deepEqual(list[26], { ...shared, role: 'viewer' });
        assert.ok(list.slice(1).every((g) => !g.home));
      });

      it(
        'name rules: 1–100 code points, not blank, no control characters; else 400 and nothing made or renamed',
        T,
        async () => {
          const c = await h.user();
          const g = await createGarden(c, 'Keep');
          for (const name of [
            'x',
            '🌱'.repeat(100),
            'a'.repeat(100),
            ' padded ',
            'Ünïcødé ✓',
            '\u2067حديقة\u2069 ✓',
          ]) {
            const res = await postGarden(c, { name });
            assert.equal(res.statusCode, 201, `${name}: ${res.body}`);
            assert.equal(res.json().name, name);
            const renamed = await patchGarden(c, g.id, { name });
            assert.equal(renamed.statusCode, 200, name);
            assert.equal(renamed.json().name, name);
          }
          await patchGarden(c, g.id, { name: 'Keep' });
          const before = (await listGardens(c)).length;
          for (const name of [
            '',
            ' ',
            '\t \n',
            '\u3000',
            'a'.repeat(101),
            '🌱'.repeat(101),
            'a\u0000b',
            'a\u001fb',
            'a\u007fb',
            'line\nbreak',
            'tab\there',
            // Version 5: a visible character, and valid Unicode.
            '\u200b',
            ' \u3164 ',
            '\u202e\u202c',
            '\ufeff\u00ad',
            'a\ud800',
            '\udfff',
            null,
            5,
            true,
            ['x'],
            { text: 'x' },
          ]) {
            refused(await postGarden(c, { name }), 400, undefined, `POST ${JSON.stringify(name)}`);
            refused(await patchGarden(c, g.id, { name }), 400, undefined, `PATCH ${JSON.stringify(name)}`);
          }
          for (const [name, message] of [
            [
              '\u200b',
              'must have a visible character (it holds only spaces or invisible characters such as U+200B)',
            ],
            ['a\ud800', 'must be valid Unicode (it holds \\ud800, half of a surrogate pair)'],
          ]) {
            for (const res of [await postGarden(c, { name }), await patchGarden(c, g.id, { name })]) {
              refused(res, 400, 'invalid_body', JSON.stringify(name));
              assert.deepEqual(res.json().details, [{ field: '/name', message }]);
            }
          }
          assert.equal((await listGardens(c)).length, before, 'nothing made');
          assert.equal((await getGarden(c, g.id)).json().name, 'Keep', 'nothing renamed');
        },
      );

      it(
        'bodies follow POST /plants: 415, 413, other fields 400, non-objects 400, malformed 400',
        T,
        async () => {
          const c = await h.user();
          const g = await createGarden(c, 'Bodies');
          const big = JSON.stringify({ name: 'x'.repeat(17 * 1024) });
          const cases: [string, Record<string, string>, string, number][] = [
            ['text/plain', { 'content-type': 'text/plain' }, '{"name":"a"}', 415],
            ['form', { 'content-type': 'application/x-www-form-urlencoded' }, 'name=a', 415],
            ['merge patch', { 'content-type': 'application/merge-patch+json' }, '{"name":"a"}', 415],
            ['over 16 KiB', JSON_TYPE, big, 413],
            ['another field', JSON_TYPE, '{"name":"a","home":true}', 400],
            ['an id', JSON_TYPE, '{"name":"a","id":"gdn_000000000000000000000001"}', 400],
            ['a role', JSON_TYPE, '{"name":"a","role":"viewer"}', 400],
            ['no name', JSON_TYPE, '{}', 400],
            ['array', JSON_TYPE, '[{"name":"a"}]', 400],
            ['string', JSON_TYPE, '"a"', 400],
            ['null', JSON_TYPE, 'null', 400],
            ['number', JSON_TYPE, '1', 400],
            ['malformed', JSON_TYPE, '{"name":', 400],
            ['empty', JSON_TYPE, '', 400],
            ['Latin-1', { 'content-type': 'application/json; charset=iso-8859-1' }, '{"name":"a"}', 415],
            ['UTF-16', { 'content-type': 'application/json; charset=utf-16' }, '{"name":"a"}', 415],
          ];
          const before = (await listGardens(c)).length;
          for (const [what, headers, payload, status] of cases) {
            refused(
              await c.request({ method: 'POST', url: '/gardens', headers, payload }),
              status,
              undefined,
              `POST ${what}`,
            );
            refused(
              await c.request({ method: 'PATCH', url: `/gardens/${g.id}`, headers, payload }),
              status,
              undefined,
              `PATCH ${what}`,
            );
          }
          // No content type at all.
          refused(await c.request({ method: 'POST', url: '/gardens', payload: '{"name":"a"}' }), 415);
          assert.equal((await listGardens(c)).length, before);
          assert.equal((await getGarden(c, g.id)).json().name, 'Bodies');
          // The member request's body follows the same rules.
          const memberCases: [string, Record<string, string>, string, number][] = [
            ['text/plain', { 'content-type': 'text/plain' }, '{"role":"viewer"}', 415],
            ['over 16 KiB', JSON_TYPE, JSON.stringify({ role: 'viewer', pad: 'x'.repeat(17 * 1024) }), 413],
            ['another field', JSON_TYPE, '{"role":"viewer","user":"x"}', 400],
            ['no role', JSON_TYPE, '{}', 400],
            ['a role not in the table', JSON_TYPE, '{"role":"admin"}', 400],
            ['a role in capitals', JSON_TYPE, '{"role":"Owner"}', 400],
            ['a null role', JSON_TYPE, '{"role":null}', 400],
            ['array', JSON_TYPE, '["viewer"]', 400],
            ['string', JSON_TYPE, '"viewer"', 400],
            ['malformed', JSON_TYPE, '{"role"', 400],
            ['a lone surrogate', JSON_TYPE, '{"role":"viewer\\ud800"}', 400],
            [
              'Windows-1252',
              { 'content-type': 'application/json; charset=windows-1252' },
              '{"role":"viewer"}',
              415,
            ],
          ];
          for (const [what, headers, payload, status] of memberCases) {
            refused(
              await c.request({ method: 'PUT', url: `/gardens/${g.id}/members/someone`, headers, payload }),
              status,
              undefined,
              `PUT member ${what}`,
            );
          }
          assert.equal(((await members(c, g.id)).json() as Member[]).length, 1, 'nobody added');
        },
      );

      it(
        'GET, PATCH, DELETE by role: viewer and editor 403 insufficient_role (no challenge); non-member 404 as if missing',
        T,
        async () => {
          const o = await h.user();
          const v = await h.user();
          const e = await h.user();
          const n = await h.user();
          const g = await createGarden(o, 'Roles');
          await share(o, g.id, v.user, 'viewer');
          await share(o, g.id, e.user, 'editor');
          assert.deepEqual((await getGarden(v, g.id)).json(), { ...g, role: 'viewer' });
          assert.deepEqual((await getGarden(e, g.id)).json(), { ...g, role: 'editor' });
          for (const [who, c] of [
            ['viewer', v],
            ['editor', e],
          ] as const) {
            insufficientRole(await patchGarden(c, g.id, { name: 'Mine now' }), `${who} PATCH`);
            insufficientRole(await deleteGarden(c, g.id), `${who} DELETE`);
          }
          assert.equal((await getGarden(o, g.id)).json().name, 'Roles', 'not renamed');
          // A non-member: 404, exactly the answer for a garden that does not exist.
          for (const [method, url, payload] of [
            ['GET', `/gardens/${g.id}`, undefined],
            ['PATCH', `/gardens/${g.id}`, '{"name":"x"}'],
            ['DELETE', `/gardens/${g.id}`, undefined],
            ['GET', `/gardens/${g.id}/members`, undefined],
            ['PUT', `/gardens/${g.id}/members/${enc(n.user)}`, '{"role":"owner"}'],
            ['DELETE', `/gardens/${g.id}/members/${enc(o.user)}`, undefined],
          ] as const) {
            const opts = (url: string): InjectOptions => ({
              method,
              url,
              ...(payload ? { headers: JSON_TYPE, payload } : {}),
            });
            const res = await n.request(opts(url));
            refused(res, 404, undefined, `${method} ${url} by a non-member`);
            sameAnswer(res, await n.request(opts(url.replace(g.id, MISSING_GID))), `${method} ${url}`);
          }
          assert.equal((await getGarden(o, g.id)).statusCode, 200, 'still there');
          // The owner renames it: every member sees the new name at once.
          const renamed = await patchGarden(o, g.id, { name: 'Renamed' });
          assert.equal(renamed.statusCode, 200);
          assert.deepEqual(renamed.json(), { ...g, name: 'Renamed' });
          assert.equal((await getGarden(v, g.id)).json().name, 'Renamed');
          // Scopes still apply on top of roles: an owner's read-only token may not rename (403 with a challenge).
          const readOnly = await clientAs(h, o.user, ['plants:read']);
          const scoped = await patchGarden(readOnly, g.id, { name: 'x' });
          refused(scoped, 403);
          assert.match(String(scoped.headers['www-authenticate']), /insufficient_scope/);
          assert.match(
            String((await deleteGarden(readOnly, g.id)).headers['www-authenticate']),
            /insufficient_scope/,
          );
          assert.match(
            String((await postGarden(readOnly, { name: 'x' })).headers['www-authenticate']),
            /insufficient_scope/,
          );
          assert.match(
            String((await putMember(readOnly, g.id, n.user, 'viewer')).headers['www-authenticate']),
            /insufficient_scope/,
          );
          assert.equal((await getGarden(readOnly, g.id)).statusCode, 200);
          const writeOnly = await clientAs(h, o.user, ['plants:write']);
          const noRead = await writeOnly.request({ method: 'GET', url: '/gardens' });
          refused(noRead, 403);
          assert.match(String(noRead.headers['www-authenticate']), /insufficient_scope/);
          // Without a token: 401 with the challenge.
          const anon = await h.app.inject({ method: 'GET', url: `/gardens/${g.id}` });
          refused(anon, 401);
          assert.equal(anon.headers['www-authenticate'], 'Bearer realm="plantstore"');
          // The owner deletes it: 204, then it is gone for everyone.
          const del = await deleteGarden(o, g.id);
          assert.equal(del.statusCode, 204);
          assert.equal(del.body, '');
          for (const c of [o, v, e]) {
            refused(await getGarden(c, g.id), 404);
            assert.ok(!(await listGardens(c)).some((x) => x.id === g.id));
          }
          refused(await deleteGarden(o, g.id), 404, undefined, 'a second delete');
        },
      );

      it('DELETE of a garden with plants is 409 garden_not_empty; once empty, 204', T, async () => {
        const o = await h.user();
        const e = await h.user();
        const g = await createGarden(o, 'Full');
        await share(o, g.id, e.user, 'editor');
        const id = locationId(await plantIn(e, g.id, { name: 'Rooted' }));
        refused(await deleteGarden(o, g.id), 409, 'garden_not_empty');
        assert.equal((await getGarden(o, g.id)).statusCode, 200);
        assert.equal(
          (await e.request({ method: 'GET', url: `/plants/${id}` })).statusCode,
          200,
          'the plant stays',
        );
        const admin = await h.user(['plants:admin']);
        refused(await deleteGarden(admin, g.id), 409, 'garden_not_empty', 'an admin too');
        assert.equal((await e.request({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 204);
        assert.equal((await deleteGarden(o, g.id)).statusCode, 204);
        refused(await getGarden(e, g.id), 404);
      });

      it(
        'plants:admin: every garden with role owner (home false), renames, manages members, deletes',
        T,
        async () => {
          const o = await h.user();
          const admin = await h.user(['plants:admin']);
          const g = await createGarden(o, 'Watched');
          const [home] = await listGardens(o);
          const seen = await getGarden(admin, g.id);
          assert.equal(seen.statusCode, 200);
          assert.deepEqual(seen.json(), { ...g, role: 'owner', home: false });
          assert.deepEqual((await getGarden(admin, home!.id)).json(), { ...home, home: false });
          const renamed = await patchGarden(admin, g.id, { name: 'By the admin' });
          assert.equal(renamed.statusCode, 200);
          assert.deepEqual(renamed.json(), { ...g, name: 'By the admin', role: 'owner', home: false });
          assert.equal((await getGarden(o, g.id)).json().name, 'By the admin');
          const x = `added-by-admin-${randomUUID()}`;
          assert.equal((await putMember(admin, g.id, x, 'editor')).statusCode, 201);
          assert.equal((await putMember(admin, g.id, x, 'viewer')).statusCode, 200);
          const list = (await members(admin, g.id)).json() as Member[];
          assert.deepEqual(
            list.map((m) => [m.user, m.role]).sort(),
            [
              [o.user, 'owner'],
              [x, 'viewer'],
            ].sort(),
          );
          assert.equal((await removeMember(admin, g.id, x)).statusCode, 204);
          refused(
            await putMember(admin, g.id, o.user, 'editor'),
            409,
            'last_owner',
            'the admin is no member: o is the last owner',
          );
          assert.equal((await deleteGarden(admin, g.id)).statusCode, 204);
          refused(await getGarden(o, g.id), 404);
          refused(await getGarden(admin, MISSING_GID), 404);
        },
      );
    });
  });
}
