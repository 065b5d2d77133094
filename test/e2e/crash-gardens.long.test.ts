// kill -9 of `bin/plantstore serve` while concurrent clients create gardens, share and unshare
// them and create plants into shared gardens (contract 3.2 and section 5: a 201/204 is sent only
// after the change is durable). After each restart every acknowledged membership change and plant
// is there, no garden is left without an owner, and no plant is visible to a non-member.
//
// CRASH_GARDENS_SEED replays the random choices (the moment of each kill still depends on timing).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { sqlitePath } from '../../src/store/index.js';
import { ENGINES } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';
import { cli, serve } from './process.js';

const USERS = ['crash-g0', 'crash-g1', 'crash-g2', 'crash-g3'];
const WORKERS_PER_USER = 2;
const SEED = Number(process.env.CRASH_GARDENS_SEED ?? Math.floor(Math.random() * 2 ** 31));

type Role = 'viewer' | 'editor' | 'owner';
/** A user's place in a garden: a role, or not a member. */
type State = Role | 'none';
const ROLES: Role[] = ['viewer', 'editor', 'owner'];

/** mulberry32: a small seeded generator, so a failing run's choices can be replayed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Garden {
  id: string;
  /** Per user, the states it may be in: one when the last change was answered; two while one is unanswered. */
  members: Map<string, Set<State>>;
}

const certain = (g: Garden, user: string): State | undefined => {
  const s = g.members.get(user)!;
  return s.size === 1 ? [...s][0] : undefined;
};

// The long tier (npm run test:long): 8 crashes on each engine.
const KILLS = 8;

for (const engine of ENGINES) {
  describe(`kill -9 while gardens are shared (${engine.name})`, { skip: engine.skip }, () => {
    const env = { DATABASE_URL: '' };
    let drop = async () => {};
    before(async () => {
      const db = await engine.database();
      env.DATABASE_URL = db.url;
      drop = db.drop;
    });
    after(() => drop());

    /** Gardens left without an owner, read from the database itself (unacknowledged ones included). */
    async function ownerless(): Promise<string[]> {
      const sql = `SELECT id FROM gardens g WHERE NOT EXISTS
        (SELECT 1 FROM garden_members m WHERE m.garden_id = g.id AND m.role = 'owner')`;
      if (engine.name === 'sqlite') {
        const db = new Database(sqlitePath(env.DATABASE_URL), { readonly: true });
        try {
          return db
            .prepare<[], { id: string }>(sql)
            .all()
            .map((r) => r.id);
        } finally {
          db.close();
        }
      }
      const c = new pg.Client({ connectionString: env.DATABASE_URL });
      await c.connect();
      try {
        return (await c.query<{ id: string }>(sql)).rows.map((r) => r.id);
      } finally {
        await c.end();
      }
    }

    it(`loses no acknowledged membership change or plant across ${KILLS} crashes`, {
      timeout: 5 * 60_000,
    }, async (t) => {
      t.diagnostic(`CRASH_GARDENS_SEED=${SEED}`);
      const rand = random(SEED);
      const pickOf = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)]!;
      const tokens = new Map<string, string>();
      for (const u of USERS) tokens.set(u, (await cli(['token', 'create', '--user', u], env)).stdout.trim());
      const admin = (
        await cli(['token', 'create', '--user', 'crash-admin', '--scopes', 'plants:read,plants:admin'], env)
      ).stdout.trim();
      assert.match(admin, /^pst_/);

      const gardens: Garden[] = [];
      /** Acknowledged plants (no plant is deleted here): id → its garden and name. */
      const plants = new Map<number, { garden: string; name: string }>();
      /** Pairs `${garden} ${user}` with a change (or a read that needs it steady) under way. */
      const busy = new Set<string>();
      let acknowledged = 0;
      const counts = { gardens: 0, added: 0, changed: 0, removed: 0, refused: 0, plants: 0, unanswered: 0 };

      for (let round = 0; round <= KILLS; round++) {
        const server = await serve([], env);
        const call = (token: string, path: string, init: RequestInit = {}) =>
          fetch(`${server.url}${path}`, {
            ...init,
            headers: { authorization: `Bearer ${token}`, ...(init.headers ?? {}) },
          });
        const send = (token: string, method: string, path: string, body?: unknown) =>
          call(token, path, {
            method,
            ...(body === undefined
              ? {}
              : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
          });
        const walk = async (token: string): Promise<{ id: number; garden: string; name: string }[]> => {
          const all: { id: number; garden: string; name: string }[] = [];
          for (let next: string | null = '/plants?limit=1000&include=id,garden'; next !== null; ) {
            const res: Response = await call(token, next);
            assert.equal(res.status, 200, `GET ${next}: ${res.status}`);
            all.push(...((await res.json()) as { id: number; garden: string; name: string }[]));
            next = /^<([^>]+)>; rel="next"$/.exec(res.headers.get('link') ?? '')?.[1] ?? null;
          }
          return all;
        };

        try {
          // ---- what every earlier round acknowledged is there ----
          const after = `after crash ${round} (CRASH_GARDENS_SEED=${SEED})`;
          // Gardens a client made but was never answered for: each user's own list shows them.
          for (const u of USERS) {
            const res = await call(tokens.get(u)!, '/gardens');
            assert.equal(res.status, 200);
            for (const g of (await res.json()) as { id: string; home: boolean }[]) {
              if (!g.home && !gardens.some((x) => x.id === g.id)) {
                gardens.push({
                  id: g.id,
                  members: new Map(
                    USERS.map((x) => [x, new Set<State>(['none', 'owner', 'viewer', 'editor'])]),
                  ),
                });
              }
            }
          }
          for (const g of gardens) {
            const res = await call(admin, `/gardens/${g.id}/members`);
            assert.equal(res.status, 200, `${after}: acknowledged garden ${g.id} is gone (${res.status})`);
            const members = new Map(
              ((await res.json()) as { user: string; role: Role }[]).map((m) => [m.user, m.role]),
            );
            assert.ok(
              [...members.values()].includes('owner'),
              `${after}: garden ${g.id} has no owner: ${JSON.stringify([...members])}`,
            );
            for (const u of USERS) {
              const actual: State = members.get(u) ?? 'none';
              const may = g.members.get(u)!;
              assert.ok(
                may.has(actual),
                `${after}: ${u} is ${actual} in ${g.id}, but the last acknowledged change made it ${[...may].join(' or ')}`,
              );
              g.members.set(u, new Set([actual]));
            }
          }
          assert.deepEqual(await ownerless(), [], `${after}: gardens without an owner in the database`);
          // Every acknowledged plant, in its garden, with its name.
          const everything = await walk(admin);
          const byId = new Map(everything.map((p) => [p.id, p]));
          for (const [id, p] of plants) {
            const found = byId.get(id);
            assert.ok(found, `${after}: acknowledged plant ${id} in ${p.garden} was lost`);
            assert.deepEqual({ garden: found.garden, name: found.name }, p, `${after}: plant ${id}`);
          }
          // Each user sees exactly the plants of its gardens, and its gardens with its roles.
          for (const u of USERS) {
            const token = tokens.get(u)!;
            const mine = new Map(
              gardens.filter((g) => certain(g, u) !== 'none').map((g) => [g.id, certain(g, u)]),
            );
            const res = await call(token, '/gardens');
            const listed = ((await res.json()) as { id: string; home: boolean; role: Role }[]).filter(
              (g) => !g.home,
            );
            assert.deepEqual(
              listed.map((g) => `${g.id}:${g.role}`).sort(),
              [...mine].map(([id, r]) => `${id}:${r}`).sort(),
              `${after}: ${u}'s GET /gardens`,
            );
            const seen = await walk(token);
            for (const p of seen) {
              assert.ok(
                mine.has(p.garden),
                `${after}: ${u} sees plant ${p.id} of ${p.garden}, a garden it is not a member of`,
              );
            }
            assert.deepEqual(
              seen.map((p) => p.id),
              everything.filter((p) => mine.has(p.garden)).map((p) => p.id),
              `${after}: ${u} lists exactly the plants of its gardens`,
            );
            // And one by one: 404 for plants of the gardens it is not in.
            const others = everything.filter((p) => !mine.has(p.garden));
            for (const p of others.slice(-15)) {
              assert.equal(
                (await call(token, `/plants/${p.id}`)).status,
                404,
                `${after}: ${u} reads plant ${p.id} of ${p.garden}, a garden it is not a member of`,
              );
            }
          }
          if (round === KILLS) break;

          // ---- the load: concurrent clients, killed mid-write ----
          let stop = false;
          const worker = async (u: string) => {
            const token = tokens.get(u)!;
            for (let i = 0; !stop; i++) {
              // A turn of the event loop each time round, so a step with nothing to do never spins.
              await new Promise((resolve) => setImmediate(resolve));
              const r = rand();
              const owned = gardens.filter((g) => certain(g, u) === 'owner');
              const writable = gardens.filter((g) => certain(g, u) === 'editor' || certain(g, u) === 'owner');
              try {
                if (r < 0.1 || owned.length === 0) {
                  if (gardens.filter((g) => certain(g, u) !== 'none').length >= 30) continue;
                  const res = await send(token, 'POST', '/gardens', { name: `${u} r${round} ${i}` });
                  assert.equal(res.status, 201, `POST /gardens: ${res.status}`);
                  const { id } = (await res.json()) as { id: string };
                  gardens.push({
                    id,
                    members: new Map(USERS.map((x) => [x, new Set<State>([x === u ? 'owner' : 'none'])])),
                  });
                  acknowledged++;
                  counts.gardens++;
                } else if (r < 0.5) {
                  // A membership change by an owner: add, change a role, remove, or leave.
                  const g = pickOf(owned);
                  const target = pickOf(USERS);
                  const pair = `${g.id} ${target}`;
                  const was = certain(g, target);
                  if (busy.has(pair) || was === undefined) continue;
                  const next: State =
                    was === 'none'
                      ? pickOf(ROLES)
                      : rand() < 0.4
                        ? 'none'
                        : pickOf(ROLES.filter((x) => x !== was));
                  busy.add(pair);
                  g.members.get(target)!.add(next);
                  try {
                    const path = `/gardens/${g.id}/members/${encodeURIComponent(target)}`;
                    const res =
                      next === 'none'
                        ? await send(token, 'DELETE', path)
                        : await send(token, 'PUT', path, { role: next });
                    if (res.status === 200 || res.status === 201 || res.status === 204) {
                      g.members.set(target, new Set([next]));
                      acknowledged++;
                      counts[next === 'none' ? 'removed' : was === 'none' ? 'added' : 'changed']++;
                    } else {
                      // Refused (the last owner; or the actor lost its ownership meanwhile): no change.
                      assert.ok([403, 404, 409].includes(res.status), `${pair} → ${next}: ${res.status}`);
                      g.members.set(target, new Set([was]));
                      counts.refused++;
                    }
                  } finally {
                    busy.delete(pair);
                  }
                } else if (r < 0.9 && writable.length > 0) {
                  const g = pickOf(writable);
                  const name = `${u} r${round} w${i}`;
                  const res = await send(token, 'POST', `/gardens/${g.id}/plants`, { name });
                  if (res.status === 201) {
                    const id = Number(/[0-9]+$/.exec(res.headers.get('location')!)![0]);
                    plants.set(id, { garden: g.id, name });
                    acknowledged++;
                    counts.plants++;
                  } else {
                    // Its role went away meanwhile.
                    assert.ok([403, 404].includes(res.status), `create in ${g.id}: ${res.status}`);
                  }
                } else {
                  // A garden it is certainly not a member of, held steady while it looks: 404.
                  const g = gardens.find((x) => certain(x, u) === 'none' && !busy.has(`${x.id} ${u}`));
                  if (g === undefined) continue;
                  const pair = `${g.id} ${u}`;
                  busy.add(pair);
                  try {
                    const res = await call(token, `/gardens/${g.id}/plants?include=id`);
                    assert.equal(res.status, 404, `${u}, not a member, lists ${g.id}: ${res.status}`);
                  } finally {
                    busy.delete(pair);
                  }
                }
              } catch (err) {
                if (err instanceof assert.AssertionError) throw err;
                counts.unanswered++;
                return; // the server died under us
              }
            }
          };
          const workers = USERS.flatMap((u) => Array.from({ length: WORKERS_PER_USER }, () => worker(u)));
          const failed = Promise.race(workers.map((w) => w.then(() => new Promise<never>(() => {}))));
          // Killed mid-write once this round has had a random number of writes acknowledged.
          const target = acknowledged + 15 + Math.floor(rand() * 60);
          await Promise.race([
            until(
              `round ${round}: acknowledged writes to reach ${target}`,
              () => acknowledged >= target,
              30_000,
            ),
            failed,
          ]);
          const exited = once(server.child, 'exit');
          server.child.kill('SIGKILL');
          stop = true;
          await Promise.all(workers);
          await exited;
        } finally {
          server.child.kill('SIGKILL');
        }
      }
      t.diagnostic(
        `${acknowledged} acknowledged writes across ${KILLS} crashes: ${JSON.stringify(counts)}; ${gardens.length} gardens`,
      );
      assert.ok(
        counts.plants > KILLS * 5 && counts.added + counts.changed + counts.removed > KILLS * 3,
        `too little was acknowledged to prove anything: ${JSON.stringify(counts)}`,
      );
      if (engine.name === 'sqlite') {
        const db = new Database(sqlitePath(env.DATABASE_URL), { readonly: true });
        assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
        db.close();
      }
    });
  });
}
