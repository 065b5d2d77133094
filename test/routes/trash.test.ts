// Contract 13.2 through the API: a deleted plant waits in its garden's trash, gone to every other
// read; the trash lists it to editors, owners and admins (not viewers, not strangers), newest
// deletion first, paged by Link; restore (a new version, 409 when its id was taken since,
// Idempotency-Key), purge, a second deletion replacing the first, a garden with only trashed
// plants deleted, the service's own purge, the trash off; bad input → 400, nothing changed.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { Client } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  clientTeam,
  deleteGarden,
  insufficientRole,
  MISSING_GID,
  newGarden,
  newPlant,
  nextLink,
  plantIn,
  refused,
} from '../helpers/gardens.js';
import { suiteHarness } from '../helpers/suite.js';
import { until } from '../helpers/wait.js';

const T = { timeout: 30_000 };

interface Entry {
  id: number;
  name: string;
  tag?: string;
  garden: string;
  deletedAt: string;
  deletedBy: string;
  purgeAt: string;
}

const get = (c: Client, url: string) => c.request({ method: 'GET', url });
const del = (c: Client, id: number) => c.request({ method: 'DELETE', url: `/plants/${id}` });
const restore = (c: Client, id: number | string, headers: Record<string, string> = {}) =>
  c.request({ method: 'POST', url: `/trash/${id}/restore`, headers });
const purge = (c: Client, id: number | string) => c.request({ method: 'DELETE', url: `/trash/${id}` });

/** Every entry of every page from `url`, following Link; the pages' sizes. */
async function walk(c: Client, url = '/trash'): Promise<{ items: Entry[]; sizes: number[] }> {
  const items: Entry[] = [];
  const sizes: number[] = [];
  for (let next: string | null = url; next !== null; ) {
    const res: LightMyRequestResponse = await get(c, next);
    assert.equal(res.statusCode, 200, `${next}: ${res.body}`);
    const page = res.json() as Entry[];
    items.push(...page);
    sizes.push(page.length);
    next = nextLink(res);
  }
  return { items, sizes };
}
const trashIds = async (c: Client, url = '/trash') => (await walk(c, url)).items.map((e) => e.id);
const history = async (c: Client, id: number) =>
  (await get(c, `/plants/${id}/history`)).json() as {
    type: string;
    actor: string | null;
    requestId: string | null;
    data: Record<string, unknown>;
  }[];

/** A plant made in `g` by `c` and deleted by `by` (204 asserted). */
async function trashed(c: Client, g: string, payload: object, by = c): Promise<{ id: number; etag: string }> {
  const p = await newPlant(c, g, payload);
  assert.equal((await del(by, p.id)).statusCode, 204);
  return p;
}

for (const engine of ENGINES) {
  describe(`the trash (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);

    it(
      'a deleted plant is gone to every read and waits in the trash of editors, owners and admins',
      T,
      async () => {
        const { o, e, v, n, g } = await clientTeam(h);
        const word = `trashword${randomUUID().slice(0, 8)}`;
        const p = await newPlant(e, g, { name: `Fern ${word}`, tag: 'indoor' });
        const del1 = await del(e, p.id);
        assert.equal(del1.statusCode, 204);
        for (const c of [o, e, v]) {
          refused(await get(c, `/plants/${p.id}`), 404, 'plant_not_found');
          const ids = (await get(c, `/plants?garden=${g}&include=id`))
            .json()
            .map((x: { id: number }) => x.id);
          assert.ok(!ids.includes(p.id));
          assert.deepEqual((await get(c, `/plants?q=${word}`)).json(), []);
          assert.equal((await get(c, `/plants/export?garden=${g}`)).body, '');
        }
        const admin = await h.user(['plants:admin']);
        for (const c of [o, e, admin]) {
          const found = (await walk(c)).items.find((x) => x.id === p.id);
          assert.ok(found, `${c.user} sees it in the trash`);
          assert.equal(found.name, `Fern ${word}`);
          assert.equal(found.tag, 'indoor');
          assert.equal(found.garden, g);
          assert.equal(found.deletedBy, e.user);
          const at = Date.parse(found.deletedAt);
          assert.equal(Date.parse(found.purgeAt) - at, 30 * 86_400_000);
          assert.deepEqual((await walk(c, `/trash?garden=${g}`)).items, [found]);
        }
        // A viewer: 403 for the garden, and none of its trash in the whole list; a stranger: 404.
        insufficientRole(await get(v, `/trash?garden=${g}`));
        assert.ok(!(await trashIds(v)).includes(p.id));
        refused(await get(n, `/trash?garden=${g}`), 404, 'garden_not_found');
        refused(await get(n, `/trash?garden=${MISSING_GID}`), 404, 'garden_not_found');
        assert.ok(!(await trashIds(n)).includes(p.id));
        // Its id may be taken again at once.
        assert.equal((await plantIn(o, g, { id: p.id, name: 'Again' })).statusCode, 201);
      },
    );

    it(
      'restore: back as it was with a new version, ETag and Location, and a plant.restored event',
      T,
      async () => {
        const { o, e, v, n, g } = await clientTeam(h);
        const p = await trashed(e, g, { name: 'Ivy', tag: 'hanging' });
        insufficientRole(await restore(v, p.id));
        refused(await restore(n, p.id), 404, 'plant_not_found');
        refused(await restore(o, 9_007_199_254_740_991), 404, 'plant_not_found');
        const res = await restore(o, p.id, { 'x-request-id': 'undo-1' });
        assert.equal(res.statusCode, 200, res.body);
        assert.deepEqual(res.json(), { name: 'Ivy', tag: 'hanging' });
        assert.equal(res.headers.location, `/plants/${p.id}`);
        assert.match(String(res.headers.etag), /^"[0-9]+"$/);
        assert.notEqual(res.headers.etag, p.etag);
        const now = await get(v, `/plants/${p.id}`);
        assert.equal(now.statusCode, 200);
        assert.deepEqual(now.json(), { name: 'Ivy', tag: 'hanging' });
        assert.equal(now.headers.etag, res.headers.etag);
        assert.ok(!(await trashIds(o)).includes(p.id));
        const [last] = await history(v, p.id);
        assert.deepEqual(last, {
          ...last,
          type: 'plant.restored',
          actor: o.user,
          requestId: 'undo-1',
          data: { id: p.id, name: 'Ivy', tag: 'hanging', garden: g },
        });
        // Restored once: no longer in the trash.
        refused(await restore(o, p.id), 404, 'plant_not_found');
      },
    );

    it('restore of an id taken since is 409 plant_exists and changes nothing', T, async () => {
      const { o, e, g } = await clientTeam(h);
      const p = await trashed(e, g, { name: 'Old' });
      const taken = await newPlant(o, g, { id: p.id, name: 'New' });
      refused(await restore(e, p.id), 409, 'plant_exists');
      const now = await get(o, `/plants/${p.id}`);
      assert.deepEqual(now.json(), { name: 'New' });
      assert.equal(now.headers.etag, taken.etag);
      assert.deepEqual(
        (await walk(o, `/trash?garden=${g}`)).items.map((x) => [x.id, x.name]),
        [[p.id, 'Old']],
      );
      assert.equal((await history(o, p.id))[0]!.type, 'plant.created');
    });

    it(
      'restore with an Idempotency-Key replays the first answer; the key on another request is 422',
      T,
      async () => {
        const { o, g } = await clientTeam(h);
        const p = await trashed(o, g, { name: 'Keyed' });
        const q = await trashed(o, g, { name: 'Other' });
        const key = { 'idempotency-key': `k-${randomUUID()}` };
        const first = await restore(o, p.id, key);
        assert.equal(first.statusCode, 200, first.body);
        assert.equal(first.headers['idempotent-replayed'], undefined);
        const again = await restore(o, p.id, key);
        assert.equal(again.statusCode, 200, again.body);
        assert.equal(again.headers['idempotent-replayed'], 'true');
        assert.equal(again.headers.etag, first.headers.etag);
        assert.equal(again.headers.location, `/plants/${p.id}`);
        assert.deepEqual(again.json(), { name: 'Keyed' });
        refused(await restore(o, q.id, key), 422, 'idempotency_key_reused');
        assert.ok((await trashIds(o, `/trash?garden=${g}`)).includes(q.id));
        // A clash is recorded too: the retry answers 409 again.
        const r = await trashed(o, g, { name: 'Clash' });
        await newPlant(o, g, { id: r.id, name: 'Taker' });
        const clashKey = { 'idempotency-key': `k-${randomUUID()}` };
        refused(await restore(o, r.id, clashKey), 409, 'plant_exists');
        refused(await restore(o, r.id, clashKey), 409, 'plant_exists');
        // A refusal by role records nothing: the key is free for the same request once allowed.
        const events = (await history(o, p.id)).filter((x) => x.type === 'plant.restored');
        assert.equal(events.length, 1);
      },
    );

    it(
      'purge: erased for good with a plant.purged event of {id, garden}; viewers 403, strangers 404',
      T,
      async () => {
        const { o, e, v, n, g } = await clientTeam(h);
        const p = await trashed(o, g, { name: 'Gone', tag: 'x' });
        insufficientRole(await purge(v, p.id));
        refused(await purge(n, p.id), 404, 'plant_not_found');
        const res = await purge(e, p.id);
        assert.equal(res.statusCode, 204);
        assert.equal(res.body, '');
        refused(await purge(e, p.id), 404, 'plant_not_found');
        refused(await restore(e, p.id), 404, 'plant_not_found');
        assert.ok(!(await trashIds(o)).includes(p.id));
        // Every member sees it in the history, viewers too: the id and garden only.
        const [last] = await history(v, p.id);
        assert.equal(last!.type, 'plant.purged');
        assert.equal(last!.actor, e.user);
        assert.deepEqual(last!.data, { id: p.id, garden: g });
      },
    );

    it('a second deletion of the same id replaces the first entry, which is purged', T, async () => {
      const { o, g } = await clientTeam(h);
      const first = await trashed(o, g, { name: 'First' });
      await trashed(o, g, { id: first.id, name: 'Second' });
      assert.deepEqual(
        (await walk(o, `/trash?garden=${g}`)).items.map((x) => [x.id, x.name]),
        [[first.id, 'Second']],
      );
      assert.deepEqual(
        (await history(o, first.id)).map((x) => x.type),
        ['plant.purged', 'plant.deleted', 'plant.created', 'plant.deleted', 'plant.created'],
      );
      const res = await restore(o, first.id);
      assert.deepEqual(res.json(), { name: 'Second' });
    });

    it('a garden whose plants are all in its trash may be deleted, its trash with it', T, async () => {
      const { o, e, g } = await clientTeam(h);
      const a = await trashed(e, g, { name: 'A' });
      const b = await newPlant(e, g, { name: 'B' });
      refused(await deleteGarden(o, g), 409, 'garden_not_empty');
      assert.equal((await del(e, b.id)).statusCode, 204);
      assert.equal((await deleteGarden(o, g)).statusCode, 204);
      for (const id of [a.id, b.id]) refused(await restore(o, id), 404, 'plant_not_found');
      assert.ok(!(await trashIds(o)).some((id) => id === a.id || id === b.id));
      const admin = await h.user(['plants:admin']);
      const types = (await history(admin, a.id)).map((x) => x.type);
      assert.equal(types[0], 'plant.purged');
    });

    it(
      'pages: newest deletion first across gardens, by Link; cursors bound to the caller and garden',
      T,
      async () => {
        const o = await h.user();
        const g1 = await newGarden(o, 'One');
        const g2 = await newGarden(o, 'Two');
        const order: number[] = [];
        for (let i = 0; i < 7; i++) order.push((await trashed(o, i % 2 ? g1 : g2, { name: `P${i}` })).id);
        const all = await walk(o);
        // Newest first: deletion time, then the larger id among those deleted in the same millisecond.
        const key = (x: Entry) => [Date.parse(x.deletedAt), x.id] as const;
        for (let i = 1; i < all.items.length; i++) {
          const [a, b] = [key(all.items[i - 1]!), key(all.items[i]!)];
          assert.ok(a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]), 'newest deletion first');
        }
        assert.deepEqual(new Set(all.items.map((x) => x.id)), new Set(order));
        const paged = await walk(o, '/trash?limit=2');
        assert.deepEqual(paged.sizes, [2, 2, 2, 1]);
        assert.deepEqual(
          paged.items.map((x) => x.id),
          all.items.map((x) => x.id),
        );
        const one = await walk(o, `/trash?garden=${g1}&limit=2`);
        assert.deepEqual(
          one.items.map((x) => x.id),
          all.items.filter((x) => x.garden === g1).map((x) => x.id),
        );
        const first = await get(o, `/trash?garden=${g1}&limit=2`);
        const link = nextLink(first)!;
        assert.match(link, new RegExp(`^/trash\\?limit=2&cursor=[A-Za-z0-9_-]+&garden=${g1}$`));
        const cursor = /cursor=([^&]+)/.exec(link)![1]!;
        refused(await get(o, `/trash?garden=${g2}&cursor=${cursor}`), 400, 'invalid_cursor');
        refused(await get(o, `/trash?cursor=${cursor}`), 400, 'invalid_cursor');
        const other = await h.user();
        refused(await get(other, `/trash?garden=${g1}&cursor=${cursor}`), 400, 'invalid_cursor');
      },
    );

    it(
      'bad input on every parameter and path is 400 with the error body, and changes nothing',
      T,
      async () => {
        const { o, g } = await clientTeam(h);
        const p = await trashed(o, g, { name: 'Kept' });
        const before = await walk(o, `/trash?garden=${g}`);
        for (const q of [
          'limit=0',
          'limit=1001',
          'limit=abc',
          'limit=-1',
          'limit=01',
          'cursor=nonsense',
          'cursor=',
          `garden=${g}&garden=${g}`,
          'limit=2&limit=3',
          'tag=x',
          'other=1',
        ]) {
          const res = await get(o, `/trash?${q}`);
          refused(res, 400, undefined, q);
        }
        // A bad cursor is 400 before a garden's 404.
        refused(await get(o, `/trash?garden=${MISSING_GID}&cursor=nonsense`), 400, 'invalid_cursor');
        for (const id of ['0', '-1', '9007199254740992', 'abc', '1.5', '01']) {
          refused(await restore(o, id), 400, undefined, `restore ${id}`);
          refused(await purge(o, id), 400, undefined, `purge ${id}`);
        }
        refused(await restore(o, p.id, { 'idempotency-key': '' }), 400, undefined, 'empty key');
        const wrong = await o.request({ method: 'PUT', url: `/trash/${p.id}/restore` });
        refused(wrong, 405, 'method_not_allowed');
        assert.match(String(wrong.headers.allow), /POST/);
        refused(await o.request({ method: 'POST', url: '/trash' }), 405, 'method_not_allowed');
        assert.deepEqual(await walk(o, `/trash?garden=${g}`), before);
      },
    );
  });

  describe(`the service's own purge of the trash (${engine.name})`, { skip: engine.skip }, () => {
    // A second of retention: the purge runs every second (a tenth of it, at least a second).
    const h = suiteHarness(engine, { trashRetention: 1_000 });

    it('erases entries past the retention, each with a plant.purged event with no actor', {
      timeout: 60_000,
    }, async () => {
      const { o, v, g } = await clientTeam(h);
      const ids: number[] = [];
      for (let i = 0; i < 3; i++) ids.push((await trashed(o, g, { name: `Short ${i}` })).id);
      const entries = (await walk(o, `/trash?garden=${g}`)).items;
      for (const x of entries) assert.equal(Date.parse(x.purgeAt) - Date.parse(x.deletedAt), 1_000);
      await until(
        'the trash purged',
        async () => (await trashIds(o, `/trash?garden=${g}`)).length === 0,
        30_000,
      );
      for (const id of ids) {
        const [last] = await history(v, id);
        assert.deepEqual(
          { type: last!.type, actor: last!.actor, requestId: last!.requestId, data: last!.data },
          { type: 'plant.purged', actor: null, requestId: null, data: { id, garden: g } },
        );
      }
    });
  });

  describe(`the trash turned off (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine, { trashRetention: 0 });

    it('a delete is final; GET /trash answers an empty list, restore 404', T, async () => {
      const { o, g } = await clientTeam(h);
      const p = await trashed(o, g, { name: 'Final' });
      assert.deepEqual((await get(o, '/trash')).json(), []);
      assert.deepEqual((await get(o, `/trash?garden=${g}`)).json(), []);
      refused(await restore(o, p.id), 404, 'plant_not_found');
      refused(await purge(o, p.id), 404, 'plant_not_found');
      assert.deepEqual(
        (await history(o, p.id)).map((x) => x.type),
        ['plant.deleted', 'plant.created'],
      );
    });
  });
}
