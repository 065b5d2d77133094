import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { PagePlant, Store } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { garden, home, plant, team, user } from '../helpers/gardens.js';
import { until } from '../helpers/wait.js';

// Plants in gardens, on every engine: who may create, change and delete them (checked in the
// write's own transaction, missing before forbidden before a version mismatch), and list pages
// across several gardens, which must be exactly the id-ordered merge of the gardens' plants.

const NO_GARDEN = 'gdn_000000000000000000000000';

// A small seeded generator, so a failure can be replayed from the seed in its message.
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

for (const engine of ENGINES) {
  describe(`store garden plants: ${engine.name}`, { skip: engine.skip }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(async () => {
      await store?.close();
    });

    it('create: an editor or owner may; a viewer is forbidden; anyone else, or no garden, is missing', async () => {
      const { o, e, v, g } = await team(store);
      const made = (owner: string, fields: { id?: number | null; garden?: string; admin?: boolean } = {}) =>
        store.createPlant({
          id: fields.id ?? null,
          owner,
          garden: fields.garden ?? g,
          name: 'Fern',
          tag: null,
          ...(fields.admin ? { admin: true } : {}),
        });
      assert.ok('ok' in (await made(o)));
      const byEditor = await made(e);
      assert.ok('ok' in byEditor);
      assert.deepEqual(await store.getPlant(byEditor.ok.id), byEditor.ok);
      assert.equal(byEditor.ok.owner, e);
      assert.equal(byEditor.ok.garden, g);
      assert.deepEqual(await made(v), { refused: 'forbidden' });
      assert.deepEqual(await made(user()), { refused: 'no_garden' });
      assert.deepEqual(await made(o, { garden: NO_GARDEN }), { refused: 'no_garden' });
      // plants:admin needs no role, but a garden that exists.
      const byAdmin = await made(user('admin'), { admin: true });
      assert.ok('ok' in byAdmin);
      assert.deepEqual(await made(user('admin'), { admin: true, garden: NO_GARDEN }), {
        refused: 'no_garden',
      });
      // With a client-chosen id too, and the garden's refusals come before an id that exists.
      const id = 8_000_000_000 + Math.floor(Math.random() * 1e9);
      assert.deepEqual(await made(v, { id }), { refused: 'forbidden' });
      assert.deepEqual(await made(user(), { id }), { refused: 'no_garden' });
      assert.ok('ok' in (await made(e, { id })));
      assert.deepEqual(await made(v, { id }), { refused: 'forbidden' });
      assert.deepEqual(await made(user(), { id }), { refused: 'no_garden' });
      assert.deepEqual(await made(o, { id }), { refused: 'exists' });
      assert.deepEqual(await made(o, { id: byAdmin.ok.id, garden: NO_GARDEN }), { refused: 'no_garden' });
    });

    it('a refused create with an Idempotency-Key records nothing against the key', async () => {
      const o = user();
      const v = user();
      const g = await garden(store, o, [[v, 'viewer']]);
      const opts = { now: new Date(), staleAfterMs: 60_000, retainMs: 86_400_000 };
      for (const [who, id, want] of [
        [v, null, 'forbidden'],
        [user(), null, 'no_garden'],
        [v, 9_000_000_001, 'forbidden'],
      ] as const) {
        const ref = { user: who, key: `k-${Math.random()}` };
        assert.deepEqual(await store.claimIdempotencyKey(ref, 'h', opts), { ok: true });
        assert.deepEqual(await store.createPlant({ id, owner: who, garden: g, name: 'x', tag: null }, ref), {
          refused: want,
        });
        assert.deepEqual(await store.claimIdempotencyKey(ref, 'h', opts), { refused: 'in_flight' });
        await store.releaseIdempotencyKey(ref);
      }
    });

    it('change and delete by role: missing before forbidden before a version mismatch', async () => {
      const { o, e, v, g } = await team(store);
      const stranger = user();
      const p = await plant(store, o, g, { tag: 'green' });
      const stale = [p.version + 1_000_000];
      // A stranger: missing, whatever the version; a viewer: forbidden, whatever the version.
      for (const versions of [null, stale, [p.version]]) {
        assert.deepEqual(await store.updatePlant(p.id, stranger, { name: 'x' }, versions), {
          refused: 'missing',
        });
        assert.deepEqual(await store.deletePlant(p.id, stranger, undefined, versions), {
          refused: 'missing',
        });
        assert.deepEqual(await store.updatePlant(p.id, v, { name: 'x' }, versions), { refused: 'forbidden' });
        assert.deepEqual(await store.deletePlant(p.id, v, undefined, versions), { refused: 'forbidden' });
      }
      assert.deepEqual(await store.getPlant(p.id), p, 'nothing changed');
      // An editor: a mismatch, then the change.
      assert.deepEqual(await store.updatePlant(p.id, e, { name: 'x' }, stale), {
        refused: 'mismatch',
        current: p,
      });
      assert.deepEqual(await store.deletePlant(p.id, e, undefined, stale), { refused: 'mismatch' });
      const r = await store.updatePlant(p.id, e, { name: 'Edited' }, [p.version]);
      assert.ok('ok' in r && r.ok.changed);
      assert.deepEqual(
        r.ok.plant,
        { ...p, name: 'Edited', version: r.ok.plant.version },
        'its owner and garden stay',
      );
      // Admin: any garden.
      const r2 = await store.updatePlant(p.id, null, { tag: null }, null);
      assert.ok('ok' in r2 && r2.ok.plant.tag === null);
      // Roles change at once: a viewer made editor may change it; an editor removed may not.
      assert.ok('ok' in (await store.putMember(g, o, v, 'editor', new Date())));
      assert.ok('ok' in (await store.updatePlant(p.id, v, { name: 'By v' }, null)));
      assert.ok('ok' in (await store.removeMember(g, o, e)));
      assert.deepEqual(await store.updatePlant(p.id, e, { name: 'x' }, null), { refused: 'missing' });
      assert.deepEqual(await store.deletePlant(p.id, e), { refused: 'missing' });
      assert.deepEqual(await store.deletePlant(p.id, v, undefined, [r2.ok.plant.version]), {
        refused: 'mismatch',
      });
      assert.deepEqual(await store.deletePlant(p.id, v), { ok: true });
      assert.deepEqual(await store.updatePlant(p.id, v, { name: 'x' }, null), { refused: 'missing' });
      assert.deepEqual(await store.deletePlant(p.id, null), { refused: 'missing' });
    });

    it("an editor's change and delete record events as the plant's: its owner and its garden", async () => {
      const o = user();
      const e = user();
      const g = await garden(store, o, [[e, 'editor']]);
      const head = await store.headPosition();
      const p = await plant(store, o, g, { name: 'Aloe', tag: 't', at: new Date() });
      const r = await store.updatePlant(p.id, e, { tag: null }, null, undefined, { at: new Date() });
      assert.ok('ok' in r);
      assert.deepEqual(await store.deletePlant(p.id, e, { at: new Date() }), { ok: true });
      const events = await until('three events', async () => {
        const got = (await store.readEvents({ after: head, gardens: [g], limit: 10 })).events;
        return got.length >= 3 && got;
      });
      assert.deepEqual(
        events.map((ev) => [ev.type, ev.owner, ev.garden, ev.data]),
        [
          ['plant.created', o, g, { id: p.id, name: 'Aloe', tag: 't', garden: g }],
          ['plant.updated', o, g, { id: p.id, name: 'Aloe', garden: g, previous: { tag: 't' } }],
          ['plant.deleted', o, g, { id: p.id, name: 'Aloe', garden: g }],
        ],
      );
    });

    it('plantFor: the plant with the role of a member, owner for admin, null for anyone else', async () => {
      const o = user();
      const v = user();
      const g = await garden(store, o, [[v, 'viewer']]);
      const p = await plant(store, o, g);
      assert.deepEqual(await store.plantFor(p.id, v), { plant: p, role: 'viewer' });
      assert.deepEqual(await store.plantFor(p.id, o), { plant: p, role: 'owner' });
      assert.deepEqual(await store.plantFor(p.id, null), { plant: p, role: 'owner' });
      assert.equal(await store.plantFor(p.id, user()), null);
      assert.equal(await store.plantFor(p.id + 1_000_000_000, null), null);
      assert.ok('ok' in (await store.removeMember(g, v, v)));
      assert.equal(await store.plantFor(p.id, v), null, 'gone at once');
    });

    it('lists across gardens are exactly the id-ordered merge, page after page (random model)', async () => {
      const seed = Date.now() % 1_000_000;
      const rnd = random(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
      const o = user();
      const gardens = [await home(store, o)];
      for (let i = 0; i < 4; i++) gardens.push(await garden(store, o, [], `G${i}`));
      // A garden o is not in, whose plants must never show.
      const stranger = user();
      const foreign = await garden(store, stranger);
      const tags = ['red', 'blue', 'rare', null];
      const model: PagePlant[] = [];
      const add = async (g: string, id?: number) => {
        const tag = rnd() < 0.05 ? 'rare' : pick(tags.filter((t) => t !== 'rare'));
        const p = await plant(store, g === foreign ? stranger : o, g, {
          name: `n${model.length}`,
          tag,
          ...(id ? { id } : {}),
        });
        if (g !== foreign) model.push({ id: p.id, garden: g, name: p.name, tag: p.tag });
      };
      // Skewed: the home garden holds most; some ids chosen by the client, above and between.
      const base = 5_000_000_000 + Math.floor(rnd() * 1e9);
      const chosen = new Set<number>();
      for (let i = 0; i < 240; i++) {
        const g = rnd() < 0.1 ? foreign : rnd() < 0.5 ? gardens[0]! : pick(gardens);
        const id = rnd() < 0.15 ? base + Math.floor(rnd() * 1e6) * 2 + 1 : undefined;
        if (id !== undefined && chosen.has(id)) continue;
        if (id !== undefined) chosen.add(id);
        await add(g, id);
      }
      // Some deleted.
      for (let i = 0; i < 20; i++) {
        const k = Math.floor(rnd() * model.length);
        assert.deepEqual(await store.deletePlant(model[k]!.id, o), { ok: true });
        model.splice(k, 1);
      }
      model.sort((a, b) => a.id - b.id);
      const expect = (gs: string[], tag: string | null, afterId: number, limit: number) =>
        model
          .filter((p) => gs.includes(p.garden) && (tag === null || p.tag === tag) && p.id > afterId)
          .slice(0, limit);
      const subsets: string[][] = [
        [gardens[0]!],
        [gardens[3]!],
        gardens,
        [gardens[4]!, gardens[1]!],
        [gardens[2]!, gardens[0]!, gardens[2]!],
      ];
      for (let i = 0; i < 6; i++) subsets.push(gardens.filter(() => rnd() < 0.5).concat(gardens[1]!));
      const walks: { gs: string[]; tag: string | null; limit: number }[] = [];
      for (const gs of subsets) {
        for (const tag of [null, 'red', 'rare', 'none'])
          walks.push({ gs, tag, limit: pick([1, 2, 3, 7, 50, 1000]) });
      }
      // Every walk follows its pages to the end; the walks run side by side, so pages of many
      // walks are read in one turn (an engine's batched read must answer each as alone).
      await Promise.all(
        walks.map(async ({ gs, tag, limit }) => {
          const what = `seed ${seed}, gardens ${gs.map((g) => gardens.indexOf(g))}, tag ${tag}, limit ${limit}`;
          const seen: PagePlant[] = [];
          let afterId = 0;
          for (let n = 0; n < 1000; n++) {
            const page = await store.listPlants({ gardens: gs, tag, afterId, limit });
            assert.deepEqual(page, expect(gs, tag, afterId, limit), `${what}, after ${afterId}`);
            seen.push(...page);
            if (page.length < limit) break;
            afterId = page[page.length - 1]!.id;
          }
          assert.deepEqual(seen, expect(gs, tag, 0, Number.MAX_SAFE_INTEGER), what);
        }),
      );
      // Pages after any cursor, with versions, and every plant's version as it is read alone.
      for (let i = 0; i < 40; i++) {
        const gs = pick(subsets);
        const tag = pick([null, 'red', 'blue', 'rare']);
        const afterId = rnd() < 0.5 ? pick(model).id : Math.floor(rnd() * (base + 3e6));
        const limit = pick([1, 5, 20, 1000]);
        const page = await store.listPlants({ gardens: gs, tag, afterId, limit, withVersion: true });
        assert.deepEqual(
          page.map(({ version: _, ...p }) => p),
          expect(gs, tag, afterId, limit),
          `seed ${seed}, with versions`,
        );
        for (const p of page) assert.equal(p.version, (await store.getPlant(p.id))?.version);
      }
      // Every plant (admin): the foreign garden's too, in id order.
      const all = await store.listPlants({ gardens: null, tag: null, afterId: 0, limit: 100_000 });
      for (const p of model) assert.ok(all.some((q) => q.id === p.id && q.garden === p.garden));
      assert.ok(all.some((q) => q.garden === foreign));
      assert.ok(all.every((q, i) => i === 0 || q.id > all[i - 1]!.id));
    });
  });
}
