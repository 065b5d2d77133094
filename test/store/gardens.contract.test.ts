import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { gardenId } from '../../src/gardens/id.js';
import {
  MAX_GARDENS_CREATED,
  MAX_MEMBERS_PER_GARDEN,
  MAX_MEMBERSHIPS_PER_USER,
  type Store,
} from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { garden, home, plant, rolesIn, team, user } from '../helpers/gardens.js';

// The garden rules every engine keeps (contract 3.2): home gardens, roles, and every refusal of a
// garden write, each checked in the write's own transaction, also when writes race.

const NO_GARDEN = 'gdn_000000000000000000000000';
const at = (s: number) => new Date(1_700_000_000_000 + s * 1000);
// An id of the client's choosing, unlikely to be anyone else's.
const clientId = () => 6_000_000_000 + Math.floor(Math.random() * 1e12);

for (const engine of ENGINES) {
  describe(`store gardens: ${engine.name}`, { skip: engine.skip }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(async () => {
      await store?.close();
    });

    it('a home garden is made once, owned by its user, even when many ask at once', async () => {
      const u = user();
      const made = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.homeGarden(u, { id: gardenId(randomBytes), name: 'Home', at: at(i) }),
        ),
      );
      const first = made[0]!;
      assert.match(first.id, /^gdn_[0-9a-f]{24}$/);
      for (const g of made) assert.deepEqual(g, first);
      assert.deepEqual(first.homeUser, u);
      assert.equal(first.name, 'Home');
      // Asked again later, with another id: the same garden.
      assert.deepEqual(
        await store.homeGarden(u, { id: gardenId(randomBytes), name: 'Other', at: new Date() }),
        first,
      );
      assert.deepEqual(await store.gardensOf(u), [{ ...first, role: 'owner' }]);
      assert.deepEqual(await store.memberships(u), [{ garden: first.id, role: 'owner' }]);
      assert.deepEqual(
        (await store.listMembers(first.id)).map((m) => [m.user, m.role]),
        [[u, 'owner']],
      );
    });

    it('gardensOf: the home garden first, then by creation, with the role in each', async () => {
      const u = user();
      const other = user();
      // Another user's home garden, older than any of u's, shared with u.
      const theirs = await store.homeGarden(other, { id: gardenId(randomBytes), name: 'Home', at: at(1) });
      assert.ok('ok' in (await store.putMember(theirs.id, other, u, 'viewer', at(2))));
      const a = await store.createGarden({ id: gardenId(randomBytes), name: 'A', owner: u, at: at(3) });
      const b = await store.createGarden({ id: gardenId(randomBytes), name: 'B', owner: other, at: at(4) });
      assert.ok('ok' in a && 'ok' in b);
      assert.ok('ok' in (await store.putMember(b.ok.id, other, u, 'editor', at(5))));
      const mine = await store.homeGarden(u, { id: gardenId(randomBytes), name: 'Home', at: at(6) });
      assert.deepEqual(
        (await store.gardensOf(u)).map((g) => [g.id, g.role, g.homeUser]),
        [
          [mine.id, 'owner', u],
          [theirs.id, 'viewer', other],
          [a.ok.id, 'owner', null],
          [b.ok.id, 'editor', null],
        ],
      );
      assert.deepEqual(
        new Set((await store.memberships(u)).map((m) => `${m.garden} ${m.role}`)),
        new Set([`${mine.id} owner`, `${theirs.id} viewer`, `${a.ok.id} owner`, `${b.ok.id} editor`]),
      );
      assert.deepEqual(await store.memberships(user()), []);
      assert.deepEqual(await store.gardensOf(user()), []);
    });

    it('gardenFor: a member its role, an admin owner, anyone else or no garden null', async () => {
      const o = user();
      const v = user();
      const g = await garden(store, o, [[v, 'viewer']], 'Kitchen');
      const got = await store.gardenFor(g, v);
      assert.ok(got);
      assert.equal(got.role, 'viewer');
      assert.deepEqual(
        { ...got.garden, createdAt: null },
        { id: g, name: 'Kitchen', homeUser: null, createdAt: null },
      );
      assert.equal((await store.gardenFor(g, o))?.role, 'owner');
      assert.equal((await store.gardenFor(g, null))?.role, 'owner');
      assert.equal(await store.gardenFor(g, user()), null);
      assert.equal(await store.gardenFor(NO_GARDEN, null), null);
      assert.equal(await store.gardenFor(NO_GARDEN, o), null);
    });

    it('rename: by an owner or admin; an editor or viewer is forbidden; anyone else or no garden missing', async () => {
      const { o, e, v, g } = await team(store);
      assert.deepEqual(await store.renameGarden(g, e, 'x'), { refused: 'forbidden' });
      assert.deepEqual(await store.renameGarden(g, v, 'x'), { refused: 'forbidden' });
      assert.deepEqual(await store.renameGarden(g, user(), 'x'), { refused: 'missing' });
      assert.deepEqual(await store.renameGarden(NO_GARDEN, o, 'x'), { refused: 'missing' });
      assert.deepEqual(await store.renameGarden(NO_GARDEN, null, 'x'), { refused: 'missing' });
      const r = await store.renameGarden(g, o, 'Balcony');
      assert.ok('ok' in r);
      assert.equal(r.ok.name, 'Balcony');
      assert.deepEqual((await store.gardenFor(g, o))?.garden, r.ok);
      const byAdmin = await store.renameGarden(g, null, 'Roof');
      assert.ok('ok' in byAdmin && byAdmin.ok.name === 'Roof');
      // A home garden may be renamed; it stays its user's home.
      const u = user();
      const h = await home(store, u);
      const renamed = await store.renameGarden(h, u, 'Flat');
      assert.ok('ok' in renamed && renamed.ok.homeUser === u && renamed.ok.name === 'Flat');
    });

    it('delete: only an empty, non-home garden, by an owner or admin; its memberships go with it', async () => {
      const { o, e, v, g } = await team(store);
      assert.deepEqual(await store.deleteGarden(g, e), { refused: 'forbidden' });
      assert.deepEqual(await store.deleteGarden(g, v), { refused: 'forbidden' });
      assert.deepEqual(await store.deleteGarden(g, user()), { refused: 'missing' });
      assert.deepEqual(await store.deleteGarden(NO_GARDEN, null), { refused: 'missing' });
      const p = await plant(store, e, g);
      assert.deepEqual(await store.deleteGarden(g, o), { refused: 'garden_not_empty' });
      assert.deepEqual(await store.deleteGarden(g, null), { refused: 'garden_not_empty' });
      assert.deepEqual(await store.deletePlant(p.id, e), { ok: true });
      assert.deepEqual(await store.deleteGarden(g, o), { ok: true });
      assert.equal(await store.gardenFor(g, null), null);
      assert.deepEqual(await store.listMembers(g), []);
      for (const u of [o, e, v]) assert.ok(!(await store.memberships(u)).some((m) => m.garden === g));
      assert.deepEqual(await store.deleteGarden(g, o), { refused: 'missing' });
      // Admin deletes too; a home garden never goes, not even empty or by admin.
      const g2 = await garden(store, o);
      assert.deepEqual(await store.deleteGarden(g2, null), { ok: true });
      const h = await home(store, o);
      assert.deepEqual(await store.deleteGarden(h, o), { refused: 'home_garden' });
      assert.deepEqual(await store.deleteGarden(h, null), { refused: 'home_garden' });
    });

    it('putMember: an owner adds (201) and changes (200) members; others are refused in order', async () => {
      const o = user();
      const e = user();
      const newcomer = user();
      const g = await garden(store, o, [[e, 'editor']]);
      assert.deepEqual(await store.putMember(g, e, newcomer, 'viewer', at(1)), { refused: 'forbidden' });
      assert.deepEqual(await store.putMember(g, user(), newcomer, 'viewer', at(1)), { refused: 'missing' });
      assert.deepEqual(await store.putMember(NO_GARDEN, o, newcomer, 'viewer', at(1)), {
        refused: 'missing',
      });
      assert.deepEqual(await store.putMember(g, o, newcomer, 'viewer', at(10)), {
        ok: { member: { user: newcomer, role: 'viewer', addedAt: at(10) }, created: true },
      });
      // A change keeps when it was added; the same role again changes nothing.
      for (const role of ['owner', 'owner', 'editor'] as const) {
        assert.deepEqual(await store.putMember(g, o, newcomer, role, at(20)), {
          ok: { member: { user: newcomer, role, addedAt: at(10) }, created: false },
        });
      }
      const byAdmin = await store.putMember(g, null, user(), 'owner', at(30));
      assert.ok('ok' in byAdmin && byAdmin.ok.created);
      assert.equal((await store.listMembers(g)).length, 4);
      // By when they were added.
      const members = await store.listMembers(g);
      assert.deepEqual(
        members.map((m) => m.addedAt.getTime()),
        members.map((m) => m.addedAt.getTime()).sort((a, b) => a - b),
      );
    });

    it('putMember: a home garden keeps its user an owner; a garden keeps its last owner', async () => {
      const u = user();
      const friend = user();
      const h = await home(store, u);
      assert.ok('ok' in (await store.putMember(h, u, friend, 'owner', at(1))));
      assert.deepEqual(await store.putMember(h, friend, u, 'editor', at(2)), { refused: 'home_garden' });
      assert.deepEqual(await store.putMember(h, null, u, 'viewer', at(2)), { refused: 'home_garden' });
      assert.ok(
        'ok' in (await store.putMember(h, friend, u, 'owner', at(2))),
        'its own role again: no change',
      );
      // The friend, a second owner, may be demoted; then u is the last owner anyway.
      assert.ok('ok' in (await store.putMember(h, u, friend, 'viewer', at(3))));

      const o = user();
      const g = await garden(store, o);
      assert.deepEqual(await store.putMember(g, o, o, 'editor', at(4)), { refused: 'last_owner' });
      assert.deepEqual(await store.putMember(g, null, o, 'viewer', at(4)), { refused: 'last_owner' });
      const second = user();
      assert.ok('ok' in (await store.putMember(g, o, second, 'owner', at(5))));
      assert.ok('ok' in (await store.putMember(g, second, o, 'viewer', at(6))));
      assert.deepEqual(await rolesIn(store, g), { [o]: 'viewer', [second]: 'owner' });
      assert.deepEqual(await store.putMember(g, second, second, 'editor', at(7)), { refused: 'last_owner' });
    });

    it('removeMember: by an owner, or the member itself leaving; refused in order', async () => {
      const { o, e, v, g } = await team(store);
      const stranger = user();
      assert.deepEqual(await store.removeMember(g, e, v), { refused: 'forbidden' });
      assert.deepEqual(await store.removeMember(g, v, e), { refused: 'forbidden' });
      // A stranger is told the garden is missing before anything about the member.
      assert.deepEqual(await store.removeMember(g, stranger, stranger), { refused: 'missing' });
      assert.deepEqual(await store.removeMember(g, stranger, v), { refused: 'missing' });
      assert.deepEqual(await store.removeMember(NO_GARDEN, null, v), { refused: 'missing' });
      assert.deepEqual(await store.removeMember(g, o, stranger), { refused: 'no_member' });
      assert.deepEqual(await store.removeMember(g, null, stranger), { refused: 'no_member' });
      // A viewer leaves; an owner removes an editor.
      assert.deepEqual(await store.removeMember(g, v, v), { ok: true });
      assert.deepEqual(await store.removeMember(g, o, e), { ok: true });
      assert.deepEqual(await rolesIn(store, g), { [o]: 'owner' });
      assert.deepEqual(await store.removeMember(g, o, o), { refused: 'last_owner' });
      assert.deepEqual(await store.removeMember(g, null, o), { refused: 'last_owner' });
      // Gone at once: no membership, no garden to see.
      assert.equal(await store.gardenFor(g, e), null);
      assert.deepEqual(await store.removeMember(g, e, e), { refused: 'missing' });
      // Admin removes anyone but the last owner; a home garden keeps its user.
      assert.ok('ok' in (await store.putMember(g, o, v, 'editor', at(1))));
      assert.deepEqual(await store.removeMember(g, null, v), { ok: true });
      const h = await home(store, o);
      assert.ok('ok' in (await store.putMember(h, o, e, 'owner', at(2))));
      assert.deepEqual(await store.removeMember(h, e, o), { refused: 'home_garden' });
      assert.deepEqual(await store.removeMember(h, o, o), { refused: 'home_garden' });
      assert.deepEqual(await store.removeMember(h, null, o), { refused: 'home_garden' });
      assert.deepEqual(await store.removeMember(h, e, e), { ok: true });
    });

    it(`a user makes at most ${MAX_GARDENS_CREATED} gardens, its home among them; being added to others' never counts`, async () => {
      const u = user();
      await home(store, u);
      // 98 more, then racing creates for the last place: exactly one wins.
      for (let i = 0; i < MAX_GARDENS_CREATED - 2; i++) await garden(store, u);
      const racing = await Promise.all(
        Array.from({ length: 12 }, () =>
          store.createGarden({ id: gardenId(randomBytes), name: 'Late', owner: u, at: new Date() }),
        ),
      );
      const won = racing.flatMap((r) => ('ok' in r ? [r.ok.id] : []));
      assert.equal(won.length, 1, JSON.stringify(racing));
      assert.ok(racing.every((r) => 'ok' in r || r.refused === 'too_many_gardens'));
      assert.equal((await store.memberships(u)).length, MAX_GARDENS_CREATED);
      // Others adding u to their gardens neither fails at u's allowance nor uses it up.
      const other = user();
      const theirs = [await garden(store, other), await garden(store, other), await garden(store, other)];
      for (const g of theirs) assert.ok('ok' in (await store.putMember(g, other, u, 'viewer', new Date())));
      assert.equal((await store.memberships(u)).length, MAX_GARDENS_CREATED + theirs.length);
      assert.deepEqual(
        await store.createGarden({ id: gardenId(randomBytes), name: 'More', owner: u, at: new Date() }),
        { refused: 'too_many_gardens' },
      );
      // A garden u made and then deleted frees its place; leaving one it was added to does not.
      assert.deepEqual(await store.removeMember(theirs[0]!, u, u), { ok: true });
      assert.deepEqual(
        await store.createGarden({ id: gardenId(randomBytes), name: 'More', owner: u, at: new Date() }),
        { refused: 'too_many_gardens' },
      );
      assert.deepEqual(await store.deleteGarden(won[0]!, u), { ok: true });
      assert.ok(
        'ok' in
          (await store.createGarden({ id: gardenId(randomBytes), name: 'Again', owner: u, at: new Date() })),
      );
      // A user added to someone's garden before it has a home garden keeps a place for it.
      const fresh = user();
      assert.ok('ok' in (await store.putMember(theirs[1]!, other, fresh, 'editor', new Date())));
      for (let i = 0; i < MAX_GARDENS_CREATED - 1; i++) await garden(store, fresh);
      assert.deepEqual(
        await store.createGarden({
          id: gardenId(randomBytes),
          name: 'One more',
          owner: fresh,
          at: new Date(),
        }),
        { refused: 'too_many_gardens' },
      );
    });

    it(`a user is a member of at most ${MAX_MEMBERSHIPS_PER_USER} gardens in all, answered to the one adding`, async () => {
      const u = user();
      await home(store, u);
      // Gardens of others, made a few at a time by enough owners to hold them.
      const owners = Array.from(
        { length: Math.ceil(MAX_MEMBERSHIPS_PER_USER / (MAX_GARDENS_CREATED - 1)) },
        () => user('owner'),
      );
      const gardens: string[] = [];
      for (const o of owners) {
        for (let i = 0; i < MAX_GARDENS_CREATED - 1; i += 33) {
          const n = Math.min(33, MAX_GARDENS_CREATED - 1 - i);
          gardens.push(...(await Promise.all(Array.from({ length: n }, () => garden(store, o)))));
        }
      }
      const ownerOf = (i: number) => owners[Math.floor(i / (MAX_GARDENS_CREATED - 1))]!;
      // u is in its home garden: MAX - 1 more fill it up, the last few racing for the last place.
      const fill = MAX_MEMBERSHIPS_PER_USER - 1 - 5;
      for (let i = 0; i < fill; i += 25) {
        const adds = Array.from({ length: Math.min(25, fill - i) }, (_, k) =>
          store.putMember(gardens[i + k]!, ownerOf(i + k), u, 'viewer', new Date()),
        );
        for (const r of await Promise.all(adds)) assert.ok('ok' in r, JSON.stringify(r));
      }
      const racing = await Promise.all(
        Array.from({ length: 10 }, (_, k) =>
          store.putMember(gardens[fill + k]!, ownerOf(fill + k), u, 'viewer', new Date()),
        ),
      );
      assert.equal(racing.filter((r) => 'ok' in r).length, 5, JSON.stringify(racing));
      assert.ok(racing.every((r) => 'ok' in r || r.refused === 'too_many_gardens'));
      assert.equal((await store.memberships(u)).length, MAX_MEMBERSHIPS_PER_USER);
      // u's own create is refused too: it could not be a member of what it made.
      assert.deepEqual(
        await store.createGarden({ id: gardenId(randomBytes), name: 'Mine', owner: u, at: new Date() }),
        { refused: 'too_many_gardens' },
      );
    });

    it(`a garden has at most ${MAX_MEMBERS_PER_GARDEN} members, also when owners add them at once`, async () => {
      const o = user();
      const co = user();
      const g = await garden(store, o, [[co, 'owner']]);
      const prefix = user('member');
      // Up to 10 short of the limit, a few at a time.
      const fill = MAX_MEMBERS_PER_GARDEN - 2 - 10;
      for (let i = 0; i < fill; i += 25) {
        await Promise.all(
          Array.from({ length: Math.min(25, fill - i) }, (_, j) =>
            store
              .putMember(g, o, `${prefix}-${i + j}`, 'viewer', new Date())
              .then((r) => assert.ok('ok' in r)),
          ),
        );
      }
      // Two owners adding 30 at once: 10 get in.
      const racing = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          store.putMember(g, i % 2 ? o : co, user('late'), 'viewer', new Date()),
        ),
      );
      assert.equal(racing.filter((r) => 'ok' in r).length, 10);
      assert.ok(racing.every((r) => 'ok' in r || r.refused === 'too_many_members'));
      assert.equal((await store.listMembers(g)).length, MAX_MEMBERS_PER_GARDEN);
      // A role change is no new member; after one leaves, one more may come.
      assert.ok('ok' in (await store.putMember(g, o, `${prefix}-0`, 'editor', new Date())));
      assert.ok('ok' in (await store.removeMember(g, `${prefix}-1`, `${prefix}-1`)));
      assert.ok('ok' in (await store.putMember(g, o, user(), 'viewer', new Date())));
      assert.deepEqual(await store.putMember(g, o, user(), 'viewer', new Date()), {
        refused: 'too_many_members',
      });
    });

    it('two owners removing or demoting each other at once always leave an owner', async () => {
      for (let round = 0; round < 15; round++) {
        const a = user('a');
        const b = user('b');
        const g = await garden(store, a, [[b, 'owner']]);
        const kind = round % 3;
        const results =
          kind === 0
            ? await Promise.all([store.removeMember(g, a, b), store.removeMember(g, b, a)])
            : kind === 1
              ? await Promise.all([store.removeMember(g, a, a), store.removeMember(g, b, b)])
              : await Promise.all([
                  store.putMember(g, a, b, 'viewer', new Date()),
                  store.putMember(g, b, a, 'editor', new Date()),
                ]);
        const roles = Object.values(await rolesIn(store, g));
        assert.equal(
          roles.filter((r) => r === 'owner').length,
          1,
          `round ${round}: ${JSON.stringify(results)}`,
        );
        assert.equal(
          results.filter((r) => 'ok' in r).length,
          1,
          `round ${round}: ${JSON.stringify(results)}`,
        );
        // The loser finds itself removed (missing), demoted (forbidden) or the last owner.
        const refusal = results.find((r) => 'refused' in r) as { refused: string };
        assert.equal(refusal.refused, ['missing', 'last_owner', 'forbidden'][kind]);
      }
    });

    it('a create racing the delete of its garden: never a plant left in a deleted garden', async () => {
      for (let round = 0; round < 15; round++) {
        const o = user();
        const e = user();
        const g = await garden(store, o, [[e, 'editor']]);
        const [created, deleted] = await Promise.all([
          store.createPlant(
            { id: round % 2 ? null : clientId(), owner: e, garden: g, name: 'Racer', tag: null },
            undefined,
            {
              at: new Date(),
            },
          ),
          store.deleteGarden(g, o),
        ]);
        if ('ok' in deleted) {
          assert.deepEqual(created, { refused: 'no_garden' });
          assert.deepEqual(await store.listPlants({ gardens: [g], tag: null, afterId: 0, limit: 10 }), []);
        } else {
          assert.deepEqual(deleted, { refused: 'garden_not_empty' });
          assert.ok('ok' in created);
        }
      }
    });
  });
}
