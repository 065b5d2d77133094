// Contract 3.2: the members of a garden. GET, PUT and DELETE /gardens/{gid}/members/{user}:
// adding and changing roles (owners only), the last owner, leaving, 405 with Allow and 401, and
// user names in the path (URL-decoded; too long, spaces, control characters or non-ASCII are 400
// with nothing changed); on every engine.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { clientAs, errorBody } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  createGarden,
  enc,
  getGarden,
  insufficientRole,
  listGardens,
  type Member,
  members,
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
