// Contract 3.2: the garden limits. At most 100 gardens made by a user (home included; being
// added to others' never counts, also before its first sign-in) and at most 1,000 members in a
// garden, also when added in parallel; on every engine.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { clientAs, errorBody } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  createGarden,
  deleteGarden,
  type Garden,
  getGarden,
  listGardens,
  type Member,
  members,
  postGarden,
  putMember,
  refused,
  removeMember,
  share,
} from '../helpers/gardens.js';
import { suiteHarness } from '../helpers/suite.js';

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
