import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { EVENT_TYPES, type EventRecord, type Store } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { claimAll, endpoint, garden, plant, team, user } from '../helpers/gardens.js';
import { until } from '../helpers/wait.js';

// Who did it (contract 13.1) and membership events (13.3), on every engine: an event keeps the
// actor and request id its write was given, and a membership change writes its event in its own
// transaction (a refused or unchanging one writes none).

for (const engine of ENGINES) {
  describe(`store event actors and member events: ${engine.name}`, { skip: engine.skip }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(async () => {
      await store?.close();
    });

    // Exactly the garden's events after `head`, once `n` are readable (and none more after a look).
    const eventsOf = async (head: string, g: string, n: number): Promise<EventRecord[]> => {
      const got = await until(`${n} events`, async () => {
        const r = (await store.readEvents({ after: head, gardens: [g], limit: 100 })).events;
        return r.length >= n && r;
      });
      assert.equal(got.length, n, JSON.stringify(got.map((e) => e.type)));
      return got;
    };
    const cause = (e: EventRecord) => [e.type, e.actor, e.requestId];

    it('create, batch create, change and delete keep their actor and request id; none given: null', async () => {
      const { o, e, g } = await team(store);
      const head = await store.headPosition();
      const at = new Date();
      const made = await store.createPlant(
        { id: null, owner: e, garden: g, name: 'Fern', tag: null },
        undefined,
        { at, actor: e, requestId: 'req-create' },
      );
      assert.ok('ok' in made);
      const id = made.ok.id;
      const batch = await store.createPlants(
        [
          { id: null, owner: o, garden: g, name: 'A', tag: null },
          { id: null, owner: o, garden: g, name: 'B', tag: 'x' },
        ],
        undefined,
        { at, actor: o, requestId: 'req-batch' },
      );
      assert.ok('ok' in batch);
      const changed = await store.updatePlant(id, e, { name: 'Boston fern' }, null, undefined, {
        at,
        actor: e,
        requestId: 'req-patch',
      });
      assert.ok('ok' in changed && changed.ok.changed);
      assert.deepEqual(await store.deletePlant(id, o, { at, actor: o, requestId: 'req-delete' }), {
        ok: true,
      });
      // With no cause (the service's own, or an engine's caller that gives none): null, null.
      await plant(store, o, g, { at });
      assert.deepEqual((await eventsOf(head, g, 6)).map(cause), [
        ['plant.created', e, 'req-create'],
        ['plant.created', o, 'req-batch'],
        ['plant.created', o, 'req-batch'],
        ['plant.updated', e, 'req-patch'],
        ['plant.deleted', o, 'req-delete'],
        ['plant.created', null, null],
      ]);
    });

    it('the actor may be an admin (no member) and is kept as given', async () => {
      const o = user();
      const g = await garden(store, o);
      const head = await store.headPosition();
      const admin = user('admin');
      const made = await store.createPlant(
        { id: null, owner: admin, garden: g, admin: true, name: 'Moss', tag: null },
        undefined,
        { at: new Date(), actor: admin, requestId: 'r1' },
      );
      assert.ok('ok' in made);
      assert.deepEqual((await eventsOf(head, g, 1)).map(cause), [['plant.created', admin, 'r1']]);
    });

    it('membership changes are events of the garden: added, changed (previous), removed (the role it had)', async () => {
      const o = user();
      const g = await garden(store, o);
      const [b, c] = [user(), user()];
      const head = await store.headPosition();
      const ev = (requestId: string, actor = o) => ({ at: new Date(), actor, requestId });
      assert.ok('ok' in (await store.putMember(g, o, b, 'viewer', new Date(), ev('r1'))));
      // The role it has already: no event.
      assert.ok('ok' in (await store.putMember(g, o, b, 'viewer', new Date(), ev('r2'))));
      assert.ok('ok' in (await store.putMember(g, o, b, 'editor', new Date(), ev('r3'))));
      assert.ok('ok' in (await store.putMember(g, o, c, 'owner', new Date(), ev('r4'))));
      assert.ok('ok' in (await store.removeMember(g, o, b, ev('r5'))));
      // Leaving: the member itself is the actor.
      assert.ok('ok' in (await store.removeMember(g, c, c, ev('r6', c))));
      const got = await eventsOf(head, g, 5);
      assert.deepEqual(
        got.map((e) => [e.type, e.garden, e.owner, e.actor, e.requestId, e.data]),
        [
          ['member.added', g, b, o, 'r1', { garden: g, user: b, role: 'viewer' }],
          ['member.changed', g, b, o, 'r3', { garden: g, user: b, role: 'editor', previous: 'viewer' }],
          ['member.added', g, c, o, 'r4', { garden: g, user: c, role: 'owner' }],
          ['member.removed', g, b, o, 'r5', { garden: g, user: b, role: 'editor' }],
          ['member.removed', g, c, c, 'r6', { garden: g, user: c, role: 'owner' }],
        ],
      );
      for (const e of got) assert.match(e.id, /^evt_/);
    });

    it('a refused membership change writes no event; one without an event given writes none', async () => {
      const { o, e, v, g } = await team(store);
      const head = await store.headPosition();
      const ev = { at: new Date(), actor: o, requestId: 'r' };
      // The last owner cannot be demoted nor removed; a viewer may not share; no such member.
      assert.deepEqual(await store.putMember(g, o, o, 'editor', new Date(), ev), { refused: 'last_owner' });
      assert.deepEqual(await store.removeMember(g, o, o, ev), { refused: 'last_owner' });
      assert.deepEqual(await store.putMember(g, v, user(), 'viewer', new Date(), ev), {
        refused: 'forbidden',
      });
      assert.deepEqual(await store.removeMember(g, o, user(), ev), { refused: 'no_member' });
      assert.ok('ok' in (await store.putMember(g, o, e, 'viewer', new Date())));
      // Something the log must show next: nothing before it.
      assert.ok('ok' in (await store.removeMember(g, o, v, ev)));
      assert.deepEqual(
        (await eventsOf(head, g, 1)).map((x) => x.type),
        ['member.removed'],
      );
    });

    it("a member event reaches the garden's members' endpoints, the new member's included", async () => {
      const o = user();
      const g = await garden(store, o);
      const b = user();
      const eo = await endpoint(store, o, { events: [...EVENT_TYPES] });
      const eb = await endpoint(store, b, { events: [...EVENT_TYPES] });
      const plantsOnly = await endpoint(store, o);
      const at = new Date();
      assert.ok('ok' in (await store.putMember(g, o, b, 'editor', at, { at, actor: o, requestId: 'r' })));
      const mine = [eo.id, eb.id, plantsOnly.id];
      const jobs = (await claimAll(store)).filter((j) => mine.includes(j.endpoint.id));
      const got = jobs.map((j) => [j.endpoint.id, j.event.type, j.event.actor, j.event.requestId]);
      assert.deepEqual(
        got.sort(),
        [
          [eb.id, 'member.added', o, 'r'],
          [eo.id, 'member.added', o, 'r'],
        ].sort(),
      );
    });
  });
}
