import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { IdSpaceExhaustedError, StoreUnavailableError } from '../../src/errors.js';
import { MAX_PLANT_ID } from '../../src/schemas/plant.js';
import { openStore } from '../../src/store/index.js';
import type { CreateResult, EndpointRecord, Store, TokenRecord } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { garden, home } from '../helpers/gardens.js';
import { logSettled } from '../helpers/log.js';
import { until } from '../helpers/wait.js';

const owner = () => `owner-${randomUUID()}`;
const idemOpts = (now = new Date()) => ({ now, staleAfterMs: 60_000, retainMs: 86_400_000 });

for (const engine of ENGINES) {
  describe(`store contract: ${engine.name}`, { skip: engine.skip }, () => {
    let store: Store;
    before(async () => {
      store = await engine.open();
    });
    after(async () => {
      await store?.close();
    });

    // A plant of o's, in o's home garden.
    const create = async (o: string, id: number | null = null, tag: string | null = null, name = 'Fern') => {
      const r = await store.createPlant({ id, owner: o, garden: await home(store, o), name, tag });
      assert.ok('ok' in r, 'expected a created plant');
      return r.ok;
    };

    it('migrate is idempotent', async () => {
      assert.deepEqual(await store.migrate(), []);
    });

    it('list marks: a create after the newest id moves top only; one below it, or a delete, moves reorder', async () => {
      const marksOf = store.listMarks!.bind(store);
      // PostgreSQL keeps no marks for everyone's plants (a row every create would update).
      const everyone = engine.name === 'postgres' ? null : marksOf;
      const marks = async (gardens: string[] | null, tag: string | null) => {
        const m = await marksOf(gardens, tag);
        assert.ok(m !== null);
        return m;
      };
      const o = owner();
      const other = owner();
      const mine = [await home(store, o)];
      const theirs = [await home(store, other)];
      const start = await marks(mine, null);
      assert.equal(start.top, 0, 'nothing created here yet');
      const a = await create(o, null, 'green');
      assert.deepEqual(await marks(mine, null), { reorder: start.reorder, top: a.id });
      assert.deepEqual(await marks(mine, 'green'), { reorder: start.reorder, top: a.id });
      assert.deepEqual(await marks(mine, 'red'), { reorder: start.reorder, top: 0 });
      const b = await create(o, null, null);
      assert.deepEqual(await marks(mine, null), { reorder: start.reorder, top: b.id });
      const green = await marks(mine, 'green');
      assert.deepEqual(green, { reorder: start.reorder, top: a.id }, 'untagged: the tag keeps its top');
      await create(other);
      assert.deepEqual(
        await marks(mine, null),
        { reorder: start.reorder, top: b.id },
        'another garden changes nothing',
      );
      const before = await marks(mine, null);
      const otherBefore = await marks(theirs, null);
      const allBefore = await everyone?.(null, null);
      assert.deepEqual(await store.deletePlant(a.id, o), { ok: true });
      const afterDelete = await marks(mine, null);
      assert.notEqual(afterDelete.reorder, before.reorder, 'a delete moves reorder');
      assert.equal(afterDelete.top, b.id);
      assert.equal(
        (await marks(mine, 'green')).reorder,
        afterDelete.reorder,
        'reorder is the garden’s, every tag',
      );
      if (everyone)
        assert.notEqual((await everyone(null, null))?.reorder, allBefore?.reorder, 'and everyone’s');
      else assert.equal(await marksOf(null, null), null, 'PostgreSQL: no marks for everyone’s plants');
      assert.deepEqual(await marks(theirs, null), otherBefore, 'not another garden’s');
      await create(o, a.id, 'green'); // the freed id, below top
      assert.notEqual(
        (await marks(mine, null)).reorder,
        afterDelete.reorder,
        'a create below top moves reorder',
      );
      // Everyone's lists have marks of their own.
      if (everyone) assert.ok(Number((await everyone(null, null))?.top) >= b.id);
    });

    it('changes: a version per state, a compare-and-set, an event with previous, nothing for a no-op', async () => {
      const o = owner();
      const a = await create(o, null, 'green', 'Fern');
      const head = await store.headPosition();
      const at = { at: new Date() };
      const r1 = await store.updatePlant(a.id, o, { name: 'Boston fern' }, [a.version], undefined, at);
      assert.ok('ok' in r1 && r1.ok.changed);
      assert.deepEqual({ ...r1.ok.plant, version: 0 }, { ...a, name: 'Boston fern', version: 0 });
      assert.ok(r1.ok.plant.version > a.version);
      assert.deepEqual(await store.getPlant(a.id), r1.ok.plant);
      // The old version no longer matches: nothing changes.
      assert.deepEqual(await store.updatePlant(a.id, o, { name: 'x' }, [a.version], undefined, at), {
        refused: 'mismatch',
        current: r1.ok.plant,
      });
      // Not a member of its garden, or no such plant: missing, whatever the version.
      assert.deepEqual(await store.updatePlant(a.id, owner(), { name: 'x' }, null), { refused: 'missing' });
      assert.deepEqual(await store.updatePlant(MAX_PLANT_ID, o, { name: 'x' }, null), {
        refused: 'missing',
      });
      // A no-op keeps the version and records nothing.
      const same = await store.updatePlant(
        a.id,
        o,
        { name: 'Boston fern', tag: 'green' },
        null,
        undefined,
        at,
      );
      assert.deepEqual(same, { ok: { plant: r1.ok.plant, changed: false } });
      // Admin (null) and any version (null): a tag removed.
      const r2 = await store.updatePlant(a.id, null, { tag: null }, null, undefined, at);
      assert.ok(
        'ok' in r2 && r2.ok.changed && r2.ok.plant.tag === null && r2.ok.plant.version > r1.ok.plant.version,
      );
      const r3 = await store.updatePlant(
        a.id,
        o,
        { tag: 'blue', name: 'B' },
        [1, r2.ok.plant.version],
        undefined,
        at,
      );
      assert.ok('ok' in r3 && r3.ok.changed);
      const events = await until(
        'three plant.updated events',
        async () => {
          const got = (await store.readEvents({ after: head, gardens: [a.garden], limit: 10 })).events;
          return got.length >= 3 && got;
        },
        10_000,
      );
      assert.deepEqual(
        events.map((e) => [e.type, e.data]),
        [
          [
            'plant.updated',
            { id: a.id, name: 'Boston fern', tag: 'green', garden: a.garden, previous: { name: 'Fern' } },
          ],
          ['plant.updated', { id: a.id, name: 'Boston fern', garden: a.garden, previous: { tag: 'green' } }],
          [
            'plant.updated',
            {
              id: a.id,
              name: 'B',
              tag: 'blue',
              garden: a.garden,
              previous: { name: 'Boston fern', tag: null },
            },
          ],
        ],
      );
    });

    it('a conditional delete: another version is kept and reported; the current one deletes', async () => {
      const o = owner();
      const a = await create(o);
      const r = await store.updatePlant(a.id, o, { name: 'Changed' }, null);
      assert.ok('ok' in r);
      assert.deepEqual(await store.deletePlant(a.id, o, undefined, [a.version]), { refused: 'mismatch' });
      assert.ok(await store.getPlant(a.id));
      assert.deepEqual(
        await store.deletePlant(a.id, owner(), undefined, [a.version]),
        { refused: 'missing' },
        'not visible: missing',
      );
      assert.deepEqual(
        await store.deletePlant(a.id, o, { at: new Date() }, [a.version, r.ok.plant.version]),
        { ok: true },
      );
      assert.deepEqual(await store.deletePlant(a.id, o, undefined, [r.ok.plant.version]), {
        refused: 'missing',
      });
    });

    it('versions are never given twice, across changes and a re-created id', async () => {
      const o = owner();
      const seen = new Set<number>();
      const id = 7_000_000_000 + Math.floor(Math.random() * 1e9);
      for (let round = 0; round < 3; round++) {
        const p = await create(o, id);
        const r = await store.updatePlant(id, o, { tag: `t${round}` }, null);
        assert.ok('ok' in r);
        for (const v of [p.version, r.ok.plant.version]) {
          assert.ok(Number.isSafeInteger(v) && v > 0 && !seen.has(v), `version ${v}`);
          seen.add(v);
        }
        assert.deepEqual(await store.deletePlant(id, o), { ok: true });
      }
    });

    it('a change with an Idempotency-Key records the plant its 200 showed', async () => {
      const o = owner();
      const a = await create(o);
      const ref = { user: o, key: `k-${randomUUID()}` };
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'patch-hash', idemOpts()), { ok: true });
      const r = await store.updatePlant(a.id, o, { tag: 'x' }, null, ref);
      assert.ok('ok' in r);
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'patch-hash', idemOpts()), {
        refused: 'done',
        outcome: {
          status: 200,
          plantId: a.id,
          plant: { name: 'Fern', tag: 'x', version: r.ok.plant.version },
        },
      });
    });

    it('concurrent changes with one version: exactly one applies', async () => {
      const o = owner();
      const a = await create(o);
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) => store.updatePlant(a.id, o, { name: `n${i}` }, [a.version])),
      );
      assert.equal(results.filter((r) => 'ok' in r).length, 1);
      assert.equal(results.filter((r) => 'refused' in r && r.refused === 'mismatch').length, 11);
    });

    it('server-assigned ids increase and are not reused after a delete', async () => {
      const o = owner();
      const a = await create(o);
      const b = await create(o);
      assert.ok(b.id > a.id);
      assert.deepEqual(await store.deletePlant(b.id, o), { ok: true });
      const c = await create(o);
      assert.ok(c.id > b.id, 'a deleted id is never handed out again');
    });

    it('server-assigned ids jump past a client-chosen id', async () => {
      const o = owner();
      const a = await create(o);
      const chosen = await create(o, a.id + 1000);
      assert.equal(chosen.id, a.id + 1000);
      const next = await create(o);
      assert.ok(next.id > chosen.id);
    });

    it("a batch's assigned ids never meet the ids it gives; an id given twice or that exists refuses it whole", async () => {
      const o = owner();
      const g = await home(store, o);
      const plant = (id: number | null, name: string) => ({ id, owner: o, garden: g, name, tag: null });
      const last = (await create(o)).id;
      // The next id the store would assign, given after a row that takes one, and again before one.
      const r = await store.createPlants(
        [plant(null, 'a'), plant(last + 1, 'b'), plant(null, 'c'), plant(last + 3, 'd')],
        undefined,
        { at: new Date() },
      );
      assert.ok('ok' in r, JSON.stringify(r));
      const ids = r.ok.map((p) => p.id);
      assert.equal(ids[1], last + 1);
      assert.equal(ids[3], last + 3);
      assert.equal(new Set(ids).size, 4, `distinct ids: ${ids}`);
      assert.ok(ids[0]! > last + 3 && ids[2]! > ids[0]!, `assigned ids increase past the given ones: ${ids}`);
      for (const [i, p] of r.ok.entries()) assert.equal((await store.getPlant(p.id))?.name, 'abcd'[i]);
      const next = Math.max(...ids) + 1;
      for (const refusedBatch of [
        [plant(null, 'x'), plant(next, 'y'), plant(next, 'z')],
        [plant(next, 'y'), plant(null, 'x'), plant(ids[1]!, 'z')],
      ]) {
        const again = await store.createPlants(refusedBatch, undefined, { at: new Date() });
        assert.deepEqual(again, { refused: 'exists', id: refusedBatch[2]!.id });
      }
      assert.equal(await store.getPlant(next), null, 'nothing of a refused batch is written');
      // No id is left past the largest one possible: refused before the counter moves, so the
      // next server-assigned id is still an ordinary one.
      await assert.rejects(
        store.createPlants([plant(MAX_PLANT_ID, 'max'), plant(null, 'none left')], undefined, {
          at: new Date(),
        }),
        (err: Error) => err.name === 'IdSpaceExhaustedError' || err instanceof IdSpaceExhaustedError,
      );
      assert.equal(await store.getPlant(MAX_PLANT_ID), null);
      assert.ok((await create(o)).id < MAX_PLANT_ID);
    });

    it('a client may re-create a deleted id; an existing id reports exists', async () => {
      const o = owner();
      const p = await create(o, null, 'x', 'Aloe');
      const other = owner();
      assert.deepEqual(
        await store.createPlant({
          id: p.id,
          owner: other,
          garden: await home(store, other),
          name: 'Other',
          tag: null,
        }),
        { refused: 'exists' },
      );
      assert.deepEqual(await store.deletePlant(p.id, o), { ok: true });
      const again = await create(owner(), p.id);
      assert.equal(again.id, p.id);
    });

    it('stores name and tag exactly, including spaces and odd Unicode', async () => {
      const o = owner();
      const name = '  Ficus  lyrata 🌿 \u00e9\u0301 ';
      const p = await create(o, null, ' 彩 ', name);
      assert.deepEqual(await store.getPlant(p.id), {
        id: p.id,
        owner: o,
        garden: await home(store, o),
        name,
        tag: ' 彩 ',
        version: p.version,
      });
      assert.equal(await store.getPlant(MAX_PLANT_ID), null);
    });

    it('lists by id ascending after a cursor, filtered by garden and tag', async () => {
      const o = owner();
      const other = owner();
      const g = await home(store, o);
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) ids.push((await create(o, null, i % 2 ? 'odd' : 'even', `p${i}`)).id);
      const theirs = await create(other, null, 'odd');
      const all = await store.listPlants({ gardens: [g], tag: null, afterId: 0, limit: 100 });
      assert.deepEqual(
        all.map((p) => p.id),
        ids,
      );
      const page = await store.listPlants({ gardens: [g], tag: null, afterId: ids[1]!, limit: 2 });
      assert.deepEqual(
        page.map((p) => p.id),
        [ids[2], ids[3]],
      );
      const odd = await store.listPlants({ gardens: [g], tag: 'odd', afterId: 0, limit: 100 });
      assert.deepEqual(
        odd.map((p) => p.name),
        ['p1', 'p3'],
      );
      assert.deepEqual(all[0], { id: ids[0], garden: g, name: 'p0', tag: 'even' }, 'a page shows no creator');
      const everyone = await store.listPlants({ gardens: null, tag: 'odd', afterId: ids[0]!, limit: 1000 });
      assert.ok(everyone.some((p) => p.id === theirs.id && p.garden === theirs.garden));
      assert.ok(everyone.every((p, i) => i === 0 || p.id > everyone[i - 1]!.id));
      assert.deepEqual(await store.listPlants({ gardens: [], tag: null, afterId: 0, limit: 10 }), []);
    });

    it('deletes only in a garden the actor is a member of, unless the actor is admin (null)', async () => {
      const o = owner();
      const p = await create(o);
      assert.deepEqual(await store.deletePlant(p.id, owner()), { refused: 'missing' });
      assert.ok(await store.getPlant(p.id));
      assert.deepEqual(await store.deletePlant(p.id, null), { ok: true });
      assert.deepEqual(await store.deletePlant(p.id, null), { refused: 'missing' });
      assert.equal(await store.getPlant(p.id), null);
    });

    it('idempotency keys: claim, in flight, mismatch, done, release, stale takeover, expiry', async () => {
      const ref = { user: owner(), key: 'k-1' };
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'h1', idemOpts()), { ok: true });
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'h1', idemOpts()), { refused: 'in_flight' });
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'h2', idemOpts()), { refused: 'mismatch' });
      const g = await home(store, ref.user);
      const r = await store.createPlant(
        { id: null, owner: ref.user, garden: g, name: 'Idem', tag: null },
        ref,
      );
      assert.ok('ok' in r);
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'h1', idemOpts()), {
        refused: 'done',
        outcome: {
          status: 201,
          plantId: r.ok.id,
          plant: { name: 'Idem', tag: null, version: r.ok.version },
        },
      });
      // The same key for another user is another key.
      assert.deepEqual(await store.claimIdempotencyKey({ ...ref, user: owner() }, 'h9', idemOpts()), {
        ok: true,
      });

      const ref2 = { user: ref.user, key: 'k-2' };
      await store.claimIdempotencyKey(ref2, 'h', idemOpts());
      await store.releaseIdempotencyKey(ref2);
      assert.deepEqual(await store.claimIdempotencyKey(ref2, 'other', idemOpts()), { ok: true });
      const later = new Date(Date.now() + 61_000);
      assert.deepEqual(await store.claimIdempotencyKey(ref2, 'other', idemOpts(later)), { ok: true });

      const conflict = await store.createPlant(
        { id: r.ok.id, owner: ref.user, garden: g, name: 'x', tag: null },
        ref2,
      );
      assert.deepEqual(conflict, { refused: 'exists' });
      assert.deepEqual(await store.claimIdempotencyKey(ref2, 'other', idemOpts()), {
        refused: 'done',
        outcome: { status: 409, plantId: null },
      });
      const dayLater = new Date(Date.now() + 86_400_001);
      assert.deepEqual(await store.claimIdempotencyKey(ref, 'new', idemOpts(dayLater)), { ok: true });
      assert.ok((await store.purgeIdempotencyKeys(dayLater)) >= 1);
    });

    it('tokens: insert, find by hash, list by user, revoke once', async () => {
      const user = owner();
      const t: TokenRecord = {
        id: `tok_${randomUUID()}`,
        user,
        name: 'ci',
        scopes: ['plants:read', 'plants:admin'],
        hash: randomUUID().replace(/-/g, ''),
        createdAt: new Date(1_700_000_000_000),
        expiresAt: new Date(1_800_000_000_000),
        revokedAt: null,
        lastUsedAt: null,
      };
      await store.insertToken(t);
      assert.deepEqual(await store.findTokenByHash(t.hash), t);
      assert.deepEqual(await store.findToken(t.id), t);
      assert.equal(await store.findTokenByHash('nope'), null);
      assert.equal(await store.findToken('tok_nope'), null);
      assert.deepEqual(await store.pageTokens({ user, before: null, limit: 10 }), [t]);
      const everyone = await store.pageTokens({ user: null, before: null, limit: 1000 });
      assert.ok(everyone.some((x) => x.id === t.id));
      const at = new Date(1_750_000_000_000);
      assert.deepEqual(await store.revokeToken(t.id, at), { ok: true });
      assert.deepEqual(await store.revokeToken(t.id, new Date()), { refused: 'revoked' });
      assert.deepEqual(await store.revokeToken('tok_missing', new Date()), { refused: 'missing' });
      assert.deepEqual((await store.findTokenByHash(t.hash))?.revokedAt, at);
    });

    it('tokens: pages newest first in the order they were made (not by createdAt), per user or for everyone', async () => {
      const user = owner();
      const other = owner();
      const at = (ms: number) => new Date(1_700_000_000_000 + ms);
      const make = (id: string, who: string, created: Date): TokenRecord => ({
        id: `tok_${id}`,
        user: who,
        name: null,
        scopes: ['plants:read'],
        hash: randomUUID().replace(/-/g, ''),
        createdAt: created,
        expiresAt: null,
        revokedAt: null,
        lastUsedAt: null,
      });
      // Made in this order; their createdAt neither follows it nor tells ties apart.
      const p = randomUUID().replace(/-/g, '');
      for (const [id, who, ms] of [
        ['a', user, 1],
        ['c', user, 3],
        ['b1', user, 2],
        ['b2', user, 2],
        ['bx', other, 2],
      ] as const) {
        await store.insertToken(make(`${p}${id}`, who, at(ms)));
      }
      const seen: string[] = [];
      let before: { id: string } | null = null;
      for (;;) {
        const page: TokenRecord[] = await store.pageTokens({ user, before, limit: 3 });
        seen.push(...page.map((t) => t.id));
        const last = page.at(-1);
        if (page.length < 3 || !last) break;
        before = { id: last.id };
      }
      const ids = (...xs: string[]) => xs.map((x) => `tok_${p}${x}`);
      assert.deepEqual(seen, ids('b2', 'b1', 'c', 'a'));
      const all = await store.pageTokens({ user: null, before: null, limit: 100_000 });
      const ours = all.map((t) => t.id).filter((id) => id.startsWith(`tok_${p}`));
      assert.deepEqual(ours, ids('bx', 'b2', 'b1', 'c', 'a'));
    });

    it('tokens: lastUsedAt is written at most once a minute, whoever writes', async () => {
      const t: TokenRecord = {
        id: `tok_${randomUUID()}`,
        user: owner(),
        name: null,
        scopes: ['plants:read'],
        hash: randomUUID().replace(/-/g, ''),
        createdAt: new Date(1_700_000_000_000),
        expiresAt: null,
        revokedAt: null,
        lastUsedAt: null,
      };
      await store.insertToken(t);
      const minute = new Date(1_700_000_060_000);
      // Two instances racing the same minute: exactly one row write between them.
      const [a, b] = await Promise.all([
        store.touchTokens([t.id], minute),
        store.touchTokens([t.id], minute),
      ]);
      assert.equal(a + b, 1);
      assert.equal(await store.touchTokens([t.id, 'tok_missing'], minute), 0);
      assert.equal(await store.touchTokens([t.id], new Date(1_700_000_000_000)), 0, 'never moves back');
      assert.deepEqual((await store.findToken(t.id))?.lastUsedAt, minute);
      const next = new Date(1_700_000_120_000);
      assert.equal(await store.touchTokens([t.id], next), 1);
      assert.deepEqual((await store.findToken(t.id))?.lastUsedAt, next);
      assert.equal(await store.touchTokens([], next), 0);
    });

    it('ping answers', async () => {
      await store.ping();
    });
  });
}

// Reads that arrive in one turn of the event loop are batched (one read transaction on SQLite,
// one statement per kind of read on PostgreSQL); each must still answer as it would alone.
for (const engine of ENGINES) {
  describe(`store read batching: ${engine.name}`, { skip: engine.skip }, () => {
    let store: Store;
    // Owners, garden ids and tags with characters that need quoting in an array literal, and a tag
    // spelt NULL.
    const owners = [owner(), `${owner()} "quoted", {braced} \\ back`, owner()];
    const gardens: string[] = [];
    let shared = '';
    const tags = ['red', 'NULL', 'a,b "c" {d} \\e', '彩 ', null];
    const ids: number[] = [];
    let deleted = 0;
    // What only PostgreSQL shows: its statements through the pool.
    // Statement counts are PostgreSQL's (SQLite batches in a read transaction, not a statement).
    const pgIt = engine.name === 'postgres' ? it : () => {};

    before(async () => {
      store = await engine.open();
      for (const [i, o] of owners.entries()) {
        gardens.push(
          await home(store, o, i === 1 ? `gdn_"quoted", {braced} \\ back ${randomUUID()}` : undefined),
        );
      }
      // A garden the first owner shares with the third, as an editor.
      shared = await garden(store, owners[0]!, [[owners[2]!, 'editor']]);
      for (let i = 0; i < 60; i++) {
        const o = i % owners.length;
        const r = await store.createPlant({
          id: null,
          owner: owners[o]!,
          garden: i % 4 === 3 && o !== 1 ? shared : gardens[o]!,
          name: `p${i}`,
          tag: tags[i % tags.length]!,
        });
        assert.ok('ok' in r);
        ids.push(r.ok.id);
      }
      deleted = ids[7]!;
      assert.deepEqual(await store.deletePlant(deleted, null), { ok: true });
    });
    after(async () => {
      await store?.close();
    });

    const GETS = 16;
    // Every shape of read, with cursors, limits, missing ids and duplicates: GETS plant reads
    // (getPlant and plantFor), then pages.
    const reads = (): (() => Promise<unknown>)[] => {
      const out: (() => Promise<unknown>)[] = [];
      for (const id of [ids[0]!, ids[1]!, ids[0]!, deleted, MAX_PLANT_ID, ids[59]!, ids[30]!, ids[30]!]) {
        out.push(() => store.getPlant(id));
      }
      for (const [id, user] of [
        [ids[0]!, owners[0]!],
        [ids[0]!, owners[1]!],
        [ids[3]!, owners[2]!],
        [ids[3]!, owners[0]!],
        [ids[1]!, owners[1]!],
        [ids[1]!, null],
        [deleted, null],
        [ids[2]!, 'nobody'],
      ] as const) {
        out.push(() => store.plantFor(id, user));
      }
      const sets = [[gardens[0]!], [gardens[1]!], gardens, [gardens[2]!, shared], [shared, shared], null];
      for (const g of sets) {
        for (const tag of [...tags, 'no-such-tag']) {
          for (const [afterId, limit] of [
            [0, 1000],
            [0, 3],
            [ids[10]!, 4],
            [ids[58]!, 10],
            [ids[59]!, 5],
          ] as const) {
            out.push(() => store.listPlants({ gardens: g, tag, afterId, limit }));
          }
        }
      }
      return out;
    };

    it('reads issued in one turn each answer as they would one at a time', async () => {
      const calls = reads();
      const alone: unknown[] = [];
      for (const call of calls) alone.push(await call());
      // Interleaved kinds, all started before the first settles: one batch of each kind.
      const together = await Promise.all(calls.map((call) => call()));
      assert.deepEqual(together, alone);
      assert.ok(alone.some((r) => Array.isArray(r) && r.length > 3));
      assert.ok(alone.some((r) => Array.isArray(r) && r.length === 0));
      assert.ok(alone.includes(null));
      // plantFor: a member's role, none for a stranger, owner for admin.
      assert.deepEqual(
        alone.slice(8, GETS).map((r) => (r === null ? null : (r as { role: string }).role)),
        ['owner', null, 'editor', 'owner', 'owner', 'owner', null, null],
      );
    });

    it('duplicate ids in a batch get equal but separate records', async () => {
      const [a, b, c] = await Promise.all([
        store.getPlant(ids[2]!),
        store.getPlant(ids[2]!),
        store.plantFor(ids[2]!, owners[2]!),
      ]);
      assert.ok(a && b && c);
      assert.deepEqual(a, b);
      assert.notEqual(a, b);
      assert.deepEqual(c.plant, a);
      assert.notEqual(c.plant, a);
    });

    it('a read queued when a write is acknowledged sees it, batched with reads already waiting', async () => {
      const o = owner();
      const g = await home(store, o);
      const others = reads();
      const seen = await Promise.all([
        ...Array.from({ length: 8 }, async (_, i) => {
          const r = await store.createPlant({
            id: null,
            owner: o,
            garden: g,
            name: `w${i}`,
            tag: i % 2 ? 'odd' : null,
          });
          assert.ok('ok' in r);
          const id = r.ok.id;
          // Both queued in the turn the create was acknowledged in.
          const [got, mine, everyone] = await Promise.all([
            store.getPlant(id),
            store.listPlants({ gardens: [g, shared], tag: r.ok.tag, afterId: 0, limit: 1000 }),
            store.listPlants({ gardens: null, tag: null, afterId: id - 1, limit: 1 }),
          ]);
          assert.deepEqual(got, r.ok);
          assert.ok(mine.some((p) => p.id === id));
          const { version: _version, owner: _owner, ...listed } = r.ok;
          assert.deepEqual(everyone, [listed]);
          return id;
        }),
        ...others.map((call) => call().then(() => 0)),
      ]);
      const mine = await store.listPlants({ gardens: [g], tag: null, afterId: 0, limit: 1000 });
      assert.deepEqual(
        mine.map((p) => p.id),
        seen.filter((id) => id > 0).sort((a, b) => a - b),
      );
    });

    pgIt('N reads of one kind in a turn are one statement', async () => {
      const counter = countQueries(store);
      try {
        await Promise.all(Array.from({ length: 20 }, (_, i) => store.getPlant(ids[i % 5]! + (i % 2))));
        assert.equal(counter.n, 1, '20 getPlant calls');

        counter.n = 0;
        await Promise.all(
          reads()
            .slice(GETS)
            .map((call) => call()),
        );
        assert.equal(counter.n, 1, 'listPlants calls of every shape');

        counter.n = 0;
        await Promise.all(reads().map((call) => call()));
        assert.equal(
          counter.n,
          2,
          'one statement for the plant reads (getPlant and plantFor), one for the lists',
        );

        counter.n = 0;
        const { version: _, ...read } = (await store.getPlant(ids[3]!))!;
        assert.deepEqual(read, { id: ids[3], owner: owners[0], garden: shared, name: 'p3', tag: tags[3] });
        assert.equal(counter.n, 1, 'a read alone is one statement too');

        // An id PostgreSQL refuses fails on its own, not with the reads batched beside it.
        counter.n = 0;
        const [bad, good, other] = await Promise.allSettled([
          store.getPlant(1.5),
          store.getPlant(ids[4]!),
          store.plantFor(ids[5]!, owners[2]!),
        ]);
        assert.equal(bad.status, 'rejected');
        assert.equal(good.status === 'fulfilled' && good.value?.id, ids[4]);
        assert.equal(other.status === 'fulfilled' && other.value?.plant.id, ids[5]);
        assert.equal(counter.n, 2);
      } finally {
        counter.restore();
      }
    });

    pgIt('when a batch fails, each of its reads fails, as unavailable', async () => {
      const doomed = await engine.open();
      try {
        // The pool refuses every query once ended, as when the database cannot be reached.
        await (doomed as unknown as PoolOwner).pool.end();
        const counter = countQueries(doomed);
        const results = await Promise.allSettled([
          ...Array.from({ length: 5 }, (_, i) =>
            i % 2 ? doomed.getPlant(i + 1) : doomed.plantFor(i + 1, 'x'),
          ),
          ...Array.from({ length: 5 }, (_, i) =>
            doomed.listPlants({
              gardens: i % 2 ? ['x', 'y'] : null,
              tag: i % 3 ? 'y' : null,
              afterId: i,
              limit: 10,
            }),
          ),
        ]);
        assert.equal(counter.n, 2);
        for (const r of results) {
          assert.equal(r.status, 'rejected');
          assert.ok(r.reason instanceof StoreUnavailableError, String(r.reason));
        }
      } finally {
        await doomed.close();
      }
    });
  });
}

// Creates with server-assigned ids that arrive in one turn are batched too (one transaction on
// SQLite, one statement on PostgreSQL); each still gets its own id, plant, event and deliveries.
for (const engine of ENGINES) {
  describe(`store create batching: ${engine.name}`, { skip: engine.skip }, () => {
    let store: Store;
    let queuedCalls = 0;
    const o = owner();
    const endpoint: EndpointRecord = {
      id: `we_${randomUUID()}`,
      owner: o,
      admin: false,
      adminTokenId: null,
      adminUntil: null,
      url: 'https://example.com/hook',
      events: ['plant.created'],
      description: null,
      secret: 'whsec_test',
      previousSecret: null,
      previousSecretUntil: null,
      status: 'enabled',
      disabledReason: null,
      createdAt: new Date(1_700_000_000_000),
      lastSuccessAt: null,
      failingSince: null,
    };
    // Statement counts are PostgreSQL's (SQLite batches in a read transaction, not a statement).
    const pgIt = engine.name === 'postgres' ? it : () => {};
    // After the owner's home garden is made: an endpoint gets the events of gardens its owner was a
    // member of when they were written.
    const t0 = Date.now() + 60_000;
    const at = (i: number) => new Date(t0 + i * 1000);
    let g = '';
    const plant = (i: number) => ({
      id: null,
      owner: o,
      garden: g,
      name: `c${i}`,
      tag: i % 3 ? `t${i % 3}` : null,
    });

    before(async () => {
      store = await engine.open();
      store.onEvents(() => queuedCalls++);
      await store.insertEndpoint(endpoint);
      g = await home(store, o);
    });
    after(async () => {
      await store?.close();
    });

    // Started in one turn; each settles on its own.
    const createAll = (n: number, name = (i: number) => plant(i).name) =>
      Promise.allSettled(
        Array.from({ length: n }, (_, i) =>
          store.createPlant({ ...plant(i), name: name(i) }, undefined, { at: at(i) }),
        ),
      );
    const created = (r: PromiseSettledResult<CreateResult>) => {
      assert.equal(r.status, 'fulfilled', r.status === 'rejected' ? String(r.reason) : '');
      assert.ok(r.status === 'fulfilled' && 'ok' in r.value);
      return r.value.ok;
    };

    it('creates issued in one turn each get their own id, plant, event and deliveries', async () => {
      const head = await store.headPosition();
      const calls = queuedCalls;
      const plants = (await createAll(12)).map(created);
      assert.equal(new Set(plants.map((p) => p.id)).size, 12, 'ids are distinct');
      for (const [i, p] of plants.entries()) {
        assert.deepEqual(p, { ...plant(i), id: p.id, version: p.version });
        assert.deepEqual(await store.getPlant(p.id), p);
      }
      assert.ok(queuedCalls > calls, 'the dispatcher is told');
      // PostgreSQL's log shows an event once every transaction that began before it has ended,
      // in any database of the cluster (another test file's open transaction holds it back), so
      // wait for all twelve, bounded.
      const events = await until(
        'all twelve events in the log',
        async () => {
          const got = (await store.readEvents({ after: head, gardens: [g], limit: 100 })).events;
          return got.length >= plants.length && got;
        },
        10_000,
      );
      assert.deepEqual(
        events
          .map((e) => [e.type, e.data, e.createdAt.getTime()])
          .sort((a, b) => Number(a[2]) - Number(b[2])),
        plants.map((p, i) => [
          'plant.created',
          p.tag === null
            ? { id: p.id, name: p.name, garden: g }
            : { id: p.id, name: p.name, tag: p.tag, garden: g },
          at(i).getTime(),
        ]),
      );
      await logSettled(store);
      const { jobs } = await store.claimDeliveries({
        now: new Date(Date.now() + 3_600_000),
        leaseMs: 1000,
        leaseOwner: 'test',
        limit: 100,
        perEndpoint: 100,
        skipEndpoints: [],
      });
      assert.deepEqual(
        jobs.map((j) => j.event.id).sort(),
        events.map((e) => e.id).sort(),
        'one delivery each',
      );
      assert.ok(jobs.every((j) => j.endpoint.id === endpoint.id));
    });

    it('creates refused by their garden in a turn answer missing or forbidden; the rest are written', async () => {
      const viewer = owner();
      const shared = await garden(store, o, [[viewer, 'viewer']]);
      const stranger = owner();
      const cases = [
        { plant: plant(0), want: 'ok' },
        { plant: { ...plant(1), owner: viewer, garden: shared }, want: 'forbidden' },
        { plant: { ...plant(2), owner: stranger, garden: shared }, want: 'no_garden' },
        { plant: { ...plant(3), garden: 'gdn_000000000000000000000000' }, want: 'no_garden' },
        { plant: { ...plant(4), garden: 'gdn_000000000000000000000000', admin: true }, want: 'no_garden' },
        { plant: { ...plant(5), owner: stranger, garden: shared, admin: true }, want: 'ok' },
        { plant: { ...plant(6), owner: viewer, garden: shared }, want: 'forbidden' },
        { plant: { ...plant(7), garden: shared }, want: 'ok' },
      ];
      const counter = engine.name === 'postgres' ? countQueries(store) : null;
      let results: CreateResult[];
      try {
        results = await Promise.all(
          cases.map((c, i) => store.createPlant(c.plant, undefined, { at: at(i) })),
        );
        if (counter) assert.equal(counter.n, 1, 'one statement, refusals included');
      } finally {
        counter?.restore();
      }
      assert.deepEqual(
        results.map((r) => ('ok' in r ? 'ok' : r.refused)),
        cases.map((c) => c.want),
      );
      for (const [i, r] of results.entries()) {
        if (!('ok' in r)) continue;
        const { admin: _, ...p } = cases[i]!.plant as { admin?: boolean };
        assert.deepEqual(r.ok, { ...p, id: r.ok.id, version: r.ok.version });
        assert.deepEqual(await store.getPlant(r.ok.id), r.ok);
      }
      const inShared = await store.listPlants({ gardens: [shared], tag: null, afterId: 0, limit: 100 });
      assert.deepEqual(inShared.map((p) => p.name).sort(), ['c5', 'c7'], 'nothing refused was written');
    });

    pgIt('N creates in a turn are one statement', async () => {
      const counter = countQueries(store);
      try {
        (await createAll(10)).map(created);
        assert.equal(counter.n, 1);
      } finally {
        counter.restore();
      }
    });

    pgIt('a create whose id was taken takes the next one alone; the rest are written', async () => {
      const pool = (store as unknown as PoolOwner).pool as unknown as {
        query(text: string): Promise<{ rows: { next: number }[] }>;
      };
      await store.createPlant(plant(0), undefined, { at: at(0) });
      // Written past the sequence, as by another writer: the batch's second id.
      const { rows } = await pool.query('SELECT last_value + 2 AS next FROM plants_id_seq');
      const taken = rows[0]!.next;
      await pool.query(
        `INSERT INTO plants (id, owner, garden, name, tag) VALUES (${taken}, 'someone', '${g}', 'Taken', NULL)`,
      );
      const counter = countQueries(store);
      try {
        const plants = (await createAll(4)).map(created);
        assert.equal(new Set(plants.map((p) => p.id)).size, 4);
        assert.ok(!plants.some((p) => p.id === taken));
        assert.equal(counter.n, 2, 'the batch, then the one whose id was taken');
      } finally {
        counter.restore();
      }
      const { version: _, ...read } = (await store.getPlant(taken))!;
      assert.deepEqual(read, { id: taken, owner: 'someone', garden: g, name: 'Taken', tag: null });
    });

    pgIt('a create PostgreSQL refuses fails on its own; the others of its batch are written', async () => {
      const counter = countQueries(store);
      let results: PromiseSettledResult<CreateResult>[];
      try {
        results = await createAll(4, (i) => (i === 1 ? 'nul\0name' : `ok${i}`));
        assert.equal(counter.n, 5, 'the batch, refused, then each create alone');
      } finally {
        counter.restore();
      }
      assert.equal(results[1]!.status, 'rejected');
      for (const i of [0, 2, 3]) {
        const p = created(results[i]!);
        assert.deepEqual(await store.getPlant(p.id), p);
      }
    });
  });
}

interface PoolOwner {
  pool: { query: (...args: unknown[]) => unknown; end(): Promise<void> };
}

// Counts the statements a PgStore sends through its pool, by wrapping the pool's own query method.
function countQueries(store: Store): { n: number; restore(): void } {
  const pool = (store as unknown as PoolOwner).pool;
  const query = pool.query;
  const counter = {
    n: 0,
    restore: () => {
      pool.query = query;
    },
  };
  pool.query = function (this: unknown, ...args: unknown[]) {
    counter.n++;
    return query.apply(this, args);
  };
  return counter;
}

// Listeners for events hear of another process's commits (a second store on the same database is
// another process's view of it): PostgreSQL through a NOTIFY after the commit, SQLite through the
// log's head. A listener unsubscribed hears nothing more.
for (const engine of ENGINES) {
  describe(`store onEvents across processes: ${engine.name}`, { skip: engine.skip }, () => {
    let writer: Store;
    let reader: Store;
    let drop = async () => {};
    before(async () => {
      const db = await engine.database();
      drop = db.drop;
      const open = () => openStore({ url: db.url, durability: 'full', poolSize: 3 });
      writer = await open();
      await writer.migrate();
      reader = await open();
    });
    after(async () => {
      await reader?.close();
      await writer?.close();
      await drop();
    });

    it("another process's events wake this one's listeners; an unsubscribed one hears nothing", async () => {
      let heard = 0;
      let gone = 0;
      const unsubscribe = reader.onEvents(() => gone++);
      reader.onEvents(() => heard++);
      unsubscribe();
      const o = owner();
      const g = await home(writer, o);
      // The LISTEN connection may still be opening: write until the listener has heard one.
      await until(
        'the other store hears of an event',
        async () => {
          const r = await writer.createPlant(
            { id: null, owner: o, garden: g, name: 'told', tag: null },
            undefined,
            {
              at: new Date(),
            },
          );
          assert.ok('ok' in r);
          return heard > 0;
        },
        10_000,
      );
      assert.equal(gone, 0);
    });
  });
}
