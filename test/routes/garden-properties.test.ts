// Property tests of gardens (contract 3.2, sections 2 and 8): seeded random sequences of
// operations by four users over a few gardens, run against the real app and checked against a
// small model of the memberships after every step.
//
// GARDEN_PROPERTY_SEED, GARDEN_PROPERTY_RUNS and GARDEN_PROPERTY_SHRINK=1 (look for a smaller
// failing sequence; off by default, as every try runs against the app) replay or widen a run.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { type Client, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { nextLink } from '../helpers/gardens.js';
import { openStream, type SseMessage, type SseReader } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';
import {
  FAKE_GARDEN,
  FAKE_PLANT,
  key,
  type MGarden,
  Model,
  type MPlant,
  type Op,
  ops,
  plantView,
  type Role,
  TAGS,
  USERS,
} from './garden-model.js';

const DEFAULT_SEED = 4;
const DEFAULT_RUNS = 10;
const SEED = Number(process.env.GARDEN_PROPERTY_SEED ?? DEFAULT_SEED);
const RUNS = Number(process.env.GARDEN_PROPERTY_RUNS ?? DEFAULT_RUNS);
const SHRINK = process.env.GARDEN_PROPERTY_SHRINK === '1';
/** How many invisible plants a flood makes: more than a list's walk takes in one statement. */
const FLOOD = 300;

// ---- HTTP helpers ----

const json = { 'content-type': 'application/json' };

function expectStatus(res: LightMyRequestResponse, status: number, code: string | null, what: string): void {
  assert.equal(
    res.statusCode,
    status,
    `${what}: expected ${status} ${code ?? ''}, got ${res.statusCode} ${res.body}`,
  );
  if (code !== null) {
    assert.equal(res.json().code, code, `${what}: ${res.body}`);
  }
  if (status === 403) {
    assert.equal(res.headers['www-authenticate'], undefined, `${what}: a role refusal has no challenge`);
  }
}

interface Item {
  id?: number;
  garden?: string;
  name: string;
  tag?: string;
}

for (const engine of ENGINES) {
  describe(`gardens, property-based (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    let base = '';
    let startEvent = '';
    // Someone else's plants, none of the runs' users may see: a flood of them between a run's first
    // plants and the rest makes a list across gardens walk past many it must skip (SQLite walks at
    // most 256 plants in id order, then reads each garden's index from there).
    let filler: Client;
    const flood = async (n: number, tag: string | undefined) => {
      for (let i = 0; i < n; i += 40) {
        const batch = Array.from({ length: Math.min(40, n - i) }, (_, j) =>
          filler.create(tag === undefined ? { name: `filler ${i + j}` } : { name: `filler ${i + j}`, tag }),
        );
        for (const res of await Promise.all(batch)) assert.equal(res.statusCode, 201);
      }
    };
    const readers = new Set<SseReader>();
    const stream = async (c: Client, headers: Record<string, string> = {}) => {
      const r = await openStream(`${base}/events`, { ...c.auth, ...headers });
      assert.equal(r.status, 200);
      readers.add(r);
      return r;
    };

    before(async () => {
      h = await harness(
        engine,
        {},
        { streams: { heartbeatMs: 40, pollMs: 50, maxBufferedBytes: 1 << 20, stallMs: 5_000 } },
      );
      base = await h.app.listen({ port: 0, host: '127.0.0.1' });
      // A first event in the log: a stream resumed after it replays everything a run wrote.
      filler = await h.user();
      const sentinel = await h.user();
      const s = await stream(sentinel);
      assert.equal((await sentinel.create({ name: 'sentinel' })).statusCode, 201);
      startEvent = (await s.waitFor(1))[0]!.id!;
      s.close();
      readers.delete(s);
    });
    after(async () => {
      for (const r of readers) r.close();
      await h?.close();
    });

    it(`random operations by ${USERS} users keep every view equal to the memberships (seed ${SEED}, ${RUNS} runs)`, {
      timeout: 85_000,
    }, async (t) => {
      t.diagnostic(`fast-check seed ${SEED}, ${RUNS} runs (GARDEN_PROPERTY_SEED / GARDEN_PROPERTY_RUNS)`);
      console.log(`# garden-properties (${engine.name}): fast-check seed ${SEED}, numRuns ${RUNS}`);
      let steps = 0;
      let runs = 0;
      let requests = 0;
      const outcomes = new Map<string, number>();
      const count = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);

      const run = async (sequence: Op[]) => {
        const clients: Client[] = [];
        for (let i = 0; i < USERS; i++) clients.push(await h.user());
        const names = clients.map((c) => c.user);
        const m = new Model(names);
        const req = (c: Client, opts: Parameters<Client['request']>[0]) => {
          requests++;
          return c.request(opts);
        };
        const streams = new Map<string, { reader: SseReader; seen: number; pointer: number }>();
        let step = 0;
        const ctx = () => `step ${step} of ${JSON.stringify(sequence)}`;

        try {
          // Each user's home garden, made by its first look at its gardens.
          for (const c of clients) {
            const res = await req(c, { method: 'GET', url: '/gardens' });
            assert.equal(res.statusCode, 200);
            const list = res.json() as { id: string; home: boolean; role: Role }[];
            assert.equal(list.length, 1);
            assert.equal(list[0]!.home, true);
            assert.equal(list[0]!.role, 'owner');
            m.gardens.push({
              id: list[0]!.id,
              home: c.user,
              members: new Map([[c.user, 'owner']]),
              deleted: false,
            });
          }
          for (const c of clients) streams.set(c.user, { reader: await stream(c), seen: 0, pointer: 0 });
          // A plant in each home garden to begin with, so that changes have something to change.
          for (const [i, c] of clients.entries()) {
            const body = { name: `first-${i}`, tag: TAGS[i % TAGS.length]! };
            const res = await req(c, {
              method: 'POST',
              url: '/plants',
              headers: json,
              payload: JSON.stringify(body),
            });
            expectStatus(res, 201, null, `${c.user}'s first plant`);
            const id = locationId(res);
            const home = m.gardens.find((g) => g.home === c.user)!.id;
            m.plants.push({ id, garden: home, ...body, etag: String(res.headers.etag), deleted: false });
            m.events.push({ type: 'plant.created', id, garden: home, ...body, step: 0 });
          }
          if (runs++ % 2 === 0) await flood(FLOOD, runs % 4 === 1 ? undefined : TAGS[0]);
          m.snapshot();

          // A refusal the model expects: its status and code, counted under `label`.
          const refuse = (
            res: LightMyRequestResponse,
            status: number,
            code: string,
            what: string,
            label: string,
          ) => {
            expectStatus(res, status, code, what);
            count(label);
          };

          // The plant a change or a delete aims at (a fake id when there is none) and who sends it.
          const aimedAt = (op: Extract<Op, { k: 'patch' | 'delete' }>) => {
            const p = m.pickPlant(op.p, op.fit);
            const changers = m.changers(
              m.gardens.find((g) => g.id === p?.garden),
              op.viewer,
            );
            const c = clients[Model.who(op.u, op.fit, changers)]!;
            return { p, c, id: p?.id ?? FAKE_PLANT };
          };

          // ---- one step: the request and what the model says it must answer ----
          const apply = async (op: Op): Promise<void> => {
            switch (op.k) {
              case 'garden': {
                const c = clients[op.u]!;
                const res = await req(c, {
                  method: 'POST',
                  url: '/gardens',
                  headers: json,
                  payload: JSON.stringify({ name: `g${step}` }),
                });
                expectStatus(res, 201, null, `${ctx()}: create garden`);
                const body = res.json();
                assert.equal(res.headers.location, `/gardens/${body.id}`);
                assert.deepEqual(
                  { name: body.name, home: body.home, role: body.role },
                  { name: `g${step}`, home: false, role: 'owner' },
                );
                m.gardens.push({
                  id: body.id,
                  home: null,
                  members: new Map([[c.user, 'owner']]),
                  deleted: false,
                });
                count('garden 201');
                return;
              }
              case 'share': {
                const g = m.pickGarden(op.g, op.fit);
                const c = clients[Model.who(op.a, op.fit, m.memberIndexes(g, ['owner']))]!;
                const gid = g?.id ?? FAKE_GARDEN;
                const target = names[op.t]!;
                const res = await req(c, {
                  method: 'PUT',
                  url: `/gardens/${gid}/members/${encodeURIComponent(target)}`,
                  headers: json,
                  payload: JSON.stringify({ role: op.role }),
                });
                const what = `${ctx()}: ${c.user} shares ${gid} with ${target} as ${op.role}`;
                const mine = g ? m.roleIn(c.user, gid) : undefined;
                if (!g || mine === undefined) return refuse(res, 404, 'garden_not_found', what, 'share 404');
                if (mine !== 'owner') return refuse(res, 403, 'insufficient_role', what, 'share 403');
                const was = g.members.get(target);
                if (was === undefined) {
                  expectStatus(res, 201, null, what);
                  g.members.set(target, op.role);
                  count('share 201');
                } else if (was !== op.role && g.home === target) {
                  return refuse(res, 409, 'home_garden', what, 'share 409');
                } else if (was !== op.role && was === 'owner' && m.owners(g) <= 1) {
                  return refuse(res, 409, 'last_owner', what, 'share 409');
                } else {
                  expectStatus(res, 200, null, what);
                  g.members.set(target, op.role);
                  count('share 200');
                }
                const body = res.json();
                assert.equal(body.user, target, what);
                assert.equal(body.role, op.role, what);
                return;
              }
              case 'unshare':
              case 'leave': {
                // Sensible: a garden with a member besides its home user; an owner removing, or a
                // member leaving, that is not the garden's home user.
                const shared = m.live().filter((x) => [...x.members.keys()].some((u) => u !== x.home));
                const g = m.pickGarden(op.g, op.fit, shared.length > 0 ? shared : undefined);
                const others = m.memberIndexes(g).filter((i) => g?.home !== names[i]);
                const owners = m.memberIndexes(g, ['owner']);
                const c = clients[Model.who(op.a, op.fit, op.k === 'leave' ? others : owners)]!;
                const target = op.k === 'leave' ? c.user : names[Model.who(op.t, op.fit, others)]!;
                const gid = g?.id ?? FAKE_GARDEN;
                const res = await req(c, {
                  method: 'DELETE',
                  url: `/gardens/${gid}/members/${encodeURIComponent(target)}`,
                });
                const what = `${ctx()}: ${c.user} removes ${target === c.user ? 'itself' : target} from ${gid}`;
                const mine = g ? m.roleIn(c.user, gid) : undefined;
                if (!g || mine === undefined)
                  return refuse(res, 404, 'garden_not_found', what, `${op.k} 404`);
                if (mine !== 'owner' && target !== c.user) {
                  return refuse(res, 403, 'insufficient_role', what, `${op.k} 403`);
                }
                const was = g.members.get(target);
                if (was === undefined) return refuse(res, 404, 'member_not_found', what, `${op.k} 404`);
                if (g.home === target) return refuse(res, 409, 'home_garden', what, `${op.k} 409`);
                if (was === 'owner' && m.owners(g) <= 1) {
                  return refuse(res, 409, 'last_owner', what, `${op.k} 409`);
                }
                expectStatus(res, 204, null, what);
                g.members.delete(target);
                count(`${op.k} 204`);
                return;
              }
              case 'dropGarden': {
                const g = m.pickGarden(
                  op.g,
                  op.fit,
                  m.live().filter((x) => x.home === null),
                );
                const c = clients[Model.who(op.a, op.fit, m.memberIndexes(g, ['owner']))]!;
                const gid = g?.id ?? FAKE_GARDEN;
                const res = await req(c, { method: 'DELETE', url: `/gardens/${gid}` });
                const what = `${ctx()}: ${c.user} deletes garden ${gid}`;
                const mine = g ? m.roleIn(c.user, gid) : undefined;
                if (!g || mine === undefined) return refuse(res, 404, 'garden_not_found', what, 'drop 404');
                if (mine !== 'owner') return refuse(res, 403, 'insufficient_role', what, 'drop 403');
                if (g.home !== null) return refuse(res, 409, 'home_garden', what, 'drop 409');
                if (m.plants.some((p) => !p.deleted && p.garden === gid)) {
                  return refuse(res, 409, 'garden_not_empty', what, 'drop 409');
                }
                expectStatus(res, 204, null, what);
                g.deleted = true;
                g.members.clear();
                count('drop 204');
                return;
              }
              case 'plant': {
                const withViewers = m.live().filter((x) => m.memberIndexes(x, ['viewer']).length > 0);
                const g0 =
                  op.g === null
                    ? undefined
                    : m.pickGarden(
                        op.g,
                        op.fit,
                        op.viewer && withViewers.length > 0 ? withViewers : undefined,
                      );
                const c = clients[op.g === null ? op.u : Model.who(op.u, op.fit, m.changers(g0, op.viewer))]!;
                const g = op.g === null ? m.gardens.find((x) => x.home === c.user)! : g0;
                const gid = g?.id ?? FAKE_GARDEN;
                const body = { name: `p${step}`, tag: op.tag === null ? null : TAGS[op.tag]! };
                // A client-chosen id: that of a live plant of the run (anyone's: 409 plant_exists, once
                // the role allows the create), or of a deleted one (made again, with a new ETag).
                const live = m.plants.filter((x) => !x.deleted);
                const dead = m.plants.filter((x) => x.deleted);
                const reuse =
                  op.id === 'live' && live.length > 0
                    ? live[op.p % live.length]!
                    : op.id === 'deleted' && dead.length > 0
                      ? dead[op.p % dead.length]!
                      : undefined;
                const sent = reuse === undefined ? body : { id: reuse.id, ...body };
                const res =
                  op.g === null
                    ? await req(c, {
                        method: 'POST',
                        url: '/plants',
                        headers: json,
                        payload: JSON.stringify(sent),
                      })
                    : await req(c, {
                        method: 'POST',
                        url: `/gardens/${gid}/plants`,
                        headers: json,
                        payload: JSON.stringify(sent),
                      });
                const what = `${ctx()}: ${c.user} creates a plant in ${op.g === null ? 'its home' : gid}`;
                const mine = g ? m.roleIn(c.user, gid) : undefined;
                if (mine === undefined) return refuse(res, 404, 'garden_not_found', what, 'plant 404');
                if (mine === 'viewer') return refuse(res, 403, 'insufficient_role', what, 'plant 403');
                if (reuse !== undefined && !reuse.deleted) {
                  return refuse(
                    res,
                    409,
                    'plant_exists',
                    `${what} with the id of live plant ${reuse.id}`,
                    'plant 409',
                  );
                }
                expectStatus(res, 201, null, what);
                assert.deepEqual(res.json(), body.tag === null ? { name: body.name } : body, what);
                const id = locationId(res);
                if (reuse !== undefined) {
                  assert.equal(id, reuse.id, `${what}: made again under ${reuse.id}`);
                  assert.notEqual(res.headers.etag, reuse.etag, `${what}: a deleted plant's ETag came back`);
                  // The model knows one plant by an id: the new one takes the deleted one's place.
                  m.plants.splice(m.plants.indexOf(reuse), 1);
                  count('plant 201 (a deleted id made again)');
                }
                m.plants.push({
                  id,
                  garden: gid,
                  name: body.name,
                  tag: body.tag,
                  etag: String(res.headers.etag),
                  deleted: false,
                });
                m.events.push({
                  type: 'plant.created',
                  id,
                  garden: gid,
                  name: body.name,
                  tag: body.tag,
                  step,
                });
                count('plant 201');
                return;
              }
              case 'patch': {
                const { p, c, id } = aimedAt(op);
                const patch: { name?: string; tag?: string | null } = {};
                if (op.rename) patch.name = `n${step}`;
                if (op.tag !== undefined) patch.tag = op.tag === null ? null : TAGS[op.tag]!;
                const ifMatch =
                  op.ifMatch === '*' ? '*' : op.ifMatch === 'stale' ? '"9999999999999"' : (p?.etag ?? '*');
                const res = await req(c, {
                  method: 'PATCH',
                  url: `/plants/${id}`,
                  headers: { 'content-type': 'application/merge-patch+json', 'if-match': ifMatch },
                  payload: JSON.stringify(patch),
                });
                const what = `${ctx()}: ${c.user} patches plant ${id}`;
                const mine = p && !p.deleted ? m.roleIn(c.user, p.garden) : undefined;
                if (!p || mine === undefined) return refuse(res, 404, 'plant_not_found', what, 'patch 404');
                if (mine === 'viewer') return refuse(res, 403, 'insufficient_role', what, 'patch 403');
                if (op.ifMatch === 'stale') return refuse(res, 412, 'precondition_failed', what, 'patch 412');
                expectStatus(res, 200, null, what);
                const previous: Record<string, unknown> = {};
                const next = { name: patch.name ?? p.name, tag: patch.tag === undefined ? p.tag : patch.tag };
                if (next.name !== p.name) previous.name = p.name;
                if (next.tag !== p.tag) previous.tag = p.tag;
                const changed = Object.keys(previous).length > 0;
                assert.deepEqual(res.json(), plantView({ ...p, ...next }), what);
                if (changed) {
                  assert.notEqual(res.headers.etag, p.etag, `${what}: a change gets a new ETag`);
                  Object.assign(p, next, { etag: String(res.headers.etag) });
                  m.events.push({
                    type: 'plant.updated',
                    id,
                    garden: p.garden,
                    name: p.name,
                    tag: p.tag,
                    step,
                  });
                } else {
                  assert.equal(
                    res.headers.etag,
                    p.etag,
                    `${what}: a patch that changes nothing keeps the ETag`,
                  );
                }
                count(changed ? 'patch 200' : 'patch 200 (no change)');
                return;
              }
              case 'delete': {
                const { p, c, id } = aimedAt(op);
                const res = await req(c, { method: 'DELETE', url: `/plants/${id}` });
                const what = `${ctx()}: ${c.user} deletes plant ${id}`;
                const mine = p && !p.deleted ? m.roleIn(c.user, p.garden) : undefined;
                if (!p || mine === undefined) return refuse(res, 404, 'plant_not_found', what, 'delete 404');
                if (mine === 'viewer') return refuse(res, 403, 'insufficient_role', what, 'delete 403');
                expectStatus(res, 204, null, what);
                p.deleted = true;
                p.deletedAt = step;
                m.events.push({
                  type: 'plant.deleted',
                  id,
                  garden: p.garden,
                  name: p.name,
                  tag: p.tag,
                  step,
                });
                count('delete 204');
                return;
              }
              case 'get': {
                const p = m.pickPlant(op.p, op.fit);
                const c = clients[op.u]!;
                await checkOne(c, p?.id ?? FAKE_PLANT, p, `${ctx()}: user ${op.u} reads`);
                return;
              }
              case 'list': {
                const c = clients[op.u]!;
                const gid =
                  op.g === null
                    ? undefined
                    : (m.pickGarden(op.g, op.fit, m.gardensOf(c.user))?.id ?? FAKE_GARDEN);
                const tag = op.tag === null ? undefined : TAGS[op.tag]!;
                const q = [`limit=${op.limit}`];
                if (tag !== undefined) q.push(`tag=${tag}`);
                if (op.include) q.push('include=id,garden');
                let url: string;
                if (gid !== undefined && op.nested) url = `/gardens/${gid}/plants?${q.join('&')}`;
                else url = `/plants?${[...q, ...(gid === undefined ? [] : [`garden=${gid}`])].join('&')}`;
                const what = `${ctx()}: ${c.user} lists ${url}`;
                // Each page is checked against the memberships when it is read; a plant visible
                // (and matching) throughout is seen exactly once, in id order.
                const throughout = new Set(m.visible(c.user, { garden: gid, tag }).map((p) => p.id));
                const seen: number[] = [];
                let next: string | null = url;
                for (let page = 0; next !== null; page++) {
                  if (page === 1 && op.between !== null) {
                    await apply(op.between);
                    const now = new Set(m.visible(c.user, { garden: gid, tag }).map((p) => p.id));
                    for (const id of throughout) if (!now.has(id)) throughout.delete(id);
                  }
                  const res = await req(c, { method: 'GET', url: next });
                  const member = gid === undefined || m.roleIn(c.user, gid) !== undefined;
                  if (!member) {
                    expectStatus(res, 404, 'garden_not_found', `${what}, page ${page}`);
                    count(page === 0 ? 'list 404' : 'list 404 after losing the garden mid-walk');
                    return;
                  }
                  expectStatus(res, 200, null, `${what}, page ${page}`);
                  const items = res.json() as Item[];
                  assert.ok(items.length <= op.limit, `${what}: page ${page} is longer than its limit`);
                  const visible = m.visible(c.user, { garden: gid, tag });
                  for (const item of items) {
                    let p: MPlant | undefined;
                    if (op.include) {
                      p = visible.find((x) => x.id === item.id);
                      assert.ok(
                        p,
                        `${what}: page ${page} shows plant ${item.id}, not visible to the caller now`,
                      );
                      assert.equal(item.garden, p.garden, `${what}: plant ${item.id}'s garden`);
                      assert.ok(
                        seen.length === 0 || p.id > seen[seen.length - 1]!,
                        `${what}: not in id order`,
                      );
                    } else {
                      // Without ids, the names (unique per plant here) say which plant it is.
                      p = visible.find((x) => x.name === item.name && x.id > (seen[seen.length - 1] ?? 0));
                      assert.ok(
                        p,
                        `${what}: page ${page} shows ${item.name}, not visible to the caller now (or out of order)`,
                      );
                    }
                    assert.deepEqual(
                      { name: item.name, tag: item.tag },
                      { name: p.name, tag: p.tag ?? undefined },
                      `${what}: plant ${p.id} as listed`,
                    );
                    seen.push(p.id);
                  }
                  next = nextLink(res);
                  if (next !== null)
                    assert.equal(items.length, op.limit, `${what}: a short page with a next link`);
                }
                assert.equal(new Set(seen).size, seen.length, `${what}: a plant listed twice: ${seen}`);
                for (const id of throughout) {
                  assert.ok(
                    seen.includes(id),
                    `${what}: plant ${id}, visible throughout, was not listed (got ${seen})`,
                  );
                }
                count(op.between ? 'list walked across a change' : 'list walked');
                return;
              }
            }
          };

          // A read of one plant: 200 with its ETag when visible to the caller now, 404 otherwise.
          const checkOne = async (c: Client, id: number, p: MPlant | undefined, what: string) => {
            const res = await req(c, { method: 'GET', url: `/plants/${id}` });
            const visible = p !== undefined && !p.deleted && m.roleIn(c.user, p.garden) !== undefined;
            if (!visible) return expectStatus(res, 404, 'plant_not_found', `${what} plant ${id}`);
            expectStatus(res, 200, null, `${what} plant ${id}`);
            assert.deepEqual(res.json(), plantView(p), `${what} plant ${id}`);
            assert.equal(res.headers.etag, p.etag, `${what} plant ${id}: ETag`);
          };

          // Every view of every user against the model, after each step.
          const checkAll = async () => {
            const what = `after ${ctx()}`;
            // Reads only, all at once (nothing changes while they run): every user, every view.
            await Promise.all(clients.map((c) => checkUser(c, what)));
            checkStreams();
          };
          const checkUser = async (c: Client, what: string) => {
            const mine = m.gardensOf(c.user);
            const gardensList = async () => {
              // GET /gardens: exactly its gardens and roles, its home first, then by creation.
              const res = await req(c, { method: 'GET', url: '/gardens' });
              expectStatus(res, 200, null, `${what}: GET /gardens`);
              const list = res.json() as { id: string; home: boolean; role: Role; createdAt: string }[];
              assert.deepEqual(
                list.map((g) => `${g.id}:${g.role}:${g.home}`).sort(),
                mine.map((g) => `${g.id}:${g.members.get(c.user)}:${g.home === c.user}`).sort(),
                `${what}: ${c.user}'s GET /gardens`,
              );
              assert.equal(list[0]?.home, true, `${what}: home garden first`);
              for (let i = 2; i < list.length; i++) {
                assert.ok(list[i - 1]!.createdAt <= list[i]!.createdAt, `${what}: gardens by creation`);
              }
            };
            const plantsList = async () => {
              // GET /plants through every page: exactly the visible plants, in id order, once each.
              const want = m.visible(c.user);
              const got: Item[] = [];
              for (let next: string | null = '/plants?limit=4&include=id,garden'; next !== null; ) {
                const page = await req(c, { method: 'GET', url: next });
                expectStatus(page, 200, null, `${what}: ${next}`);
                got.push(...(page.json() as Item[]));
                next = nextLink(page);
              }
              assert.deepEqual(
                got,
                want.map((p) => ({ id: p.id, garden: p.garden, ...plantView(p) })),
                `${what}: ${c.user}'s GET /plants`,
              );
            };
            // Every garden of the run (and one that never was): 200 and its plants to members, 404 to others.
            const garden = async (g: MGarden) => {
              const r = m.roleIn(c.user, g.id);
              // (Its role is checked in GET /gardens above; GET /gardens/{gid} reads membership alike.)
              const nested = await req(c, {
                method: 'GET',
                url: `/gardens/${g.id}/plants?include=id&limit=1000`,
              });
              if (r === undefined) {
                expectStatus(
                  nested,
                  404,
                  'garden_not_found',
                  `${what}: GET /gardens/${g.id}/plants by a non-member`,
                );
                return;
              }
              expectStatus(nested, 200, null, `${what}: GET /gardens/${g.id}/plants`);
              assert.deepEqual(
                nested.json(),
                m.visible(c.user, { garden: g.id }).map((p) => ({ id: p.id, ...plantView(p) })),
                `${what}: ${c.user}'s GET /gardens/${g.id}/plants`,
              );
              if (r === 'owner') {
                const members = await req(c, { method: 'GET', url: `/gardens/${g.id}/members` });
                expectStatus(members, 200, null, `${what}: members of ${g.id}`);
                assert.deepEqual(
                  (members.json() as { user: string; role: Role }[]).map((x) => `${x.user}:${x.role}`).sort(),
                  [...g.members].map(([u, r]) => `${u}:${r}`).sort(),
                  `${what}: members of ${g.id}`,
                );
              }
            };
            await Promise.all([
              gardensList(),
              plantsList(),
              ...[...m.gardens, { id: FAKE_GARDEN } as MGarden].map(garden),
              // Every plant of the run (one deleted before this step stays deleted: it was checked then).
              ...m.plants
                .filter((p) => !p.deleted || p.deletedAt === step)
                .map((p) => checkOne(c, p.id, p, `${what}: ${c.user} reads`)),
              checkOne(c, FAKE_PLANT, undefined, `${what}: ${c.user} reads`),
            ]);
          };

          // What each long-lived stream has shown so far: events of this run only, in the log's
          // order, each of a garden the reader was a member of at some moment between the event's
          // commit and now (a read that began before a removal may still deliver what it read).
          const checkStreams = () => {
            for (const c of clients) {
              const s = streams.get(c.user)!;
              const data = s.reader.messages.filter(isPlantMessage);
              for (; s.seen < data.length; s.seen++) {
                const e = decode(data[s.seen]!);
                const at = m.events.findIndex((x, i) => i >= s.pointer && key(x) === key(e));
                assert.ok(
                  at >= 0,
                  `after ${ctx()}: ${c.user}'s stream shows ${key(e)}, not an event it may see, or out of order`,
                );
                const ev = m.events[at]!;
                assert.equal(e.garden, ev.garden, `${key(e)}: its garden`);
                assert.ok(
                  m.memberBetween(c.user, ev.garden, ev.step, step),
                  `after ${ctx()}: ${c.user}'s stream shows ${key(e)} of garden ${ev.garden} (committed at step ${ev.step}), ` +
                    `though it was not a member from then to now`,
                );
                s.pointer = at + 1;
              }
            }
          };

          await checkAll();
          for (const op of sequence) {
            step++;
            steps++;
            await apply(op);
            m.snapshot();
            await checkAll();
            // Whose gardens this step changed: a stream it opens now replays exactly the events of
            // the gardens it is a member of now.
            const [was, now] = [m.history[step - 1]!, m.history[step]!];
            const moved = clients.filter(
              (c) => [...was.get(c.user)!].sort().join() !== [...now.get(c.user)!].sort().join(),
            );
            await Promise.all(moved.map((c) => replay(c, false)));
          }

          // The end: a marker in each user's home garden, then every stream is complete.
          step++;
          for (const c of clients) {
            const res = await req(c, {
              method: 'POST',
              url: '/plants',
              headers: json,
              payload: JSON.stringify({ name: `marker-${c.user}` }),
            });
            expectStatus(res, 201, null, 'marker');
            const id = locationId(res);
            const home = m.gardens.find((g) => g.home === c.user)!.id;
            m.plants.push({
              id,
              garden: home,
              name: `marker-${c.user}`,
              tag: null,
              etag: String(res.headers.etag),
              deleted: false,
            });
            m.events.push({
              type: 'plant.created',
              id,
              garden: home,
              name: `marker-${c.user}`,
              tag: null,
              step,
            });
          }
          m.snapshot();
          for (const c of clients) {
            const s = streams.get(c.user)!;
            // Every user's marker in a garden it is a member of (its own at least) has come.
            const markers = m.events
              .filter((e) => e.step === step && m.roleIn(c.user, e.garden) !== undefined)
              .map(key);
            await until(
              `${c.user}'s stream to show the markers ${markers}`,
              () => {
                const shown = new Set(s.reader.messages.filter(isPlantMessage).map((x) => key(decode(x))));
                return markers.every((k) => shown.has(k));
              },
              5_000,
            );
            checkStreams();
            // Every event of a garden it was a member of from the commit to now has arrived.
            const shown = new Set(s.reader.messages.filter(isPlantMessage).map((x) => key(decode(x))));
            for (const ev of m.events) {
              if (m.memberThroughout(c.user, ev.garden, ev.step, step)) {
                assert.ok(
                  shown.has(key(ev)),
                  `${c.user}'s stream lacks ${key(ev)} of ${ev.garden}, a member all along`,
                );
              }
            }
            await replay(c, true);
          }
        } finally {
          for (const s of streams.values()) {
            s.reader.close();
            readers.delete(s.reader);
          }
        }

        // A stream resumed from before the run: exactly the run's events of the user's gardens now.
        async function replay(c: Client, markers: boolean) {
          const want = m.events.filter((e) => m.roleIn(c.user, e.garden) !== undefined).map(key);
          const r = await stream(c, { 'last-event-id': startEvent });
          try {
            // Done when what it had to show has come and a keep-alive followed it: the server writes
            // one read's events in one go, so anything more it read would have come before.
            const waited = await until(
              `${c.user}'s replay of ${want.length} events (markers: ${markers}), then a keep-alive`,
              () =>
                r.messages.some(
                  (x, i) => x.comment === 'keep-alive' && dataBefore(r.messages, i) >= want.length,
                ),
              5_000,
            ).catch((err: Error) => err);
            const got = r.messages.filter(isPlantMessage).map((x) => decode(x));
            for (const e of got) {
              assert.ok(
                m.roleIn(c.user, e.garden) !== undefined,
                `after ${ctx()}: ${c.user}'s new stream shows ${key(e)} of garden ${e.garden}, which it is not a member of`,
              );
            }
            assert.deepEqual(got.map(key), want, `after ${ctx()}: ${c.user}'s new stream`);
            if (waited instanceof Error) throw waited;
          } finally {
            r.close();
            readers.delete(r);
          }
        }
      };

      await fc.assert(
        fc.asyncProperty(ops, async (sequence) => {
          await run(sequence);
        }),
        { seed: SEED, numRuns: RUNS, endOnFailure: !SHRINK, verbose: 1 },
      );
      t.diagnostic(
        `${steps} steps, ${requests} requests; outcomes: ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}`,
      );
      // The runs must have reached the interesting answers, or they proved little. The default seed
      // and runs are known to reach every one; another seed may not, which is only reported.
      const missing = [
        'share 201',
        'share 200',
        'unshare 204',
        'leave 204',
        'drop 204',
        'plant 201',
        'plant 403',
        'plant 409',
        'plant 201 (a deleted id made again)',
        'patch 200',
        'patch 403',
        'delete 204',
        'delete 403',
        'list walked',
        'list walked across a change',
      ].filter((must) => !outcomes.has(must));
      if (SEED === DEFAULT_SEED && RUNS === DEFAULT_RUNS) {
        assert.deepEqual(missing, [], `no step ended in ${missing}: ${JSON.stringify([...outcomes])}`);
      } else if (missing.length > 0) {
        t.diagnostic(`this seed reached no ${missing.join(', ')}`);
      }
    });
  });
}

// The model is of plants and their events: the membership events its shares and removals also
// write (member.*, contract 13.3) are left out of what it compares; who sees those is
// member-events.test.ts's.
function isPlantMessage(m: SseMessage): boolean {
  return m.data !== undefined && m.event?.startsWith('plant.') === true;
}

function decode(m: SseMessage): {
  type: string;
  id: number;
  name: string;
  tag: string | null;
  garden: string;
} {
  const body = JSON.parse(m.data!) as {
    type: string;
    data: { id: number; name: string; tag?: string; garden: string };
  };
  assert.equal(body.type, m.event);
  return {
    type: body.type,
    id: body.data.id,
    name: body.data.name,
    tag: body.data.tag ?? null,
    garden: body.data.garden,
  };
}

function dataBefore(all: SseMessage[], i: number): number {
  let n = 0;
  for (let j = 0; j < i; j++) if (isPlantMessage(all[j]!)) n++;
  return n;
}
