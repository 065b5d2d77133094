// Contract 3.2: home gardens. A new user has exactly one, made on first need (a first GET
// /gardens, or a POST /plants that puts the plant in it, also as its very first request);
// home: true only for its user; shared like any garden while its user stays its owner
// (409 home_garden); on every engine.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  assertGardenShape,
  createGarden,
  deleteGarden,
  type Garden,
  getGarden,
  listGardens,
  type Member,
  members,
  plantIn,
  putMember,
  refused,
  removeMember,
} from '../helpers/gardens.js';
import { suiteHarness } from '../helpers/suite.js';

const T = { timeout: 30_000 };

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
