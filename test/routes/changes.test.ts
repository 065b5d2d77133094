// Contract 13.4 through the API, rule by rule: the first sync (every visible plant by id, paged,
// ending with the caller's position), deltas (each id once with its latest state), access changes
// as changes (a garden joined, left, removed from, deleted; a role change alone: nothing), the
// garden filter, an admin, 410 past the kept events, and bad input → 400, never a 5xx.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  type Copy,
  changesOf,
  emptyCopy,
  type FeedAnswer,
  step as feedStep,
  syncUp as feedSyncUp,
  listed,
  settled,
  sorted,
} from '../helpers/feed.js';
import {
  deleteGarden,
  homeOf,
  MISSING_GID,
  newGarden,
  newPlant,
  refused,
  rename,
  share,
  unshare,
} from '../helpers/gardens.js';
import { suiteHarness } from '../helpers/suite.js';
import { until } from '../helpers/wait.js';

const T = { timeout: 30_000 };

const remove = (c: Client, id: number) => c.request({ method: 'DELETE', url: `/plants/${id}` });
const ops = (a: FeedAnswer) => a.changes.map((ch) => [ch.id, ch.op] as const);

for (const engine of ENGINES) {
  describe(`change feed (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);
    // Each answer once the log's head has passed every committed event: exact answers, even while
    // other tests' transactions hold PostgreSQL's head back.
    const step = async (c: Client, copy: Copy, o: Parameters<typeof feedStep>[2] = {}) => {
      await settled(h.store);
      return feedStep(c, copy, o);
    };
    const syncUp = async (c: Client, copy: Copy, o: Parameters<typeof feedSyncUp>[2] = {}) => {
      await settled(h.store);
      return feedSyncUp(c, copy, o);
    };
    const converged = async (c: Client, copy: Copy, garden?: string) => {
      await syncUp(c, copy, { garden });
      assert.deepEqual(sorted(copy.plants), sorted(await listed(c, garden)));
    };

    it('the first sync: every visible plant as upserts, by id, paged; then an empty delta', T, async () => {
      const a = await h.user();
      const g = await homeOf(a);
      const ids: number[] = [];
      for (let i = 0; i < 7; i++)
        ids.push((await newPlant(a, g, { name: `P${i}`, ...(i % 2 ? { tag: 't' } : {}) })).id);
      const copy = emptyCopy();
      const pages: FeedAnswer[] = [];
      for (;;) {
        const ans = await step(a, copy, { limit: 3 });
        pages.push(ans);
        if (!ans.more) break;
      }
      // On PostgreSQL a transaction elsewhere in the cluster may hold back the point up to which the
      // log can be passed: the last pages then answer the plants of events not yet passed again (as
      // they are now), and say more until it moves. Without one: exactly [3, 3, 1].
      assert.deepEqual(
        pages.slice(0, 2).map((p) => p.changes.length),
        [3, 3],
      );
      assert.deepEqual(
        pages
          .slice(0, 3)
          .flatMap((p) => p.changes.map((ch) => ch.id))
          .slice(0, 7),
        ids,
      );
      if (engine.name === 'sqlite') assert.equal(pages.length, 3);
      assert.ok(pages.every((p) => p.changes.every((ch) => ch.op === 'upsert')));
      const first = pages[0]!.changes[0]!;
      assert.ok(first.op === 'upsert');
      assert.deepEqual(Object.keys(first.plant).sort(), ['garden', 'id', 'name', 'version']);
      assert.deepEqual(sorted(copy.plants), sorted(await listed(a)));
      const again = await step(a, copy);
      assert.deepEqual(again, { changes: [], next: again.next, more: false });
    });

    it('deltas: each id once with its latest state (created, changed, deleted)', T, async () => {
      const a = await h.user();
      const g = await homeOf(a);
      const kept = await newPlant(a, g, { name: 'Kept' });
      const changed = await newPlant(a, g, { name: 'Changed' });
      const gone = await newPlant(a, g, { name: 'Gone' });
      const copy = emptyCopy();
      await syncUp(a, copy);
      assert.equal(copy.plants.size, 3);
      // A plant made, changed twice and deleted in between: one delete.
      const brief = await newPlant(a, g, { name: 'Brief' });
      assert.equal((await rename(a, brief.id, 'Brief 2')).statusCode, 200);
      assert.equal((await remove(a, brief.id)).statusCode, 204);
      assert.equal((await rename(a, changed.id, 'Changed 1')).statusCode, 200);
      assert.equal((await rename(a, changed.id, 'Changed 2')).statusCode, 200);
      assert.equal((await remove(a, gone.id)).statusCode, 204);
      const fresh = await newPlant(a, g, { name: 'Fresh', tag: 'new' });
      const ans = await step(a, copy);
      assert.equal(ans.more, false);
      assert.deepEqual(ops(ans), [
        [changed.id, 'upsert'],
        [gone.id, 'delete'],
        [brief.id, 'delete'],
        [fresh.id, 'upsert'],
      ]);
      assert.equal(copy.plants.get(changed.id)?.name, 'Changed 2');
      assert.equal(copy.plants.get(fresh.id)?.tag, 'new');
      assert.ok(!ans.changes.some((ch) => ch.id === kept.id), 'an unchanged plant is not answered');
      assert.deepEqual(sorted(copy.plants), sorted(await listed(a)));
    });

    it(
      'the trash: trashed → delete, restored → upsert (a new version), purged → nothing more',
      T,
      async () => {
        const a = await h.user();
        const g = await homeOf(a);
        const p = await newPlant(a, g, { name: 'Trashed' });
        const copy = emptyCopy();
        await converged(a, copy);
        const was = copy.plants.get(p.id)!.version;
        assert.equal((await remove(a, p.id)).statusCode, 204);
        assert.deepEqual(ops(await step(a, copy)), [[p.id, 'delete']]);
        assert.equal((await a.request({ method: 'POST', url: `/trash/${p.id}/restore` })).statusCode, 200);
        assert.deepEqual(ops(await step(a, copy)), [[p.id, 'upsert']]);
        assert.ok(copy.plants.get(p.id)!.version > was, 'a restore is a new version');
        assert.equal((await remove(a, p.id)).statusCode, 204);
        assert.equal((await a.request({ method: 'DELETE', url: `/trash/${p.id}` })).statusCode, 204);
        // Trashed then purged since the position: one delete; purged after it was answered: nothing.
        assert.deepEqual(ops(await step(a, copy)), [[p.id, 'delete']]);
        const q = await newPlant(a, g, { name: 'Purged later' });
        await converged(a, copy);
        assert.equal((await remove(a, q.id)).statusCode, 204);
        assert.deepEqual(ops(await step(a, copy)), [[q.id, 'delete']]);
        assert.equal((await a.request({ method: 'DELETE', url: `/trash/${q.id}` })).statusCode, 204);
        assert.deepEqual((await step(a, copy)).changes, []);
        await converged(a, copy);
      },
    );

    it('limit bounds each answer; more says whether to ask again', T, async () => {
      const a = await h.user();
      const g = await homeOf(a);
      const copy = emptyCopy();
      await syncUp(a, copy);
      for (let i = 0; i < 5; i++) await newPlant(a, g, { name: `L${i}` });
      const sizes: number[] = [];
      for (;;) {
        const ans = await step(a, copy, { limit: 2 });
        sizes.push(ans.changes.length);
        if (!ans.more) break;
      }
      assert.deepEqual(sizes.slice(0, 2), [2, 2]);
      if (engine.name === 'sqlite') assert.deepEqual(sizes, [2, 2, 1]);
      assert.deepEqual(sorted(copy.plants), sorted(await listed(a)));
    });

    it('access: a garden joined → its plants upserted; a role change alone → nothing', T, async () => {
      const o = await h.user();
      const m = await h.user();
      const g = await newGarden(o);
      const p1 = await newPlant(o, g, { name: 'Shared 1' });
      const p2 = await newPlant(o, g, { name: 'Shared 2' });
      const copy = emptyCopy();
      await syncUp(m, copy);
      const before = new Map(copy.plants);
      await share(o, g, m.user, 'viewer');
      const joined = await step(m, copy);
      assert.deepEqual(ops(joined), [
        [p1.id, 'upsert'],
        [p2.id, 'upsert'],
      ]);
      assert.equal(joined.more, false);
      await share(o, g, m.user, 'editor');
      const role = await step(m, copy);
      assert.deepEqual(role.changes, [], 'a role change alone changes nothing');
      assert.equal(copy.plants.size, before.size + 2);
      await converged(m, copy);
    });

    it('access: a garden left, removed from or deleted → deletes of its plants', T, async () => {
      const o = await h.user();
      const m = await h.user();
      const left = await newGarden(o, 'Left');
      const removed = await newGarden(o, 'Removed');
      const deleted = await newGarden(o, 'Deleted');
      for (const g of [left, removed, deleted]) await share(o, g, m.user, 'editor');
      const a = await newPlant(o, left, { name: 'A' });
      const b = await newPlant(o, removed, { name: 'B' });
      const c = await newPlant(o, deleted, { name: 'C' });
      const d = await newPlant(o, deleted, { name: 'D' });
      const copy = emptyCopy();
      await converged(m, copy);
      assert.equal(copy.plants.size, 4 + 0 /* m's home is empty */);
      // Left by the member itself; removed by the owner; deleted once emptied (D deleted first).
      await unshare(m, left, m.user);
      await unshare(o, removed, m.user);
      assert.equal((await remove(o, d.id)).statusCode, 204);
      assert.equal((await remove(o, c.id)).statusCode, 204);
      assert.equal((await deleteGarden(o, deleted)).statusCode, 204);
      const ans = await step(m, copy);
      assert.deepEqual(ops(ans), [
        [a.id, 'delete'],
        [b.id, 'delete'],
        [c.id, 'delete'],
        [d.id, 'delete'],
      ]);
      assert.equal(ans.more, false);
      assert.equal(copy.plants.size, 0);
      await converged(m, copy);
    });

    it(
      'a plant deleted after the member left, and one deleted before, are still deleted from its copy',
      T,
      async () => {
        const o = await h.user();
        const m = await h.user();
        const g = await newGarden(o);
        await share(o, g, m.user, 'viewer');
        const ids: number[] = [];
        for (let i = 0; i < 6; i++) ids.push((await newPlant(o, g, { name: `S${i}` })).id);
        const copy = emptyCopy();
        await converged(m, copy);
        assert.equal((await remove(o, ids[0]!)).statusCode, 204);
        await unshare(o, g, m.user);
        assert.equal((await remove(o, ids[5]!)).statusCode, 204);
        // Paged by 2: the sweep of the garden goes on across answers.
        await syncUp(m, copy, { limit: 2 });
        assert.equal(copy.plants.size, 0);
        await converged(m, copy);
      },
    );

    it('rejoined: left and joined again since the position → its plants as they are now', T, async () => {
      const o = await h.user();
      const m = await h.user();
      const g = await newGarden(o);
      await share(o, g, m.user, 'viewer');
      const p = await newPlant(o, g, { name: 'Back' });
      const copy = emptyCopy();
      await converged(m, copy);
      await unshare(o, g, m.user);
      assert.equal((await rename(o, p.id, 'Back again')).statusCode, 200);
      const q = await newPlant(o, g, { name: 'New while away' });
      await share(o, g, m.user, 'viewer');
      await converged(m, copy);
      assert.equal(copy.plants.get(p.id)?.name, 'Back again');
      assert.ok(copy.plants.has(q.id));
    });

    it(
      'garden=: only that garden, its since bound to it; a garden the caller is not in → 404',
      T,
      async () => {
        const o = await h.user();
        const g1 = await newGarden(o, 'One');
        const g2 = await newGarden(o, 'Two');
        const p1 = await newPlant(o, g1, { name: 'In one' });
        await newPlant(o, g2, { name: 'In two' });
        const copy = emptyCopy();
        await converged(o, copy, g1);
        assert.deepEqual([...copy.plants.keys()], [p1.id]);
        await newPlant(o, g2, { name: 'Two more' });
        const q1 = await newPlant(o, g1, { name: 'One more' });
        const ans = await step(o, copy, { garden: g1 });
        assert.deepEqual(ops(ans), [[q1.id, 'upsert']]);
        refused(
          await changesOf(o, { since: copy.since!, garden: g2 }),
          400,
          'invalid_cursor',
          'other garden',
        );
        refused(await changesOf(o, { since: copy.since! }), 400, 'invalid_cursor', 'no garden');
        const stranger = await h.user();
        refused(await changesOf(stranger, { garden: g1 }), 404, 'garden_not_found');
        refused(await changesOf(o, { garden: MISSING_GID }), 404, 'garden_not_found');
        refused(await changesOf(o, { garden: 'nope' }), 404, 'garden_not_found');
      },
    );

    it("an admin's feed holds every plant; a member's since is not an admin's", T, async () => {
      const a = await h.user();
      const b = await h.user();
      const admin = await h.user(['plants:admin', 'plants:read']);
      const pa = await newPlant(a, await homeOf(a), { name: 'Of a' });
      const pb = await newPlant(b, await homeOf(b), { name: 'Of b' });
      const copy = emptyCopy();
      await converged(admin, copy);
      assert.ok(copy.plants.has(pa.id) && copy.plants.has(pb.id));
      assert.equal((await remove(b, pb.id)).statusCode, 204);
      const ans = await step(admin, copy);
      assert.deepEqual(ops(ans), [[pb.id, 'delete']]);
      refused(
        await changesOf(a, { since: copy.since! }),
        400,
        'invalid_cursor',
        "an admin's since to a member",
      );
    });

    it(
      "since: malformed, another user's → 400; before the events kept → 410 changes_expired",
      T,
      async () => {
        const a = await h.user();
        const b = await h.user();
        const copy = emptyCopy();
        await syncUp(a, copy);
        for (const bad of ['x', 'abc.def', 'bm90LWEtY3Vyc29y', '%%%', 'a'.repeat(600), ''])
          refused(await changesOf(a, { since: bad }), 400, undefined, `since=${bad.slice(0, 20)}`);
        refused(await changesOf(b, { since: copy.since! }), 400, 'invalid_cursor', "another user's");
        await newPlant(a, await homeOf(a), { name: 'Then purged' });
        // Every event so far purged: the copy's position lies before what is kept.
        await h.store.purgeEvents(new Date(Date.now() + 60_000));
        refused(await changesOf(a, { since: copy.since! }), 410, 'changes_expired');
        // Starting again works, and so does a position taken after the purge. (On PostgreSQL a first
        // sync's position is the oldest transaction still open in the cluster, another test's too:
        // until the head passes the events this purge took, a new position would lie before them.)
        await until('the log head to pass what the purge took', async () => {
          const [head, purged] = [await h.store.headPosition(), await h.store.purgedUpTo()];
          return h.store.comparePositions(head, purged) >= 0;
        });
        const fresh = emptyCopy();
        await converged(a, fresh);
        await newPlant(a, await homeOf(a), { name: 'After' });
        await converged(a, fresh);
      },
    );

    it('bad parameters → 400 (limit as the list takes it; unknown or repeated parameters)', T, async () => {
      const a = await h.user();
      for (const q of [
        'limit=0',
        'limit=1001',
        'limit=01',
        'limit=-1',
        'limit=1.5',
        'limit=1e2',
        'limit=',
        'limit=abc',
        'limit=5&limit=6',
        'since=a&since=b',
        'garden=a&garden=b',
        'cursor=abc',
        'other=1',
        'limit=%FF',
      ]) {
        const res = await a.request({ method: 'GET', url: `/plants/changes?${q}` });
        refused(res, 400, undefined, q);
      }
      for (const q of ['limit=1', 'limit=1000', '']) {
        const res = await a.request({ method: 'GET', url: `/plants/changes?${q}` });
        assert.equal(res.statusCode, 200, `${q}: ${res.body}`);
      }
      const post = await a.request({ method: 'POST', url: '/plants/changes' });
      assert.equal(post.statusCode, 405);
      assert.match(String(post.headers.allow), /^GET\b/);
      const none = await h.app.inject({ method: 'GET', url: '/plants/changes' });
      assert.equal(none.statusCode, 401);
      const writeOnly = await h.user(['plants:write']);
      assert.equal((await changesOf(writeOnly)).statusCode, 403);
    });
  });
}
