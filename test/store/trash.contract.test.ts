import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { EventRecord, Store, Trashing, TrashPageQuery, TrashRecord } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { garden, plant, team, user } from '../helpers/gardens.js';
import { logSettled } from '../helpers/log.js';
import { statementsOf } from '../helpers/pg-statements.js';

// The trash's store methods (contract 13.2) on every engine: a delete with a trashing moves the
// plant out of every read and into the trash; pages newest deletion first across gardens, each
// page a keyset page; restore, purge and the service's purge with their refusals and events.

const DAY = 86_400_000;
const trashing = (by: string, at = new Date(), keep = 30 * DAY): Trashing => ({
  deletedAt: at,
  deletedBy: by,
  purgeAt: new Date(at.getTime() + keep),
});

async function eventsOf(store: Store, garden: string): Promise<EventRecord[]> {
  await logSettled(store);
  const start = store.engine === 'postgres' ? '0.0' : '0';
  return (await store.readEvents({ after: start, gardens: [garden], limit: 1000 })).events;
}

for (const engine of ENGINES) {
  describe(`store trash: ${engine.name}`, { skip: engine.skip, timeout: 60_000 }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(() => store.close());

    it('a trashed plant leaves every read of plants, and its id may be taken again', async () => {
      const { o, g } = await team(store);
      const p = await plant(store, o, g, { name: 'Hidden fern', tag: 't' });
      const r = await store.deletePlant(p.id, o, { at: new Date(), actor: o }, null, trashing(o));
      assert.deepEqual(r, { ok: true });
      assert.equal(await store.getPlant(p.id), null);
      assert.equal(await store.plantFor(p.id, o), null);
      const q = { gardens: [g], tag: null, afterId: 0, limit: 10 };
      assert.deepEqual(await store.listPlants(q), []);
      assert.deepEqual(await store.listPlants({ ...q, tag: 't' }), []);
      assert.deepEqual(await store.listPlants({ ...q, terms: ['hidden'] }), []);
      const pages: unknown[] = [];
      for await (const page of store.exportPlants({ gardens: [g], tag: null })) pages.push(page);
      assert.deepEqual(pages, []);
      const [entry] = await store.listTrash({ gardens: [g], after: null, limit: 10 });
      assert.deepEqual(
        { ...entry, deletedAt: 0, purgeAt: 0 },
        { ...p, deletedBy: o, deletedAt: 0, purgeAt: 0 },
      );
      await plant(store, o, g, { id: p.id, name: 'Taker' });
      assert.deepEqual(await store.restorePlant(p.id, o), { refused: 'exists' });
    });

    it('pages newest deletion first (then the larger id), merged across gardens, as keyset pages', async () => {
      const o = user();
      const gs = [await garden(store, o), await garden(store, o), await garden(store, o)];
      const t0 = Date.now();
      const made: { id: number; at: number }[] = [];
      for (let i = 0; i < 20; i++) {
        const g = gs[(i * 7) % 3]!;
        const p = await plant(store, o, g, { name: `P${i}` });
        // Some share a deletion time: the larger id comes first among them.
        const at = t0 + Math.floor(i / 3) * 1000;
        assert.ok('ok' in (await store.deletePlant(p.id, o, undefined, null, trashing(o, new Date(at)))));
        made.push({ id: p.id, at });
      }
      const want = [...made].sort((a, b) => b.at - a.at || b.id - a.id).map((x) => x.id);
      for (const scope of [gs, null]) {
        for (const limit of [1, 3, 7, 100]) {
          const got: number[] = [];
          let after = null;
          for (;;) {
            const page = await store.listTrash({ gardens: scope, after, limit });
            got.push(...page.map((x) => x.id));
            if (page.length < limit) break;
            const last = page.at(-1)!;
            after = { deletedAt: last.deletedAt, id: last.id };
          }
          const mine = scope === null ? got.filter((id) => want.includes(id)) : got;
          assert.deepEqual(mine, want, `limit ${limit}, ${scope === null ? 'admin' : 'gardens'}`);
        }
      }
      assert.deepEqual(await store.listTrash({ gardens: [], after: null, limit: 5 }), []);
    });

    it('JSON pages (engines that write them): the entries of listTrash as the route writes them, with the access facts', {
      skip: engine.name === 'postgres' ? false : 'only PostgreSQL writes its pages as JSON',
    }, async () => {
      assert.ok(store.listTrashJson);
      const o = user();
      const [v, e, stranger] = [user('viewer'), user('editor'), user('stranger')];
      const gs = [
        await garden(store, o, [[v, 'viewer']]),
        await garden(store, o, [[e, 'editor']]),
        await garden(store, o),
      ];
      const t0 = Date.now();
      for (let i = 0; i < 15; i++) {
        const g = gs[(i * 7) % 3]!;
        // Names and tags JSON must escape; some share a deletion time.
        const name = ['Fern', 'Quote " and \\ back', 'Ünïcødé 🌿', 'tab\there'][i % 4]!;
        const p = await plant(store, o, g, { name: `${name} ${i}`, tag: i % 2 === 0 ? `t"${i}` : null });
        const at = new Date(t0 + Math.floor(i / 3) * 1000 + (i % 3));
        assert.ok('ok' in (await store.deletePlant(p.id, o, undefined, null, trashing(o, at))));
      }
      const asItem = (t: TrashRecord) => ({
        id: t.id,
        name: t.name,
        ...(t.tag === null ? {} : { tag: t.tag }),
        garden: t.garden,
        deletedAt: t.deletedAt.toISOString(),
        deletedBy: t.deletedBy,
        purgeAt: t.purgeAt.toISOString(),
      });
      const all = async (q: Omit<TrashPageQuery, 'after'>) => {
        const items: unknown[] = [];
        for (let after: TrashPageQuery['after'] = null, n = 0; n < 1000; n++) {
          const page = await store.listTrashJson!({ ...q, after });
          const got = JSON.parse(page.json) as unknown[];
          assert.equal(got.length, Math.min(page.rows, q.limit));
          items.push(...got);
          if (page.rows <= q.limit) return items;
          const [ms, id] = page.last!.split('.').map(Number) as [number, number];
          after = { deletedAt: new Date(ms), id };
        }
        throw new Error('paging never ended');
      };
      const want = async (gardens: string[] | null) =>
        (await store.listTrash({ gardens, after: null, limit: 10_000 })).map(asItem);
      for (const limit of [1, 3, 7, 100]) {
        assert.deepEqual(
          await all({ garden: null, actor: o, limit }),
          await want(gs),
          `mine, limit ${limit}`,
        );
        assert.deepEqual(
          await all({ garden: null, actor: e, limit }),
          await want([gs[1]!]),
          `editor, limit ${limit}`,
        );
        assert.deepEqual(
          await all({ garden: null, actor: null, limit }),
          await want(null),
          `admin, limit ${limit}`,
        );
        assert.deepEqual(
          await all({ garden: gs[1]!, actor: e, limit }),
          await want([gs[1]!]),
          `one garden, limit ${limit}`,
        );
        assert.deepEqual(
          await all({ garden: gs[2]!, actor: null, limit }),
          await want([gs[2]!]),
          `admin's garden, limit ${limit}`,
        );
      }
      assert.deepEqual(await all({ garden: null, actor: v, limit: 5 }), []);
      // The facts read with a garden's page; rows only for an editor, an owner or an admin.
      const facts = async (garden: string, actor: string | null) => {
        const p = await store.listTrashJson!({ garden, actor, after: null, limit: 5 });
        return [p.found, p.role, p.rows > 0];
      };
      assert.deepEqual(await facts(gs[1]!, e), [true, 'editor', true]);
      assert.deepEqual(await facts(gs[0]!, o), [true, 'owner', true]);
      assert.deepEqual(await facts(gs[0]!, null), [true, null, true]);
      assert.deepEqual(await facts(gs[0]!, v), [true, 'viewer', false]);
      assert.deepEqual(await facts(gs[0]!, stranger), [true, null, false]);
      assert.deepEqual(await facts('gdn_00000000000000000000000000', null), [false, null, false]);
    });

    it('restore: missing before forbidden before exists; back with a new version and its event', async () => {
      const { o, e, v, g } = await team(store);
      const stranger = user();
      const p = await plant(store, e, g, { name: 'Back', tag: 'x' });
      await store.deletePlant(p.id, e, undefined, null, trashing(e));
      assert.deepEqual(await store.restorePlant(p.id, stranger), { refused: 'missing' });
      assert.deepEqual(await store.restorePlant(p.id, v), { refused: 'forbidden' });
      assert.deepEqual(await store.restorePlant(9_007_199_254_740_991, o), { refused: 'missing' });
      const r = await store.restorePlant(p.id, o, undefined, { at: new Date(), actor: o, requestId: 'r1' });
      assert.ok('ok' in r);
      assert.deepEqual({ ...r.ok, version: 0 }, { ...p, version: 0 });
      assert.ok(r.ok.version > p.version);
      assert.deepEqual(await store.getPlant(p.id), r.ok);
      assert.deepEqual(await store.listTrash({ gardens: [g], after: null, limit: 10 }), []);
      assert.deepEqual(
        (await store.listPlants({ gardens: [g], tag: null, afterId: 0, limit: 10, terms: ['back'] })).map(
          (x) => x.id,
        ),
        [p.id],
      );
      const last = (await eventsOf(store, g)).at(-1)!;
      assert.deepEqual(
        [last.type, last.data, last.actor, last.requestId],
        ['plant.restored', { id: p.id, name: 'Back', tag: 'x', garden: g }, o, 'r1'],
      );
      // An admin (null actor) restores in any garden.
      await store.deletePlant(p.id, o, undefined, null, trashing(o));
      assert.ok('ok' in (await store.restorePlant(p.id, null)));
    });

    it('purge by a member, a second deletion replacing the first, and a garden deleted with its trash', async () => {
      const { o, e, v, g } = await team(store);
      const a = await plant(store, o, g, { name: 'A' });
      await store.deletePlant(a.id, o, undefined, null, trashing(o));
      assert.deepEqual(await store.purgeTrashed(a.id, user()), { refused: 'missing' });
      assert.deepEqual(await store.purgeTrashed(a.id, v), { refused: 'forbidden' });
      assert.deepEqual(await store.purgeTrashed(a.id, e, { at: new Date(), actor: e }), { ok: true });
      assert.deepEqual(await store.purgeTrashed(a.id, e), { refused: 'missing' });
      let last = (await eventsOf(store, g)).at(-1)!;
      assert.deepEqual([last.type, last.data, last.actor], ['plant.purged', { id: a.id, garden: g }, e]);

      const g2 = await garden(store, o);
      const b = await plant(store, o, g, { name: 'B1' });
      await store.deletePlant(b.id, o, { at: new Date(), actor: o }, null, trashing(o));
      await plant(store, o, g2, { id: b.id, name: 'B2' });
      await store.deletePlant(b.id, o, { at: new Date(), actor: o }, null, trashing(o));
      assert.deepEqual(await store.listTrash({ gardens: [g], after: null, limit: 10 }), []);
      assert.deepEqual(
        (await store.listTrash({ gardens: [g2], after: null, limit: 10 })).map((x) => [x.id, x.name]),
        [[b.id, 'B2']],
      );
      // The older entry's plant.purged goes to its own garden.
      last = (await eventsOf(store, g)).at(-1)!;
      assert.deepEqual([last.type, last.data, last.actor], ['plant.purged', { id: b.id, garden: g }, o]);

      assert.deepEqual(await store.deleteGarden(g2, o, { at: new Date(), actor: o }), { ok: true });
      assert.deepEqual(
        await store
          .listTrash({ gardens: null, after: null, limit: 1000 })
          .then((l) => l.filter((x) => x.id === b.id)),
        [],
      );
      // Its trash's plant.purged, then each member's member.removed (for the change feed, 13.4).
      const [gone, removed] = (await eventsOf(store, g2)).slice(-2);
      assert.deepEqual([gone!.type, gone!.data], ['plant.purged', { id: b.id, garden: g2 }]);
      assert.deepEqual(
        [removed!.type, removed!.data],
        ['member.removed', { garden: g2, user: o, role: 'owner' }],
      );
    });

    // PostgreSQL runs the deletes of a turn as one statement (PgPlantWrites.deleteBatch); each must
    // still answer, move its plant and write its events as it would alone.
    for (const into of ['the trash', 'nowhere'] as const) {
      it(`deletes issued in one turn (into ${into}) each answer as alone: ids twice, refusals, purged entries`, async () => {
        const { o, e, v, g } = await team(store);
        const by = (who: string) => (into === 'the trash' ? trashing(who) : null);
        const at = new Date();
        const [a, b, c, d, f] = await Promise.all(
          ['A', 'B', 'C', 'D', 'F'].map((name) => plant(store, o, g, { name })),
        );
        // f's id was in the trash before: its delete replaces that entry (with its plant.purged).
        if (into === 'the trash') {
          await store.deletePlant(f!.id, o, undefined, null, trashing(o));
          await plant(store, o, g, { id: f!.id, name: 'F again' });
        }
        const sent = statementsOf(store);
        const results = await Promise.all([
          store.deletePlant(a!.id, o, { at, actor: o }, null, by(o)),
          store.deletePlant(a!.id, e, { at, actor: e }, null, by(e)), // the same id again: gone by then
          store.deletePlant(b!.id, v, { at, actor: v }, null, by(v)), // a viewer may not
          store.deletePlant(c!.id, e, { at, actor: e }, [c!.version + 1], by(e)), // not its version
          store.deletePlant(d!.id, e, { at, actor: e }, [c!.version, d!.version], by(e)),
          store.deletePlant(f!.id, null, { at, actor: null }, null, by('admin')),
          store.deletePlant(2 ** 50, o, { at, actor: o }, null, by(o)), // no such plant
          store.deletePlant(c!.id, o, { at, actor: o }, null, by(o)), // c again, by its owner
        ]);
        // The refused delete of c reads why after its refusal; by then the owner's delete of c may
        // have gone through, and then c is missing (as if that one had come first: both answers
        // are the truth of some order of the two).
        assert.ok(
          ['mismatch', 'missing'].includes((results[3] as { refused: string }).refused),
          JSON.stringify(results[3]),
        );
        results[3] = { refused: 'mismatch' };
        assert.deepEqual(results, [
          { ok: true },
          { refused: 'missing' },
          { refused: 'forbidden' },
          { refused: 'mismatch' },
          { ok: true },
          { ok: true },
          { refused: 'missing' },
          { ok: true },
        ]);
        sent.stop();
        if (store.engine === 'postgres') {
          // One statement for the turn's deletes; the second of an id alone, after it.
          const one = into === 'the trash' ? 'trashPlant' : 'deletePlant';
          assert.deepEqual(
            sent.names.filter((n) => n.startsWith(one)),
            [`${one}s`, one, one],
          );
        }
        for (const x of [a, c, d, f]) assert.equal(await store.getPlant(x!.id), null);
        assert.deepEqual(await store.getPlant(b!.id), b);
        const listed = await store.listPlants({ gardens: [g], tag: null, afterId: 0, limit: 10 });
        assert.deepEqual(
          listed.map((x) => x.id),
          [b!.id],
        );
        const trash = await store.listTrash({ gardens: [g], after: null, limit: 10 });
        assert.deepEqual(
          trash.map((x) => [x.id, x.name, x.deletedBy]).sort((x, y) => Number(x[0]) - Number(y[0])),
          into === 'the trash'
            ? [
                [a!.id, 'A', o],
                [c!.id, 'C', o],
                [d!.id, 'D', e],
                [f!.id, 'F again', 'admin'],
              ]
            : [],
        );
        const events = (await eventsOf(store, g)).filter((x) => x.createdAt.getTime() === at.getTime());
        const deleted = events.filter((x) => x.type === 'plant.deleted');
        assert.deepEqual(
          deleted
            .map((x) => [(x.data as { id: number }).id, x.actor])
            .sort((x, y) => Number(x[0]) - Number(y[0])),
          [
            [a!.id, o],
            [c!.id, o],
            [d!.id, e],
            [f!.id, null],
          ],
        );
        const purged = events.filter((x) => x.type === 'plant.purged');
        assert.deepEqual(
          purged.map((x) => x.data),
          into === 'the trash' ? [{ id: f!.id, garden: g }] : [],
        );
        // Each plant's plant.deleted before the plant.purged of the entry it replaced.
        if (into === 'the trash')
          assert.ok(
            events.indexOf(purged[0]!) >
              events.findIndex((x) => x.type === 'plant.deleted' && (x.data as { id: number }).id === f!.id),
          );
      });
    }

    it("the service's purge erases what is due, in batches, oldest first, each with an event of no actor", async () => {
      const o = user();
      const g = await garden(store, o);
      const now = Date.now();
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) {
        const p = await plant(store, o, g, { name: `Due ${i}` });
        // Due an hour ago … (i = 4) not yet due.
        const at = new Date(now - 2 * 3_600_000);
        const keep = i < 4 ? 3_600_000 - i * 1000 : 4 * 3_600_000;
        await store.deletePlant(p.id, o, undefined, null, trashing(o, at, keep));
        ids.push(p.id);
      }
      // Other tests' entries are never due: only these four are.
      assert.equal(await store.purgeExpiredTrash(new Date(now), 3), 3);
      assert.equal(await store.purgeExpiredTrash(new Date(now), 3), 1);
      assert.equal(await store.purgeExpiredTrash(new Date(now), 3), 0);
      assert.deepEqual(
        (await store.listTrash({ gardens: [g], after: null, limit: 10 })).map((x) => x.id),
        [ids[4]],
      );
      const purged = (await eventsOf(store, g)).filter((x) => x.type === 'plant.purged');
      // The oldest purgeAt first: the first batch took the three that expired first (in any order
      // within it), the second the last one.
      const order = purged.map((x) => (x.data as { id: number }).id);
      assert.deepEqual(new Set(order.slice(0, 3)), new Set([ids[3], ids[2], ids[1]]));
      assert.deepEqual(order.slice(3), [ids[0]]);
      assert.deepEqual(new Set(purged.map((x) => `${x.actor}/${x.requestId}`)), new Set(['null/null']));
    });
  });
}
