// Contract 13.3 through the API: a plant's history and a garden's activity, newest first, paged by
// Link with cursors bound to the caller and the plant or garden (and type filter); who sees what
// (members now, an admin everything, a removed member nothing more); bad input → 400, never a 5xx.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { Client } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  clientTeam,
  MISSING_GID,
  newGarden,
  newPlant,
  nextLink,
  refused,
  rename,
  share,
  unshare,
} from '../helpers/gardens.js';
import { suiteHarness } from '../helpers/suite.js';

const T = { timeout: 30_000 };

interface Item {
  id: string;
  type: string;
  timestamp: string;
  actor: string | null;
  requestId: string | null;
  data: Record<string, unknown>;
}

const get = (c: Client, url: string) => c.request({ method: 'GET', url });
/** Every item of every page from `url`, following Link; the pages' sizes. */
async function walk(c: Client, url: string): Promise<{ items: Item[]; sizes: number[] }> {
  const items: Item[] = [];
  const sizes: number[] = [];
  for (let next: string | null = url; next !== null; ) {
    const res: LightMyRequestResponse = await get(c, next);
    assert.equal(res.statusCode, 200, `${next}: ${res.body}`);
    const page = res.json() as Item[];
    items.push(...page);
    sizes.push(page.length);
    next = nextLink(res);
  }
  return { items, sizes };
}

for (const engine of ENGINES) {
  describe(`history and activity (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);

    it(
      'a plant history: newest first, each a webhook body with its id, actor and request id, paged by Link',
      T,
      async () => {
        const { o, e, g } = await clientTeam(h);
        const p = await newPlant(e, g, { name: 'Fern' });
        const renamed = await rename(o, p.id, 'Boston fern');
        assert.equal(renamed.statusCode, 200);
        for (const n of ['A', 'B', 'C']) assert.equal((await rename(e, p.id, n)).statusCode, 200);
        const del = await e.request({ method: 'DELETE', url: `/plants/${p.id}` });
        assert.equal(del.statusCode, 204);
        // Deleted: its history stays while its events are kept.
        const all = await walk(e, `/plants/${p.id}/history`);
        assert.deepEqual(
          all.items.map((i) => [i.type, i.actor]),
          [
            ['plant.deleted', e.user],
            ['plant.updated', e.user],
            ['plant.updated', e.user],
            ['plant.updated', e.user],
            ['plant.updated', o.user],
            ['plant.created', e.user],
          ],
        );
        const first = all.items[0]!;
        assert.deepEqual(Object.keys(first).sort(), [
          'actor',
          'data',
          'id',
          'requestId',
          'timestamp',
          'type',
        ]);
        assert.match(first.id, /^evt_/);
        assert.equal(first.requestId, del.headers['x-request-id']);
        assert.deepEqual(all.items[4]!.data, {
          id: p.id,
          name: 'Boston fern',
          garden: g,
          previous: { name: 'Fern' },
        });
        // Pages of 4: the same events in the same order, the Link naming the path and the limit.
        const paged = await walk(e, `/plants/${p.id}/history?limit=4`);
        assert.deepEqual(paged.sizes, [4, 2]);
        assert.deepEqual(
          paged.items.map((i) => i.id),
          all.items.map((i) => i.id),
        );
        const res = await get(e, `/plants/${p.id}/history?limit=4`);
        assert.match(nextLink(res)!, new RegExp(`^/plants/${p.id}/history\\?limit=4&cursor=[A-Za-z0-9_-]+$`));
      },
    );

    it('who sees a history: members now, an admin all; strangers and removed members 404', T, async () => {
      const { o, v, n, g } = await clientTeam(h);
      const p = await newPlant(o, g, { name: 'Moss' });
      const admin = await h.user(['plants:admin']);
      for (const c of [o, v, admin]) {
        const res = await get(c, `/plants/${p.id}/history`);
        assert.equal(res.statusCode, 200, res.body);
        assert.equal((res.json() as Item[]).length, 1);
      }
      refused(await get(n, `/plants/${p.id}/history`), 404, 'plant_not_found');
      refused(await get(o, '/plants/9007199254740991/history'), 404, 'plant_not_found');
      // A cursor of the viewer's, then the viewer removed: its next request sees nothing.
      await rename(o, p.id, 'Moss 2');
      const page = await get(v, `/plants/${p.id}/history?limit=1`);
      const next = nextLink(page)!;
      await unshare(o, g, v.user);
      refused(await get(v, `/plants/${p.id}/history`), 404, 'plant_not_found');
      const after = await get(v, next);
      assert.equal(after.statusCode, 200, after.body);
      assert.deepEqual(after.json(), []);
      // Reads change nothing: the owner still sees the two events.
      assert.equal((await walk(o, `/plants/${p.id}/history`)).items.length, 2);
    });

    it(
      "a garden's activity: plant and member events newest first, any member, type= filters and is repeated by Link",
      T,
      async () => {
        const o = await h.user();
        const v = await h.user();
        const n = await h.user();
        const g = await newGarden(o);
        await share(o, g, v.user, 'viewer');
        const p = await newPlant(o, g, { name: 'Ivy' });
        await share(o, g, v.user, 'editor');
        await o.request({ method: 'DELETE', url: `/plants/${p.id}` });
        const all = await walk(v, `/gardens/${g}/activity?limit=2`);
        assert.deepEqual(
          all.items.map((i) => i.type),
          ['plant.deleted', 'member.changed', 'plant.created', 'member.added'],
        );
        assert.deepEqual(all.items[1]!.data, { garden: g, user: v.user, role: 'editor', previous: 'viewer' });
        const only = await get(v, `/gardens/${g}/activity?type=plant.created,plant.deleted&limit=1`);
        assert.deepEqual(
          (only.json() as Item[]).map((i) => i.type),
          ['plant.deleted'],
        );
        assert.match(nextLink(only)!, /&type=plant.created,plant.deleted$/);
        const rest = await walk(v, nextLink(only)!);
        assert.deepEqual(
          rest.items.map((i) => i.type),
          ['plant.created'],
        );
        const admin = await h.user(['plants:admin']);
        assert.equal((await walk(admin, `/gardens/${g}/activity`)).items.length, 4);
        refused(await get(n, `/gardens/${g}/activity`), 404, 'garden_not_found');
        refused(await get(o, `/gardens/${MISSING_GID}/activity`), 404, 'garden_not_found');
        refused(await get(o, '/gardens/not-a-garden/activity'), 404, 'garden_not_found');
      },
    );

    it('bad input: 400 with the error body, nothing changed, never a 5xx', T, async () => {
      const o = await h.user();
      const other = await h.user();
      const g = await newGarden(o);
      const g2 = await newGarden(o);
      const p = await newPlant(o, g, { name: 'Fern' });
      const q = await newPlant(o, g, { name: 'Moss' });
      await rename(o, p.id, 'Fern 2');
      await rename(o, q.id, 'Moss 2');
      await newPlant(o, g2, { name: 'Reed' });
      await newPlant(o, g2, { name: 'Reed 2' });
      const cursorOf = async (url: string) => {
        const next = nextLink(await get(o, url));
        assert.ok(next);
        return new URL(next, 'http://x').searchParams.get('cursor')!;
      };
      const hc = await cursorOf(`/plants/${p.id}/history?limit=1`);
      const ac = await cursorOf(`/gardens/${g}/activity?limit=1`);
      const bad: [string, string][] = [
        ...['0', '-1', '9007199254740992', 'abc', '1.5', '01'].map((id): [string, string] => [
          `/plants/${id}/history`,
          'invalid_parameter',
        ]),
        ...['', '0', '1001', '-1', '1.5', '1e2', 'x', '01'].map((l): [string, string] => [
          `/plants/${p.id}/history?limit=${l}`,
          'invalid_parameter',
        ]),
        [`/plants/${p.id}/history?limit=1&limit=2`, 'invalid_parameter'],
        [`/plants/${p.id}/history?other=1`, 'invalid_parameter'],
        [`/plants/${p.id}/history?cursor=nonsense`, 'invalid_cursor'],
        [`/plants/${p.id}/history?cursor=`, 'invalid_parameter'],
        // Another plant's cursor, an activity cursor, another garden's, another type filter's.
        [`/plants/${q.id}/history?cursor=${hc}`, 'invalid_cursor'],
        [`/plants/${p.id}/history?cursor=${ac}`, 'invalid_cursor'],
        [`/gardens/${g2}/activity?cursor=${ac}`, 'invalid_cursor'],
        [`/gardens/${g}/activity?cursor=${ac}&type=plant.created`, 'invalid_cursor'],
        [`/gardens/${g}/activity?type=plant.exploded`, 'invalid_parameter'],
        [`/gardens/${g}/activity?type=plant.created,`, 'invalid_parameter'],
        [`/gardens/${g}/activity?type=,plant.created`, 'invalid_parameter'],
        [`/gardens/${g}/activity?type=`, 'invalid_parameter'],
        [`/gardens/${g}/activity?type=a&type=b`, 'invalid_parameter'],
        [`/gardens/${g}/activity?limit=0`, 'invalid_parameter'],
        [`/gardens/${g}/activity?limit=1001`, 'invalid_parameter'],
        [`/gardens/${g}/activity?cursor=${'A'.repeat(600)}`, 'invalid_parameter'],
      ];
      for (const [url, code] of bad) refused(await get(o, url), 400, code, url);
      const unknown = await get(o, `/gardens/${g}/activity?type=plant.exploded`);
      assert.match(
        unknown.json().message,
        /plant\.created, plant\.updated, plant\.deleted, plant\.restored, plant\.purged, member\.added/,
      );
      // Another user's cursor, for the same plant or garden.
      const admin = await h.user(['plants:admin']);
      refused(await get(admin, `/plants/${p.id}/history?cursor=${hc}`), 400, 'invalid_cursor');
      refused(await get(admin, `/gardens/${g}/activity?cursor=${ac}`), 400, 'invalid_cursor');
      // A stranger's bad input is 400 too (checked before the garden), and nothing changed.
      refused(await get(other, `/gardens/${g}/activity?type=x`), 400, 'invalid_parameter');
      refused(await o.request({ method: 'POST', url: `/plants/${p.id}/history` }), 405);
      assert.equal((await walk(o, `/gardens/${g}/activity`)).items.length, 4);
    });
  });
}
