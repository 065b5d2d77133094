// Contract 3.2: the members of a garden. GET, PUT and DELETE /gardens/{gid}/members/{user}:
// adding and changing roles (owners only), the last owner, leaving, 405 with Allow and 401, and
// user names in the path (URL-decoded; too long, spaces, control characters or non-ASCII are 400
// with nothing changed); on every engine.
//
// Contract 3.2: hostile garden ids. Traversal, overlong, encoded or empty garden ids are 404 on
// every garden path, as a garden that does not exist, through app.inject and over a socket (dot
// segments exactly as sent), and nothing changes; on every engine.
//
// Contract 3.2: the garden limits. At most 100 gardens made by a user (home included; being
// added to others' never counts, also before its first sign-in) and at most 1,000 members in a
// garden, also when added in parallel; on every engine.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { clientAs, errorBody, type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
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
  plantIn,
  postGarden,
  putMember,
  refused,
  removeMember,
  share,
} from '../helpers/gardens.js';
import { suiteHarness } from '../helpers/suite.js';

const T = { timeout: 30_000 };
const MEMBER_KEYS = ['addedAt', 'role', 'user'];

function assertMemberShape(m: Member): void {
  assert.deepEqual(Object.keys(m).sort(), MEMBER_KEYS);
  assert.ok(['viewer', 'editor', 'owner'].includes(m.role));
  assert.equal(new Date(m.addedAt).toISOString(), m.addedAt, 'addedAt is an ISO 8601 timestamp');
}

/** A request over a socket with the path exactly as given (no dot-segment resolution). */
function raw(
  base: string,
  method: string,
  path: string,
  token: string,
  payload?: string,
): Promise<{ status: number; body: string }> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: {
          authorization: `Bearer ${token}`,
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
        },
        timeout: 10_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

for (const engine of ENGINES) {
  describe(`gardens and members (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);

    describe('members', () => {
      it(
        'any member lists [{user, role, addedAt}]; PUT adds (201) then changes (200); owners only',
        T,
        async () => {
          const o = await h.user();
          const m = await h.user();
          const x = await h.user();
          const g = await createGarden(o, 'Members');
          const first = (await members(o, g.id)).json() as Member[];
          assert.equal(first.length, 1);
          assertMemberShape(first[0]!);
          assert.deepEqual([first[0]!.user, first[0]!.role], [o.user, 'owner']);
          const added = await putMember(o, g.id, m.user, 'viewer');
          assert.equal(added.statusCode, 201);
          assert.equal(added.headers['content-type'], 'application/json; charset=utf-8');
          const am: Member = added.json();
          assertMemberShape(am);
          assert.deepEqual([am.user, am.role], [m.user, 'viewer']);
          const changed = await putMember(o, g.id, m.user, 'editor');
          assert.equal(changed.statusCode, 200);
          assert.deepEqual(changed.json(), { ...am, role: 'editor' }, 'addedAt stays');
          const same = await putMember(o, g.id, m.user, 'editor');
          assert.equal(same.statusCode, 200);
          assert.deepEqual(same.json(), { ...am, role: 'editor' });
          assert.deepEqual((await getGarden(m, g.id)).json().role, 'editor', 'the new role counts at once');
          const listed = (await members(m, g.id)).json() as Member[];
          for (const l of listed) assertMemberShape(l);
          assert.deepEqual(
            listed.map((l) => [l.user, l.role]).sort(),
            [
              [m.user, 'editor'],
              [o.user, 'owner'],
            ].sort(),
          );
          // Editors and viewers may not manage members.
          insufficientRole(await putMember(m, g.id, x.user, 'viewer'), 'editor adding');
          insufficientRole(await putMember(m, g.id, m.user, 'owner'), 'editor promoting itself');
          insufficientRole(await removeMember(m, g.id, o.user), 'editor removing the owner');
          await share(o, g.id, m.user, 'viewer');
          insufficientRole(await putMember(m, g.id, x.user, 'viewer'), 'viewer adding');
          assert.equal(((await members(m, g.id)).json() as Member[]).length, 2, 'a viewer lists members too');
          // A non-member: 404.
          refused(await members(x, g.id), 404);
          refused(await putMember(x, g.id, x.user, 'owner'), 404);
          // Owners may add owners; a user need not have signed in yet.
          const later = `not-signed-in-${randomUUID()}`;
          assert.equal((await putMember(o, g.id, later, 'owner')).statusCode, 201);
          const arrived = await clientAs(h, later);
          const theirs = await listGardens(arrived);
          assert.equal(theirs.length, 2);
          assert.equal(theirs[0]!.home, true, 'its home garden, made on its first need, comes first');
          assert.deepEqual(theirs[1], { ...g, role: 'owner' });
          assert.equal(
            (await putMember(arrived, g.id, x.user, 'viewer')).statusCode,
            201,
            'and acts as an owner',
          );
        },
      );

      it(
        'the last owner cannot be demoted or removed (409 last_owner); with two owners either may go',
        T,
        async () => {
          const o = await h.user();
          const p = await h.user();
          const g = await createGarden(o, 'Owners');
          refused(await putMember(o, g.id, o.user, 'editor'), 409, 'last_owner', 'demoting the only owner');
          refused(await putMember(o, g.id, o.user, 'viewer'), 409, 'last_owner', 'demoting the only owner');
          refused(await removeMember(o, g.id, o.user), 409, 'last_owner', 'the only owner leaving');
          await share(o, g.id, p.user, 'owner');
          assert.equal((await putMember(o, g.id, o.user, 'editor')).statusCode, 200, 'another owner remains');
          refused(await putMember(p, g.id, p.user, 'viewer'), 409, 'last_owner');
          refused(await removeMember(p, g.id, p.user), 409, 'last_owner');
          const roles = ((await members(p, g.id)).json() as Member[]).map((m) => [m.user, m.role]).sort();
          assert.deepEqual(
            roles,
            [
              [o.user, 'editor'],
              [p.user, 'owner'],
            ].sort(),
            'nothing changed by the refusals',
          );
          await share(p, g.id, o.user, 'owner');
          assert.equal(
            (await removeMember(p, g.id, p.user)).statusCode,
            204,
            'an owner leaves while another stays',
          );
          refused(await removeMember(o, g.id, p.user), 404, undefined, 'gone already');
          assert.deepEqual(
            ((await members(o, g.id)).json() as Member[]).map((m) => [m.user, m.role]),
            [[o.user, 'owner']],
          );
        },
      );

      it(
        'a member leaves by itself whatever its role (204); removing a non-member is 404; others need an owner',
        T,
        async () => {
          const o = await h.user();
          const v = await h.user();
          const e = await h.user();
          const o2 = await h.user();
          const g = await createGarden(o, 'Leaving');
          await share(o, g.id, v.user, 'viewer');
          await share(o, g.id, e.user, 'editor');
          await share(o, g.id, o2.user, 'owner');
          insufficientRole(await removeMember(v, g.id, e.user), 'a viewer removing another');
          insufficientRole(await removeMember(e, g.id, v.user), 'an editor removing another');
          for (const c of [v, e, o2]) {
            const res = await removeMember(c, g.id, c.user);
            assert.equal(res.statusCode, 204, res.body);
            assert.equal(res.body, '');
            refused(await getGarden(c, g.id), 404, undefined, 'gone for the one that left');
            refused(await removeMember(c, g.id, c.user), 404, undefined, 'leaving twice');
          }
          refused(
            await removeMember(o, g.id, `never-${randomUUID()}`),
            404,
            undefined,
            'a user never a member',
          );
          refused(await removeMember(o, g.id, v.user), 404, undefined, 'a member that left');
          assert.equal((await putMember(o, g.id, v.user, 'viewer')).statusCode, 201, 'added again: 201');
          assert.equal((await removeMember(o, g.id, v.user)).statusCode, 204, 'an owner removes a member');
        },
      );

      it('405 with Allow on the garden paths; 401 without a token', T, async () => {
        const c = await h.user();
        const g = await createGarden(c);
        for (const [method, url, allow] of [
          ['PUT', '/gardens', /GET.*POST/],
          ['DELETE', '/gardens', /GET.*POST/],
          ['POST', `/gardens/${g.id}`, /DELETE.*GET.*PATCH/],
          ['PUT', `/gardens/${g.id}`, /DELETE.*GET.*PATCH/],
          ['POST', `/gardens/${g.id}/members`, /GET/],
          ['PATCH', `/gardens/${g.id}/members/${enc(c.user)}`, /DELETE.*PUT/],
          ['GET', `/gardens/${g.id}/members/${enc(c.user)}`, /DELETE.*PUT/],
          ['PUT', `/gardens/${g.id}/plants`, /GET.*POST/],
        ] as const) {
          const res = await c.request({ method, url });
          refused(res, 405, undefined, `${method} ${url}`);
          assert.match(String(res.headers.allow), allow, `${method} ${url}`);
        }
        for (const [method, url] of [
          ['GET', '/gardens'],
          ['POST', '/gardens'],
          ['GET', `/gardens/${g.id}`],
          ['GET', `/gardens/${g.id}/members`],
          ['PUT', `/gardens/${g.id}/members/x`],
          ['DELETE', `/gardens/${g.id}/members/x`],
        ] as const) {
          const res = await h.app.inject({ method, url });
          refused(res, 401, undefined, `${method} ${url}`);
          assert.equal(res.headers['www-authenticate'], 'Bearer realm="plantstore"');
        }
      });
    });

    describe('user names in the path', () => {
      it(
        'are URL-decoded: a@b.c, names with / % ? # + and quotes are added, found and removed',
        T,
        async () => {
          const o = await h.user();
          const g = await createGarden(o, 'Names');
          const suffix = randomUUID().slice(0, 8);
          for (const name of [
            `a@b.c-${suffix}`,
            `x/y-${suffix}`,
            `a%2Fb-${suffix}`,
            `50%off-${suffix}`,
            `q?x=1&y=2-${suffix}`,
            `h#frag-${suffix}`,
            `plus+sign-${suffix}`,
            `quote'"-${suffix}`,
            `..-${suffix}`,
            `~!$&()*,;=:[]{}|\\^\`<>-${suffix}`,
          ]) {
            const added = await putMember(o, g.id, name, 'viewer');
            assert.equal(added.statusCode, 201, `${name}: ${added.body}`);
            assert.equal(added.json().user, name);
            assert.ok(
              ((await members(o, g.id)).json() as Member[]).some((m) => m.user === name),
              name,
            );
            const them = await clientAs(h, name);
            const seen = await listGardens(them);
            assert.deepEqual(seen[1], { ...g, role: 'viewer' }, `${name} sees the garden`);
            const changed = await putMember(o, g.id, name, 'editor');
            assert.equal(changed.statusCode, 200, name);
            assert.equal(changed.json().user, name);
            assert.equal((await removeMember(o, g.id, name)).statusCode, 204, name);
            refused(await getGarden(them, g.id), 404, undefined, name);
          }
          // `%2F` names the user with a slash, never another path.
          const slash = `s/${suffix}`;
          assert.equal((await putMember(o, g.id, 's%2F' + suffix, 'viewer', true)).statusCode, 201);
          assert.ok(((await members(o, g.id)).json() as Member[]).some((m) => m.user === slash));
          assert.equal(
            (await removeMember(o, g.id, `S%2f${suffix}`.replace('S', 's'), true)).statusCode,
            204,
          );
        },
      );

      it(
        'hostile names are 400 and change nothing: too long, spaces, control characters, non-ASCII',
        T,
        async () => {
          const o = await h.user();
          const g = await createGarden(o, 'Hostile names');
          for (const raw of [
            'a'.repeat(201),
            'a%20b',
            '%20',
            'a%09b',
            'a%0Ab',
            'a%00b',
            'a%01',
            'a%7F',
            'caf%C3%A9',
            '%F0%9F%8C%B1',
            '%C2%A0',
          ]) {
            refused(await putMember(o, g.id, raw, 'viewer', true), 400, undefined, `PUT ${raw.slice(0, 40)}`);
            refused(await removeMember(o, g.id, raw, true), 400, undefined, `DELETE ${raw.slice(0, 40)}`);
          }
          // 200 characters is the longest name.
          const longest = 'a'.repeat(190) + randomUUID().slice(0, 10);
          assert.equal((await putMember(o, g.id, longest, 'viewer')).statusCode, 201);
          assert.equal(((await members(o, g.id)).json() as Member[]).length, 2);
          // Undecodable percent escapes: a client error, never a 5xx.
          for (const raw of ['%', '%zz', '%E0%A4%A', '%C3']) {
            const res = await putMember(o, g.id, raw, 'viewer', true);
            assert.ok(res.statusCode === 400 || res.statusCode === 404, `${raw}: ${res.statusCode}`);
            errorBody(res);
          }
        },
      );
    });
  });
}

for (const engine of ENGINES) {
  describe(`gardens and members (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    let base = '';
    before(async () => {
      h = await harness(engine);
      base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => h?.close());

    describe('hostile garden ids', () => {
      it('are 404 on every garden path, as a garden that does not exist; nothing changes', T, async () => {
        const c = await h.user();
        const g = await createGarden(c, 'Target');
        await plantIn(c, g.id, { name: 'Safe' });
        // (Dot segments such as `..` and `%2E%2E` are sent over a socket below: inject's URL parser
        // would resolve them before the server saw them.)
        const ids = [
          '..%2F',
          '..%2F..%2Fplants',
          '%2E%2E%2F',
          '...',
          'x'.repeat(2000),
          `${g.id}${'0'.repeat(2000)}`,
          enc(`' OR 1=1 --`),
          enc(`${g.id}' OR '1'='1`),
          enc(`'; DROP TABLE gardens; --`),
          enc(`${g.id}"; DELETE FROM garden_members; --`),
          enc('gdn_🌱🌱🌱'),
          enc(`gdn_${'é'.repeat(24)}`),
          enc(g.id.toUpperCase()),
          enc(`${g.id} `),
          `${g.id}%00`,
          enc('*'),
          enc('%'),
          MISSING_GID,
        ];
        // Every case is tried before any failure is reported, so one run names them all.
        const wrong: string[] = [];
        for (const id of ids) {
          const short = id.slice(0, 50);
          for (const [method, url, payload] of [
            ['GET', `/gardens/${id}`, undefined],
            ['PATCH', `/gardens/${id}`, '{"name":"pwned"}'],
            ['DELETE', `/gardens/${id}`, undefined],
            ['GET', `/gardens/${id}/members`, undefined],
            ['PUT', `/gardens/${id}/members/${enc(c.user)}`, '{"role":"owner"}'],
            ['DELETE', `/gardens/${id}/members/${enc(c.user)}`, undefined],
            ['GET', `/gardens/${id}/plants`, undefined],
            ['POST', `/gardens/${id}/plants`, '{"name":"pwned"}'],
          ] as const) {
            const res = await c.request({ method, url, ...(payload ? { headers: JSON_TYPE, payload } : {}) });
            if (res.statusCode !== 404) wrong.push(`${method} ${url.replace(id, short)}: ${res.statusCode}`);
            else errorBody(res);
          }
          if (id.length <= 200) {
            const res = await c.request({ method: 'GET', url: `/plants?garden=${id}` });
            if (res.statusCode !== 404) wrong.push(`GET /plants?garden=${short}: ${res.statusCode}`);
            else errorBody(res);
          }
        }
        // Past the router's limit for one path segment (2,048), 414 instead: a client error, never a 5xx.
        for (const url of [`/gardens/${'x'.repeat(5000)}`, `/gardens/${'x'.repeat(5000)}/plants`]) {
          const res = await c.request({ method: 'GET', url });
          assert.ok(
            res.statusCode === 404 || res.statusCode === 414,
            `${url.slice(0, 30)}: ${res.statusCode}`,
          );
          errorBody(res);
        }
        // A garden= too long to be any garden's id: refused as a client error, never a 5xx.
        const long = await c.request({ method: 'GET', url: `/plants?garden=${'x'.repeat(5000)}` });
        assert.ok(long.statusCode === 400 || long.statusCode === 404, String(long.statusCode));
        errorBody(long);
        // Dot segments as a client that does not resolve them sends them: to the server, a garden id.
        for (const id of ['..', '.', '%2E%2E', '%2e', '.%2E']) {
          for (const [method, path, payload] of [
            ['GET', `/gardens/${id}`, undefined],
            ['GET', `/gardens/${id}/members`, undefined],
            ['GET', `/gardens/${id}/plants`, undefined],
            ['POST', `/gardens/${id}/plants`, '{"name":"pwned"}'],
            ['PUT', `/gardens/${id}/members/${enc(c.user)}`, '{"role":"owner"}'],
            ['DELETE', `/gardens/${id}`, undefined],
          ] as const) {
            const res = await raw(base, method, path, c.token, payload);
            if (res.status !== 404) wrong.push(`${method} ${path} (over a socket): ${res.status}`);
            else assert.equal(JSON.parse(res.body).error, 404);
          }
        }
        assert.deepEqual(wrong, [], 'every hostile garden id is 404');
        assert.deepEqual((await getGarden(c, g.id)).json(), g, 'the garden is untouched');
        assert.deepEqual((await c.request({ method: 'GET', url: `/gardens/${g.id}/plants` })).json(), [
          { name: 'Safe' },
        ]);
        assert.equal(((await members(c, g.id)).json() as Member[]).length, 1);
        assert.equal((await listGardens(c)).length, 2);
      });

      it('an empty garden id segment is an unknown path: 404, never a 5xx', T, async () => {
        const c = await h.user();
        const wrong: string[] = [];
        for (const [method, url] of [
          ['GET', '/gardens/'],
          ['PATCH', '/gardens/'],
          ['DELETE', '/gardens/'],
          ['GET', '/gardens//members'],
          ['PUT', '/gardens//members/x'],
          ['GET', '/gardens//plants'],
          ['POST', '/gardens//plants'],
        ] as const) {
          const res = await c.request({
            method,
            url,
            headers: JSON_TYPE,
            payload: '{"name":"x","role":"viewer"}',
          });
          errorBody(res);
          if (res.statusCode !== 404) wrong.push(`${method} ${url}: ${res.statusCode} ${res.json().code}`);
        }
        assert.deepEqual(wrong, []);
      });
    });
  });
}

for (const engine of ENGINES) {
  describe(`gardens and members (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);

    describe('limits', () => {
      it("a user makes at most 100 gardens (home included): 409 too_many_gardens; being added to others' never counts", {
        timeout: 90_000,
      }, async () => {
        const u = await h.user();
        const o = await h.user();
        const [home] = await listGardens(u);
        const mine: Garden[] = [];
        for (let batch = 0; batch < 99; batch += 11) {
          const made = await Promise.all(
            Array.from({ length: Math.min(11, 99 - batch) }, (_, i) =>
              postGarden(u, { name: `n${batch + i}` }),
            ),
          );
          for (const res of made) {
            assert.equal(res.statusCode, 201, res.body);
            mine.push(res.json());
          }
        }
        assert.equal((await listGardens(u)).length, 100);
        refused(await postGarden(u, { name: 'one too many' }), 409, 'too_many_gardens');
        // Others may still add u: that is no garden u made.
        const g = await createGarden(o, 'Wants u');
        assert.equal((await putMember(o, g.id, u.user, 'viewer')).statusCode, 201);
        assert.equal((await getGarden(u, g.id)).statusCode, 200);
        assert.equal((await listGardens(u)).length, 101);
        refused(await postGarden(u, { name: 'still one too many' }), 409, 'too_many_gardens');
        // A role change of a garden it is in is no new membership.
        await share(u, mine[0]!.id, o.user, 'viewer');
        assert.equal((await putMember(u, mine[0]!.id, o.user, 'editor')).statusCode, 200);
        // Leaving a garden it was added to frees no place; deleting one it made does.
        assert.equal((await removeMember(u, g.id, u.user)).statusCode, 204);
        refused(await postGarden(u, { name: 'not yet' }), 409, 'too_many_gardens');
        assert.equal((await removeMember(o, mine[0]!.id, o.user)).statusCode, 204);
        assert.equal((await deleteGarden(u, mine[0]!.id)).statusCode, 204);
        assert.equal((await deleteGarden(u, mine[1]!.id)).statusCode, 204);
        // Two places free and ten creates at once: exactly two are made.
        const raced = await Promise.all(
          Array.from({ length: 10 }, (_, i) => postGarden(u, { name: `race${i}` })),
        );
        assert.deepEqual(
          raced.map((r) => r.statusCode).sort(),
          [201, 201, 409, 409, 409, 409, 409, 409, 409, 409],
        );
        for (const r of raced.filter((r) => r.statusCode === 409))
          assert.equal(errorBody(r).code, 'too_many_gardens');
        const final = await listGardens(u);
        assert.equal(final.length, 100);
        assert.equal(final[0]!.id, home!.id);
      });

      it('a user added to 100 gardens before it ever signed in still makes its own: nobody uses up its allowance', {
        timeout: 90_000,
      }, async () => {
        const o = await h.user();
        const gardens = [(await listGardens(o))[0]!.id];
        for (let batch = 0; batch < 99; batch += 11) {
          const made = await Promise.all(
            Array.from({ length: Math.min(11, 99 - batch) }, (_, i) =>
              postGarden(o, { name: `late${batch + i}` }),
            ),
          );
          for (const res of made) {
            assert.equal(res.statusCode, 201, res.body);
            gardens.push(res.json().id);
          }
        }
        const late = `late-${randomUUID()}`;
        for (const g of gardens) assert.equal((await putMember(o, g, late, 'viewer')).statusCode, 201);
        const arrived = await clientAs(h, late);
        const theirs = await listGardens(arrived);
        assert.equal(theirs[0]!.home, true, 'its home garden first');
        assert.equal(theirs.length, 101);
        const own = await postGarden(arrived, { name: 'Mine' });
        assert.equal(own.statusCode, 201, own.body);
        assert.equal((await listGardens(arrived)).at(-1)!.id, own.json().id, 'then by creation');
      });

      it('a garden has at most 1,000 members: 409 too_many_members (members added over the API, in parallel)', {
        timeout: 120_000,
      }, async () => {
        const o = await h.user();
        const g = await createGarden(o, 'Crowded');
        const prefix = `crowd-${randomUUID().slice(0, 8)}`;
        // 989 more: 990 members.
        for (let start = 0; start < 989; start += 50) {
          const batch = await Promise.all(
            Array.from({ length: Math.min(50, 989 - start) }, (_, i) =>
              putMember(o, g.id, `${prefix}-${start + i}`, 'viewer'),
            ),
          );
          for (const res of batch) assert.equal(res.statusCode, 201, res.body);
        }
        // Twenty at once for the last ten places: exactly ten are added.
        const raced = await Promise.all(
          Array.from({ length: 20 }, (_, i) => putMember(o, g.id, `${prefix}-race-${i}`, 'viewer')),
        );
        assert.deepEqual(raced.map((r) => r.statusCode).sort(), [
          ...Array(10).fill(201),
          ...Array(10).fill(409),
        ]);
        for (const r of raced.filter((r) => r.statusCode === 409))
          assert.equal(errorBody(r).code, 'too_many_members');
        const listed = (await members(o, g.id)).json() as Member[];
        assert.equal(listed.length, 1000);
        assert.equal(new Set(listed.map((m) => m.user)).size, 1000);
        refused(await putMember(o, g.id, `${prefix}-one-more`, 'viewer'), 409, 'too_many_members');
        // Changing a member's role adds nobody.
        assert.equal((await putMember(o, g.id, `${prefix}-0`, 'editor')).statusCode, 200);
        assert.equal((await removeMember(o, g.id, `${prefix}-1`)).statusCode, 204);
        assert.equal((await putMember(o, g.id, `${prefix}-one-more`, 'viewer')).statusCode, 201);
        refused(await putMember(o, g.id, `${prefix}-yet-another`, 'viewer'), 409, 'too_many_members');
      });
    });
  });
}
