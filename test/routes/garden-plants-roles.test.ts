// Contract 3.2: who may change and delete plants in gardens. PATCH and DELETE by role with their
// order of checks (404 before 403 before 412), revocation on the very next request (a removed,
// demoted or departed member, a deleted garden), and plants:admin as an owner of every garden;
// on every engine.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  clientTeam,
  homeOf,
  insufficientRole,
  newGarden,
  newPlant,
  nextLink,
  plantIn,
  refused,
  share,
  unshare,
} from '../helpers/gardens.js';
import { del, get, ids, patch, walk } from '../helpers/plants.js';
import { suiteHarness } from '../helpers/suite.js';

const T = { timeout: 30_000 };

for (const engine of ENGINES) {
  describe(`plants in gardens (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);
    const team = () => clientTeam(h);

    describe('PATCH and DELETE by role', () => {
      it(
        'a viewer is 403 insufficient_role (no challenge) and nothing changes; editors and owners change; non-members 404',
        T,
        async () => {
          const { o, e, v, n, g } = await team();
          const p = await newPlant(o, g, { name: 'Fern', tag: 'x' });
          const read = await get(v, `/plants/${p.id}`);
          assert.equal(read.statusCode, 200);
          assert.equal(read.headers.etag, p.etag);
          insufficientRole(
            await patch(v, p.id, { name: 'Viewer was here' }, { 'if-match': p.etag }),
            'viewer PATCH',
          );
          insufficientRole(
            await patch(v, p.id, { name: 'Viewer was here' }, { 'if-match': '*' }),
            'viewer PATCH *',
          );
          insufficientRole(await del(v, p.id), 'viewer DELETE');
          insufficientRole(await del(v, p.id, { 'if-match': p.etag }), 'viewer DELETE If-Match');
          const still = await get(o, `/plants/${p.id}`);
          assert.deepEqual(still.json(), { name: 'Fern', tag: 'x' });
          assert.equal(still.headers.etag, p.etag, 'unchanged');
          // A non-member: 404, the answer for a plant that does not exist.
          const absent = 8_999_000_000_000 + Math.floor(Math.random() * 1e9);
          for (const [what, a, b] of [
            ['GET', await get(n, `/plants/${p.id}`), await get(n, `/plants/${absent}`)],
            [
              'PATCH',
              await patch(n, p.id, { name: 'x' }, { 'if-match': p.etag }),
              await patch(n, absent, { name: 'x' }, { 'if-match': p.etag }),
            ],
            ['DELETE', await del(n, p.id), await del(n, absent)],
          ] as const) {
            refused(a, 404, undefined, what);
            assert.deepEqual(a.json(), b.json(), what);
          }
          const byEditor = await patch(e, p.id, { name: 'Edited' }, { 'if-match': p.etag });
          assert.equal(byEditor.statusCode, 200);
          const byOwner = await patch(o, p.id, { tag: null }, { 'if-match': String(byEditor.headers.etag) });
          assert.equal(byOwner.statusCode, 200);
          assert.deepEqual(byOwner.json(), { name: 'Edited' });
          assert.deepEqual(
            (await get(v, `/plants/${p.id}`)).json(),
            { name: 'Edited' },
            'the viewer sees the change',
          );
          const q = await newPlant(o, g, { name: 'Editor deletes' });
          assert.equal((await del(e, q.id)).statusCode, 204);
          assert.equal((await del(o, p.id, { 'if-match': String(byOwner.headers.etag) })).statusCode, 204);
          refused(await get(v, `/plants/${p.id}`), 404);
        },
      );

      it(
        'PATCH order: 415/413/400 → 428 → 404 (not visible) → 403 (viewer) → Idempotency-Key replay → 412',
        T,
        async () => {
          const { o, e, v, n, g } = await team();
          const p = await newPlant(o, g, { name: 'Ordered' });
          const stale = '"999999"';
          // Body and media type before everything, also for a viewer and a non-member.
          for (const c of [v, n]) {
            refused(await patch(c, p.id, '{"name":"x"}', { 'content-type': 'text/plain' }), 415);
            refused(await patch(c, p.id, { name: 'x'.repeat(17 * 1024) }), 413);
            refused(await patch(c, p.id, { garden: g }), 400);
            refused(await patch(c, p.id, { name: null }), 400);
            // Then If-Match is required.
            refused(await patch(c, p.id, { name: 'x' }), 428, 'precondition_required');
          }
          // Then visibility (a stale If-Match does not make it 412), then the role (not 412 either).
          refused(await patch(n, p.id, { name: 'x' }, { 'if-match': stale }), 404);
          insufficientRole(
            await patch(v, p.id, { name: 'x' }, { 'if-match': stale }),
            'viewer, stale If-Match',
          );
          // An editor: stale If-Match is 412.
          refused(await patch(e, p.id, { name: 'x' }, { 'if-match': stale }), 412, 'precondition_failed');
          // A keyed change applies; its retry replays though its If-Match is now stale.
          const key = { 'idempotency-key': `k-${randomUUID()}` };
          const applied = await patch(e, p.id, { name: 'Keyed' }, { 'if-match': p.etag, ...key });
          assert.equal(applied.statusCode, 200);
          const replay = await patch(e, p.id, { name: 'Keyed' }, { 'if-match': p.etag, ...key });
          assert.equal(replay.statusCode, 200);
          assert.equal(replay.headers['idempotent-replayed'], 'true');
          assert.equal(replay.headers.etag, applied.headers.etag);
          // The role comes before the replay: demoted to viewer, the same retry is 403.
          await share(o, g, e.user, 'viewer');
          insufficientRole(
            await patch(e, p.id, { name: 'Keyed' }, { 'if-match': p.etag, ...key }),
            'retry as a viewer',
          );
          // Visibility before the role and the replay: removed, the same retry is 404.
          await unshare(o, g, e.user);
          refused(
            await patch(e, p.id, { name: 'Keyed' }, { 'if-match': p.etag, ...key }),
            404,
            undefined,
            'retry removed',
          );
          const now = await get(o, `/plants/${p.id}`);
          assert.deepEqual(now.json(), { name: 'Keyed' });
          assert.equal(now.headers.etag, applied.headers.etag, 'changed once');
        },
      );

      it('DELETE order: 404 (not visible) → 403 (viewer) → 412 → the delete', T, async () => {
        const { o, e, v, n, g } = await team();
        const p = await newPlant(o, g, { name: 'Doomed' });
        const stale = '"999999"';
        refused(await del(n, p.id, { 'if-match': stale }), 404);
        insufficientRole(await del(v, p.id, { 'if-match': stale }), 'viewer, stale If-Match');
        refused(await del(e, p.id, { 'if-match': stale }), 412, 'precondition_failed');
        assert.equal((await get(v, `/plants/${p.id}`)).statusCode, 200, 'kept');
        assert.equal((await del(e, p.id, { 'if-match': p.etag })).statusCode, 204);
        refused(await del(e, p.id), 404, undefined, 'a second delete');
        refused(await del(v, p.id), 404, undefined, 'a viewer: gone is 404, not 403');
      });
    });

    describe('revocation', () => {
      it(
        'a removed member’s very next GET, PATCH, DELETE and lists see nothing of the garden',
        T,
        async () => {
          const o = await h.user();
          const m = await h.user();
          const g = await newGarden(o);
          await share(o, g, m.user, 'editor');
          const p = await newPlant(o, g, { name: 'Revoked', tag: 'r' });
          // Read and list twice before (whatever is kept for the member is warm).
          for (let i = 0; i < 2; i++) {
            assert.equal((await get(m, `/plants/${p.id}`)).statusCode, 200);
            assert.equal((await get(m, '/plants')).json().length, 1);
            assert.equal((await get(m, '/plants?tag=r')).json().length, 1);
            assert.equal((await get(m, `/plants?garden=${g}`)).json().length, 1);
            assert.equal((await get(m, `/gardens/${g}/plants`)).json().length, 1);
          }
          await unshare(o, g, m.user);
          refused(await get(m, `/plants/${p.id}`), 404);
          refused(await patch(m, p.id, { name: 'x' }, { 'if-match': p.etag }), 404);
          refused(await del(m, p.id), 404);
          assert.deepEqual((await get(m, '/plants')).json(), []);
          assert.deepEqual((await get(m, '/plants?tag=r')).json(), []);
          refused(await get(m, `/plants?garden=${g}`), 404);
          refused(await get(m, `/gardens/${g}/plants`), 404);
          refused(await plantIn(m, g, { name: 'x' }), 404);
          refused(await get(m, `/gardens/${g}`), 404);
          assert.ok(!(await get(m, '/gardens')).json().some((x: { id: string }) => x.id === g));
          assert.deepEqual(
            (await get(o, `/plants/${p.id}`)).json(),
            { name: 'Revoked', tag: 'r' },
            'nothing changed',
          );
          // A cursor issued before the removal gives nothing of the garden after it.
          await share(o, g, m.user, 'viewer');
          await newPlant(o, g, { name: 'Second', tag: 'r' });
          const first = await get(m, '/plants?limit=1');
          const next = nextLink(first)!;
          await unshare(o, g, m.user);
          assert.deepEqual((await get(m, next)).json(), []);
        },
      );

      it(
        'a demotion counts on the very next request; a member that leaves loses the garden at once',
        T,
        async () => {
          const o = await h.user();
          const m = await h.user();
          const g = await newGarden(o);
          await share(o, g, m.user, 'editor');
          const p = await newPlant(o, g, { name: 'Demoted' });
          const changed = await patch(m, p.id, { name: 'By editor' }, { 'if-match': p.etag });
          assert.equal(changed.statusCode, 200);
          await share(o, g, m.user, 'viewer');
          insufficientRole(
            await patch(m, p.id, { name: 'By viewer' }, { 'if-match': String(changed.headers.etag) }),
          );
          insufficientRole(await plantIn(m, g, { name: 'x' }));
          await share(o, g, m.user, 'editor');
          assert.equal((await plantIn(m, g, { name: 'Promoted again' })).statusCode, 201);
          await unshare(m, g, m.user);
          refused(await get(m, `/plants/${p.id}`), 404);
          assert.deepEqual((await get(m, '/plants')).json(), []);
        },
      );

      it('a deleted garden’s members lose it at once', T, async () => {
        const o = await h.user();
        const m = await h.user();
        const g = await newGarden(o, 'Short-lived');
        await share(o, g, m.user, 'editor');
        const p = await newPlant(m, g, { name: 'Temporary' });
        assert.deepEqual((await get(m, `/plants?garden=${g}`)).json(), [{ name: 'Temporary' }]);
        assert.equal((await del(o, p.id)).statusCode, 204);
        assert.deepEqual((await get(m, `/gardens/${g}/plants`)).json(), []);
        assert.equal((await o.request({ method: 'DELETE', url: `/gardens/${g}` })).statusCode, 204);
        refused(await get(m, `/gardens/${g}`), 404);
        refused(await get(m, `/gardens/${g}/plants`), 404);
        refused(await get(m, `/plants?garden=${g}`), 404);
        refused(await plantIn(m, g, { name: 'Into nothing' }), 404);
        refused(await get(m, `/gardens/${g}/members`), 404);
        assert.ok(!(await get(m, '/gardens')).json().some((x: { id: string }) => x.id === g));
        // A garden made afterwards is new: nothing of the old membership carries over.
        const again = await newGarden(o, 'Short-lived');
        refused(await get(m, `/gardens/${again}`), 404);
      });
    });

    describe('plants:admin', () => {
      it('sees and changes every garden’s plants, as an owner would', T, async () => {
        const o = await h.user();
        const admin = await h.user(['plants:admin']);
        const g = await newGarden(o, 'Admin’s reach');
        const p = await newPlant(o, g, { name: 'Watched', tag: 'w' });
        const home = await homeOf(o);
        const h1 = locationId(await o.create({ name: 'At home' }));
        assert.deepEqual((await get(admin, `/plants/${p.id}`)).json(), { name: 'Watched', tag: 'w' });
        assert.deepEqual((await get(admin, `/plants?garden=${g}&include=id,garden`)).json(), [
          { id: p.id, garden: g, name: 'Watched', tag: 'w' },
        ]);
        assert.deepEqual((await get(admin, `/gardens/${home}/plants?include=id`)).json(), [
          { id: h1, name: 'At home' },
        ]);
        const all = await walk(admin, '/plants?limit=1000&include=id', '/plants?');
        assert.ok(
          ids(all.items).includes(p.id) && ids(all.items).includes(h1),
          'the unfiltered list has every garden',
        );
        const mine = await plantIn(admin, g, { name: 'Planted by admin' });
        assert.equal(mine.statusCode, 201);
        assert.equal((await get(o, `/plants/${locationId(mine)}`)).statusCode, 200, 'into o’s garden');
        const changed = await patch(admin, p.id, { name: 'Changed by admin' }, { 'if-match': p.etag });
        assert.equal(changed.statusCode, 200);
        assert.deepEqual((await get(o, `/plants/${p.id}`)).json(), { name: 'Changed by admin', tag: 'w' });
        assert.equal((await del(admin, h1)).statusCode, 204);
        refused(await get(o, `/plants/${h1}`), 404);
        // POST /plants by an admin goes to the admin's own home garden.
        const own = locationId(await admin.create({ name: 'Admin’s own' }));
        assert.deepEqual((await get(admin, `/plants?garden=${await homeOf(admin)}&include=id`)).json(), [
          { id: own, name: 'Admin’s own' },
        ]);
      });
    });
  });
}
