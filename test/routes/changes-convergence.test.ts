// Contract 13.4's convergence, as a property: random operations (creates, changes, deletes into the
// trash, restores and purges from it, batch creates, CSV and NDJSON imports, shares, role changes,
// removals and leaves, garden deletes) by
// several users through two app instances on one store (two PostgreSQL pools on one database; two
// SQLite stores on one file, each with its writer), against a model of the plants and memberships.
// Each user keeps a copy with the feed, a step at a time between the operations (random limits,
// alternating instances); whenever a user's feed says `more` is false, its copy must be exactly what
// GET /plants?include=id,garden,version lists — and that list what the model says the user sees.
// The seed is printed on failure; PLANTSTORE_SEED=<seed> replays one.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { buildApp } from '../../src/app.js';
import { testConfig } from '../../src/config.js';
import { createToken } from '../../src/identity/tokens.js';
import type { Store } from '../../src/store/store.js';
import type { Client } from '../helpers/app.js';
import { ENGINES, twoInstances } from '../helpers/engines.js';
import { type Copy, emptyCopy, type Held, listed, sorted, step } from '../helpers/feed.js';

const OPS = Number(process.env.PLANTSTORE_CONVERGENCE_OPS ?? 160);
const USERS = 4;

/** mulberry32: a small seeded generator, so that a seed replays a run. */
function random(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { next, int, pick: <T>(xs: readonly T[]): T => xs[int(xs.length)]! };
}

type Role = 'viewer' | 'editor' | 'owner';
interface ModelGarden {
  id: string;
  home: string | null;
  members: Map<string, Role>;
}
interface ModelPlant {
  garden: string;
  name: string;
  tag: string | null;
}

for (const engine of ENGINES) {
  describe(`change feed convergence (${engine.name})`, { skip: engine.skip }, () => {
    it('a syncing copy equals the list whenever the feed says more is false', {
      timeout: 120_000,
    }, async () => {
      const seed = Number(process.env.PLANTSTORE_SEED ?? Math.floor(Math.random() * 2 ** 31));
      const { stores, close } = await twoInstances(engine.name);
      const apps: FastifyInstance[] = [];
      try {
        for (const store of stores) apps.push(await buildApp(testConfig({}), { store }));
        await run(seed, stores[0]!, apps);
      } catch (err) {
        console.error(`change feed convergence (${engine.name}) failed with PLANTSTORE_SEED=${seed}`);
        throw err;
      } finally {
        for (const app of apps) await app.close();
        await close();
      }
    });
  });
}

async function run(seed: number, store: Store, apps: FastifyInstance[]): Promise<void> {
  const r = random(seed);
  // A client whose requests go to either instance, picked at random for each.
  const users: (Client & { copy: Copy })[] = [];
  for (let i = 0; i < USERS; i++) {
    const user = `feed-${seed}-${i}`;
    const { secret } = await createToken(store, {
      user,
      scopes: ['plants:read', 'plants:write'],
      name: null,
      expiresInMs: null,
    });
    const auth = { authorization: `Bearer ${secret}` };
    const request = (opts: InjectOptions) =>
      r.pick(apps).inject({ ...opts, headers: { ...auth, ...(opts.headers ?? {}) } });
    users.push({
      user,
      token: secret,
      tokenId: '',
      auth,
      request,
      create: () => Promise.reject(new Error('unused')),
      copy: emptyCopy(),
    });
  }
  const gardens = new Map<string, ModelGarden>();
  const plants = new Map<number, ModelPlant>();
  // Deleted plants wait in their garden's trash (contract 13.2): restored or purged from there.
  const trash = new Map<number, ModelPlant>();
  const log: string[] = [];
  const ok = (res: { statusCode: number; body: string }, status: number, what: string) =>
    assert.equal(res.statusCode, status, `${what}: ${res.body}\n${log.slice(-15).join('\n')}`);
  const json = { 'content-type': 'application/json' };

  // Every user's home garden, as GET /gardens makes it.
  for (const u of users) {
    const res = await u.request({ method: 'GET', url: '/gardens' });
    ok(res, 200, 'gardens');
    const home = (res.json() as { id: string }[])[0]!.id;
    gardens.set(home, { id: home, home: u.user, members: new Map([[u.user, 'owner']]) });
  }
  const roleOf = (u: string, g: ModelGarden) => g.members.get(u);
  const writable = (u: string) =>
    [...gardens.values()].filter((g) => ['editor', 'owner'].includes(roleOf(u, g) ?? ''));
  const owned = (u: string) => [...gardens.values()].filter((g) => roleOf(u, g) === 'owner');
  const sees = (u: string) => new Map([...plants].filter(([, p]) => gardens.get(p.garden)!.members.has(u)));
  const editable = (u: string) =>
    [...plants].filter(([, p]) => ['editor', 'owner'].includes(roleOf(u, gardens.get(p.garden)!) ?? ''));
  let n = 0;
  const name = () => `P${n++}${r.int(4) === 0 ? ' café' : ''}`;
  const tag = () => (r.int(3) === 0 ? null : r.pick(['a', 'b', 'c']));

  async function check(u: (typeof users)[number]) {
    const list = await listed(u);
    assert.deepEqual(
      sorted(u.copy.plants),
      sorted(list),
      `${u.user}'s copy vs the list\n${log.slice(-30).join('\n')}`,
    );
    const model = new Map<number, Held>();
    for (const [id, p] of sees(u.user))
      model.set(id, {
        garden: p.garden,
        version: list.get(id)?.version ?? -1,
        name: p.name,
        ...(p.tag === null ? {} : { tag: p.tag }),
      });
    assert.deepEqual(sorted(list), sorted(model), `the list vs the model for ${u.user}`);
  }

  for (let i = 0; i < OPS; i++) {
    const u = r.pick(users);
    const k = r.int(100);
    if (k < 18) {
      const g = r.pick(writable(u.user));
      const tg = tag();
      const body = { name: name(), ...(tg === null ? {} : { tag: tg }) };
      const res = await u.request({
        method: 'POST',
        url: `/gardens/${g.id}/plants`,
        headers: json,
        payload: JSON.stringify(body),
      });
      ok(res, 201, 'create');
      const id = Number(String(res.headers.location).split('/').pop());
      plants.set(id, { garden: g.id, name: body.name, tag: tg });
      log.push(`${u.user} create ${id} in ${g.id}`);
    } else if (k < 30) {
      const mine = editable(u.user);
      if (mine.length === 0) continue;
      const [id, p] = r.pick(mine);
      const patch: { name?: string; tag?: string | null } =
        r.int(2) === 0 ? { name: name() } : { tag: tag() };
      const res = await u.request({
        method: 'PATCH',
        url: `/plants/${id}`,
        headers: { 'content-type': 'application/merge-patch+json', 'if-match': '*' },
        payload: JSON.stringify(patch),
      });
      ok(res, 200, 'patch');
      if (patch.name !== undefined) p.name = patch.name;
      else p.tag = patch.tag ?? null;
      log.push(`${u.user} patch ${id}`);
    } else if (k < 40) {
      const mine = editable(u.user);
      if (mine.length === 0) continue;
      const [id] = r.pick(mine);
      ok(await u.request({ method: 'DELETE', url: `/plants/${id}` }), 204, 'delete');
      trash.set(id, plants.get(id)!);
      plants.delete(id);
      log.push(`${u.user} delete ${id}`);
    } else if (k < 44) {
      // Restore or purge a plant of the trash of a garden where the user may write.
      const can = [...trash].filter(([, p]) =>
        ['editor', 'owner'].includes(roleOf(u.user, gardens.get(p.garden)!) ?? ''),
      );
      if (can.length === 0) continue;
      const [id, p] = r.pick(can);
      if (r.int(3) > 0) {
        ok(await u.request({ method: 'POST', url: `/trash/${id}/restore` }), 200, 'restore');
        plants.set(id, p);
        log.push(`${u.user} restore ${id}`);
      } else {
        ok(await u.request({ method: 'DELETE', url: `/trash/${id}` }), 204, 'purge');
        log.push(`${u.user} purge ${id}`);
      }
      trash.delete(id);
    } else if (k < 50) {
      // A batch: JSON, CSV or NDJSON, 1 … 4 plants, in one garden.
      const g = r.pick(writable(u.user));
      const rows = Array.from({ length: 1 + r.int(4) }, () => ({ name: name(), tag: tag() }));
      const kind = r.pick(['json', 'csv', 'ndjson'] as const);
      const payload =
        kind === 'json'
          ? JSON.stringify({ garden: g.id, plants: rows.map((x) => ({ name: x.name, tag: x.tag })) })
          : kind === 'csv'
            ? `name,tag,garden\n${rows.map((x) => `${x.name},${x.tag ?? ''},${g.id}`).join('\n')}\n`
            : `${rows.map((x) => JSON.stringify({ name: x.name, ...(x.tag === null ? {} : { tag: x.tag }), garden: g.id })).join('\n')}\n`;
      const type = { json: 'application/json', csv: 'text/csv', ndjson: 'application/x-ndjson' }[kind];
      const res = await u.request({
        method: 'POST',
        url: '/plants/batch',
        headers: { 'content-type': type },
        payload,
      });
      ok(res, 201, `batch ${kind}`);
      const ids = (res.json() as { ids: number[] }).ids;
      ids.forEach((id, j) => {
        plants.set(id, { garden: g.id, name: rows[j]!.name, tag: rows[j]!.tag });
      });
      log.push(`${u.user} batch ${kind} ${ids} in ${g.id}`);
    } else if (k < 53) {
      const res = await u.request({
        method: 'POST',
        url: '/gardens',
        headers: json,
        payload: JSON.stringify({ name: 'G' }),
      });
      ok(res, 201, 'garden');
      const id = (res.json() as { id: string }).id;
      gardens.set(id, { id, home: null, members: new Map([[u.user, 'owner']]) });
      log.push(`${u.user} garden ${id}`);
    } else if (k < 65) {
      // Share, or change a role (a role change alone changes nothing in the feed).
      const g = r.pick(owned(u.user));
      const other = r.pick(users.filter((x) => x !== u && x.user !== g.home));
      const role = r.pick(['viewer', 'editor', 'owner'] as const);
      const res = await u.request({
        method: 'PUT',
        url: `/gardens/${g.id}/members/${other.user}`,
        headers: json,
        payload: JSON.stringify({ role }),
      });
      assert.ok([200, 201].includes(res.statusCode), `share: ${res.body}`);
      g.members.set(other.user, role);
      log.push(`${u.user} share ${g.id} ${other.user} ${role}`);
    } else if (k < 74) {
      // Removed by an owner, or leaving; never a home garden's user, never the last owner.
      const g = r.pick([...gardens.values()].filter((x) => x.members.has(u.user)));
      const can = [...g.members.keys()].filter(
        (m) => m !== g.home && (m === u.user || roleOf(u.user, g) === 'owner'),
      );
      if (can.length === 0) continue;
      const who = r.pick(can);
      const owners = [...g.members.values()].filter((x) => x === 'owner').length;
      if (g.members.get(who) === 'owner' && owners === 1) continue;
      ok(await u.request({ method: 'DELETE', url: `/gardens/${g.id}/members/${who}` }), 204, 'unshare');
      g.members.delete(who);
      log.push(`${u.user} remove ${who} from ${g.id}`);
    } else if (k < 78) {
      // A garden emptied and deleted.
      const g = owned(u.user).filter((x) => x.home === null);
      if (g.length === 0) continue;
      const gone = r.pick(g);
      for (const [id, p] of [...plants]) {
        if (p.garden !== gone.id) continue;
        ok(await u.request({ method: 'DELETE', url: `/plants/${id}` }), 204, 'empty');
        plants.delete(id);
      }
      // Its trash goes with it.
      ok(await u.request({ method: 'DELETE', url: `/gardens/${gone.id}` }), 204, 'delete garden');
      for (const [id, p] of [...trash]) if (p.garden === gone.id) trash.delete(id);
      gardens.delete(gone.id);
      log.push(`${u.user} delete garden ${gone.id}`);
    } else {
      // A step of some user's sync, with a random limit; whenever it says more is false, check.
      const s = r.pick(users);
      const ans = await step(s, s.copy, { limit: r.pick([1, 2, 3, 5, 100]) });
      log.push(`${s.user} sync ${ans.changes.length} more=${ans.more}`);
      if (!ans.more) {
        await check(s);
        // Sometimes polls again at once, twice, through one instance: deltas of a log that is
        // quiet unless the head had not passed a write yet (on PostgreSQL, when the first finds it
        // quiet, the second asks the small statement first).
        const app = r.pick(apps);
        const pinned = {
          ...s,
          request: (opts: InjectOptions) =>
            app.inject({ ...opts, headers: { ...s.auth, ...(opts.headers ?? {}) } }),
        };
        if (r.int(2) === 0)
          for (let k = 0; k < 2; k++) {
            const again = await step(pinned, s.copy, { limit: r.pick([1, 100]) });
            log.push(`${s.user} poll ${again.changes.length} more=${again.more}`);
            if (!again.more) await check(s);
          }
      }
    }
  }
  // At the end, every user syncs up and holds the list.
  for (const u of users) {
    for (let j = 0; (await step(u, u.copy, { limit: r.pick([1, 7, 1000]) })).more; j++) assert.ok(j < 10_000);
    await check(u);
  }
}
