import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ENGINES } from '../helpers/engines.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { openStream, type SseReader } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';
import { type OldVersion, oldVersion } from './old-version.js';
import { cli, type Server, serve } from './process.js';

// Gardens (contract version 3) from a real version-2 store: the store is made by the commit before
// gardens (its own `serve` and `token create`, test/e2e/old-version.ts) with plants of several
// users (server- and client-chosen ids, tags, changes, deletes, an id deleted and re-created by
// another user), events, webhook deliveries still pending (the receivers answer 500 while version 2
// runs) and Idempotency-Keys; then this version's `migrate` and `serve` take it over. Nothing is
// lost, ids and ETags are kept, every plant is in its owner's home garden, and every request of
// version 2 answers as it did (the same requests are sent to both and their answers compared).
// One thing changes on purpose: the admin's endpoint was made by a credential version 2 did not
// record, so the migrations make it owner-only (contract 8: admin reach lasts only while the
// credential that made it is valid): the other users' deliveries pending for it end unsent.

const V2_COMMIT = '89210c1';
const USERS = ['alice', 'bob', 'carol', 'dave'] as const;
type User = (typeof USERS)[number];
const ADMIN = 'keeper';
type Who = User | typeof ADMIN | 'aliceReader';

interface PlantBody {
  name: string;
  tag?: string;
}
interface Plant extends PlantBody {
  id: number;
  owner: User;
  etag: string;
}
interface Reply {
  status: number;
  headers: Headers;
  body: unknown;
}
interface EventJson {
  type: string;
  timestamp: string;
  actor?: string | null;
  requestId?: string | null;
  data: { id: number; name: string; tag?: string; garden?: string; previous?: Record<string, unknown> };
}
interface SeenEvent {
  id: string;
  type: string;
  payload: EventJson;
}
interface Attempt {
  eventId: string;
  status: number | null;
  outcome: string;
  error?: string;
}
interface Garden {
  id: string;
  name: string;
  home: boolean;
  role: string;
  createdAt: string;
}

async function call(
  base: string,
  token: string | null,
  method: string,
  path: string,
  o: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...(token ? { authorization: `Bearer ${token}` } : {}) };
  let body: string | undefined;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
  }
  Object.assign(headers, o.headers);
  const res = await fetch(base + path, { method, headers, body, signal: AbortSignal.timeout(15_000) });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = text;
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

const idOf = (location: string | null): number => {
  const m = /^\/plants\/([0-9]+)$/.exec(location ?? '');
  assert.ok(m, `Location ${location} names a plant`);
  return Number(m[1]);
};

/** What of an answer must be the same before and after the migration (a cursor is opaque). */
function shape(r: Reply): unknown {
  const h = (name: string) => r.headers.get(name) ?? undefined;
  const ok = r.status < 400;
  const err = r.body as { error?: unknown; code?: unknown } | undefined;
  return {
    status: r.status,
    body: ok ? r.body : { error: err?.error, code: err?.code },
    location: h('location'),
    etag: h('etag'),
    replayed: h('idempotent-replayed'),
    link: h('link')?.replace(/cursor=[^&>]*/g, 'cursor=…'),
    challenge: h('www-authenticate'),
  };
}

/** Every page of a list, following `Link: rel="next"` (at most 50 pages). */
async function pages(base: string, token: string, path: string): Promise<unknown[]> {
  const out: unknown[] = [];
  let next: string | null = path;
  while (next !== null) {
    assert.ok(out.length < 50, `${path}: more than 50 pages`);
    const r = await call(base, token, 'GET', next);
    out.push(shape(r));
    if (r.status !== 200) break;
    next = /^<([^>]+)>; rel="next"$/.exec(r.headers.get('link') ?? '')?.[1] ?? null;
  }
  return out;
}

const parseEvent = (m: { id?: string; event?: string; data?: string }): SeenEvent => ({
  id: m.id!,
  type: m.event!,
  payload: JSON.parse(m.data!) as EventJson,
});

const dataMessages = (s: SseReader) => s.messages.filter((m) => m.data !== undefined).map(parseEvent);

for (const engine of ENGINES) {
  describe(`a version-2 store migrated to gardens (${engine.name})`, { skip: engine.skip }, () => {
    const env: Record<string, string> = {
      DATABASE_URL: '',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_TIMEOUT: '2s',
      // Version 2 retries its failed deliveries every 3 s, 50 times: more than it lives even on a
      // loaded machine (a delivery that ran out of retries would be failed, not pending), and a
      // delivery still pending when it stops is due within 3 s of the new version's start.
      WEBHOOK_RETRY_SCHEDULE: Array.from({ length: 50 }, () => '3s').join(','),
      RATE_LIMIT: '0',
      AUTH_FAILURE_LIMIT: '0',
    };
    let drop = async () => {};
    let v2: OldVersion;
    let server: Server | undefined;
    const receivers = {} as Record<'alice' | 'bob' | typeof ADMIN, Receiver>;
    const tokens = {} as Record<Who, { id: string; token: string }>;
    const tok = (who: Who) => tokens[who].token;

    // What version 2 made and answered.
    const plants = new Map<number, Plant>(); // live plants
    const deletedIds = new Map<number, User>(); // deleted and not re-created, by former owner
    const etagsEver = new Map<number, Set<string>>(); // every ETag each id had
    const keyed: {
      who: User;
      key: string;
      method: 'POST' | 'PATCH';
      path: string;
      body: unknown;
      ifMatch?: string;
      first: unknown;
    }[] = [];
    const endpoints = {} as Record<keyof typeof receivers, { id: string; secret: string }>;
    const streams = {} as Record<User | typeof ADMIN, SseReader>;
    const v2Events = {} as Record<User | typeof ADMIN, SeenEvent[]>;
    const v2Deliveries = new Map<string, string>(); // event id → body of its first (failed) delivery
    const v2Answers = new Map<string, unknown>(); // probe → what version 2 answered
    let maxServerId = 0;
    // How far the file got: a later test says plainly that an earlier one failed.
    let made = false;
    let migrated = false;
    const needs = (what: boolean, which: string) => assert.ok(what, `not tried: ${which} failed`);
    // After the migration.
    const homes = {} as Record<User, string>;
    let mark = {} as Record<keyof typeof receivers, number>; // receivers' logs before the new version

    before(async () => {
      v2 = await oldVersion(V2_COMMIT);
      const db = await engine.database();
      env.DATABASE_URL = db.url;
      drop = db.drop;
      for (const r of ['alice', 'bob', ADMIN] as const) {
        receivers[r] = await startReceiver();
        // Every delivery fails while version 2 runs (each answer is used once; refilled below).
        receivers[r].answers.push(...Array.from({ length: 10_000 }, () => ({ status: 500 })));
      }
    });
    after(async () => {
      for (const s of Object.values(streams)) s.close();
      await server?.stop();
      for (const r of Object.values(receivers)) await r.close();
      await drop();
    });

    // The requests whose answers must not change: reads of every plant by everyone, lists (whole,
    // paged, filtered), conditional requests, refusals, and Idempotency-Key replays. None changes
    // anything, in either version. `want` is the status the contract gives (checked on version 2,
    // so the two versions are not merely alike but right).
    interface Probe {
      label: string;
      want: number | null;
      run(base: string): Promise<unknown>;
    }
    function probes(): Probe[] {
      const out: Probe[] = [];
      const ask = (label: string, want: number, who: Who | null, method: string, path: string, o = {}) =>
        out.push({
          label,
          want,
          run: async (base) => shape(await call(base, who && tok(who), method, path, o)),
        });
      const page = (label: string, who: Who, path: string) =>
        out.push({ label, want: null, run: (base) => pages(base, tok(who), path) });
      for (const who of [...USERS, ADMIN] as const) {
        ask(`${who}: list with ids and versions`, 200, who, 'GET', '/plants?limit=1000&include=id,version');
        ask(`${who}: list`, 200, who, 'GET', '/plants');
        ask(`${who}: list tag=indoor with ids`, 200, who, 'GET', '/plants?tag=indoor&include=id');
        ask(`${who}: list tag=herb`, 200, who, 'GET', '/plants?tag=herb&limit=1000');
        page(`${who}: pages of 7`, who, '/plants?limit=7');
        page(
          `${who}: pages of 3 tag=outdoor include=version,id`,
          who,
          '/plants?limit=3&tag=outdoor&include=version,id',
        );
      }
      for (const p of [...plants.values()].sort((a, b) => a.id - b.id)) {
        for (const who of [...USERS, ADMIN] as const) {
          ask(
            `${who}: GET ${p.id}`,
            who === p.owner || who === ADMIN ? 200 : 404,
            who,
            'GET',
            `/plants/${p.id}`,
          );
        }
        ask(`${p.owner}: GET ${p.id} If-None-Match`, 304, p.owner, 'GET', `/plants/${p.id}`, {
          headers: { 'if-none-match': p.etag },
        });
        const other = USERS.find((u) => u !== p.owner)!;
        ask(`${other}: PATCH ${p.id} of ${p.owner}`, 404, other, 'PATCH', `/plants/${p.id}`, {
          body: { name: 'Taken' },
          headers: { 'if-match': '*' },
        });
        ask(`${other}: DELETE ${p.id} of ${p.owner}`, 404, other, 'DELETE', `/plants/${p.id}`);
        ask(`${p.owner}: PATCH ${p.id} without If-Match`, 428, p.owner, 'PATCH', `/plants/${p.id}`, {
          body: { name: 'Unconditional' },
        });
        ask(`${p.owner}: PATCH ${p.id} with a stale If-Match`, 412, p.owner, 'PATCH', `/plants/${p.id}`, {
          body: { name: 'Stale' },
          headers: { 'if-match': '"0"' },
        });
        ask(`${p.owner}: DELETE ${p.id} with a stale If-Match`, 412, p.owner, 'DELETE', `/plants/${p.id}`, {
          headers: { 'if-match': '"0"' },
        });
        ask(
          `aliceReader: GET ${p.id}`,
          p.owner === 'alice' ? 200 : 404,
          'aliceReader',
          'GET',
          `/plants/${p.id}`,
        );
        for (const who of [p.owner, other]) {
          ask(`${who}: POST id ${p.id} again`, 409, who, 'POST', '/plants', {
            body: { id: p.id, name: 'Again' },
          });
        }
      }
      for (const [id, owner] of deletedIds)
        ask(`${owner}: GET deleted ${id}`, 404, owner, 'GET', `/plants/${id}`);
      for (const k of keyed) {
        ask(
          `${k.who}: ${k.method} ${k.key} replayed`,
          k.method === 'POST' ? 201 : 200,
          k.who,
          k.method,
          k.path,
          {
            body: k.body,
            headers: { 'idempotency-key': k.key, ...(k.ifMatch ? { 'if-match': k.ifMatch } : {}) },
          },
        );
        ask(`${k.who}: ${k.method} ${k.key} with another body`, 422, k.who, k.method, k.path, {
          body: { name: 'Something else' },
          headers: { 'idempotency-key': k.key, 'if-match': '*' },
        });
      }
      ask('aliceReader: list', 200, 'aliceReader', 'GET', '/plants?include=id');
      ask('aliceReader: POST', 403, 'aliceReader', 'POST', '/plants', { body: { name: 'Nope' } });
      ask('no token: list', 401, null, 'GET', '/plants');
      out.push({
        label: 'unknown token: list',
        want: 401,
        run: async (base) => shape(await call(base, `pst_${'A'.repeat(43)}`, 'GET', '/plants')),
      });
      for (const who of ['alice', 'bob', ADMIN] as const)
        ask(`${who}: webhooks`, 200, who, 'GET', '/webhooks');
      return out;
    }

    it(`version 2 (${V2_COMMIT}) makes a store with plants, events, pending deliveries and Idempotency-Keys`, {
      timeout: 180_000,
    }, async (t) => {
      for (const [who, user, scopes] of [
        ['alice', 'alice', undefined],
        ['bob', 'bob', undefined],
        ['carol', 'carol', undefined],
        ['dave', 'dave', undefined],
        [ADMIN, ADMIN, 'plants:read,plants:write,plants:admin'],
        ['aliceReader', 'alice', 'plants:read'],
      ] as const) {
        const out = await cli(
          ['token', 'create', '--user', user, '--json', ...(scopes ? ['--scopes', scopes] : [])],
          env,
          v2.bin,
        );
        assert.equal(out.code, 0, out.stderr);
        tokens[who] = JSON.parse(out.stdout) as { id: string; token: string };
      }

      const old = await serve([], env, v2.bin);
      try {
        const base = old.url;
        for (const r of ['alice', 'bob', ADMIN] as const) {
          const res = await call(base, tok(r), 'POST', '/webhooks', {
            body: { url: receivers[r].url, description: `${r}'s receiver` },
          });
          assert.equal(res.status, 201, JSON.stringify(res.body));
          const ep = res.body as { id: string; secret: string };
          endpoints[r] = { id: ep.id, secret: ep.secret };
        }
        // Every user's events, as they commit, with their ids.
        for (const who of [...USERS, ADMIN] as const) {
          streams[who] = await openStream(`${base}/events`, { authorization: `Bearer ${tok(who)}` });
          assert.equal(streams[who].status, 200);
        }
        const events: Record<User, number> = { alice: 0, bob: 0, carol: 0, dave: 0 };
        const remember = (p: Plant) => {
          plants.set(p.id, p);
          deletedIds.delete(p.id);
          if (!etagsEver.has(p.id)) etagsEver.set(p.id, new Set());
          etagsEver.get(p.id)!.add(p.etag);
        };
        const create = async (who: User, body: PlantBody & { id?: number }, key?: string) => {
          const res = await call(base, tok(who), 'POST', '/plants', {
            body,
            headers: key ? { 'idempotency-key': key } : {},
          });
          assert.equal(
            res.status,
            201,
            `${who} creates ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`,
          );
          const id = idOf(res.headers.get('location'));
          if (body.id === undefined) {
            assert.ok(id > maxServerId, 'server ids increase');
            maxServerId = id;
          }
          const p: Plant = { id, owner: who, name: body.name, etag: res.headers.get('etag')! };
          if (body.tag !== undefined) p.tag = body.tag;
          assert.deepEqual(res.body, { name: p.name, ...(p.tag !== undefined ? { tag: p.tag } : {}) });
          remember(p);
          events[who]++;
          if (key) keyed.push({ who, key, method: 'POST', path: '/plants', body, first: shape(res) });
          return id;
        };
        const change = async (who: User, id: number, patch: Record<string, unknown>, key?: string) => {
          const p = plants.get(id)!;
          const headers: Record<string, string> = { 'if-match': p.etag };
          if (key) headers['idempotency-key'] = key;
          const res = await call(base, tok(who), 'PATCH', `/plants/${id}`, { body: patch, headers });
          assert.equal(res.status, 200, JSON.stringify(res.body));
          const next: Plant = { ...p, etag: res.headers.get('etag')! };
          if (typeof patch.name === 'string') next.name = patch.name;
          if (patch.tag === null) delete next.tag;
          else if (typeof patch.tag === 'string') next.tag = patch.tag;
          const changed = next.name !== p.name || next.tag !== p.tag;
          assert.equal(next.etag !== p.etag, changed, 'the ETag changes exactly when the plant does');
          remember(next);
          if (changed) events[who]++;
          if (key)
            keyed.push({
              who,
              key,
              method: 'PATCH',
              path: `/plants/${id}`,
              body: patch,
              ifMatch: p.etag,
              first: shape(res),
            });
        };
        const remove = async (who: User, id: number) => {
          const res = await call(base, tok(who), 'DELETE', `/plants/${id}`, {
            headers: { 'if-match': plants.get(id)!.etag },
          });
          assert.equal(res.status, 204);
          plants.delete(id);
          deletedIds.set(id, who);
          events[who]++;
        };

        const fern = await create('alice', { name: 'Fern', tag: 'indoor' });
        const bobs: number[] = [];
        let mint = 0;
        let rose = 0;
        let ivy = 0;
        for (let i = 0; i < 24; i++) {
          const tag = i % 3 === 0 ? 'indoor' : i % 3 === 1 ? 'outdoor' : undefined;
          bobs.push(await create('bob', { name: `Bob's plant ${i + 1}`, ...(tag ? { tag } : {}) }));
          if (i === 4) await create('alice', { id: 1_000_000, name: 'Cactus', tag: 'outdoor' });
          if (i === 8) await create('alice', { name: 'Basil', tag: 'herb' }, 'same-key');
          if (i === 10) await create('bob', { name: 'Bob basil', tag: 'herb' }, 'same-key');
          if (i === 12) await create('carol', { name: '  Aloe vera  ' });
          if (i === 14) mint = await create('alice', { name: 'Mint', tag: 'herb' });
          if (i === 16) await create('bob', { id: 2_000_000, name: 'Orchid' });
          if (i === 18) rose = await create('alice', { name: 'Rose 🌹' });
          if (i === 20)
            ivy = await create('alice', { id: 3_000_000, name: 'Ivy', tag: 'indoor' }, 'alice-ivy');
        }
        await change('alice', rose, { name: 'Red rose', tag: 'outdoor' });
        await change('alice', ivy, { tag: null }, 'alice-ivy-untag');
        await change('alice', fern, { name: 'Fern' }); // changes nothing: no event, same ETag
        await change('bob', bobs[1]!, { name: 'Bob renamed' });
        await change('bob', bobs[2]!, { tag: 'indoor' });
        await remove('alice', mint);
        for (const i of [0, 5, 10, 15, 20]) await remove('bob', bobs[i]!);
        await remove('bob', 2_000_000);
        await create('carol', { id: 2_000_000, name: 'Orchid', tag: 'indoor' }); // bob's deleted id, re-created
        await create('carol', { name: 'Carol fern', tag: 'outdoor' });
        await remove('dave', await create('dave', { name: 'Dave seedling' })); // dave keeps only events

        // The stream shows each user its own events, and the admin everyone's.
        const all = Object.values(events).reduce((a, b) => a + b, 0);
        for (const who of [...USERS, ADMIN] as const) {
          const want = who === ADMIN ? all : events[who];
          await streams[who].waitFor(want, 30_000);
          v2Events[who] = dataMessages(streams[who]);
          assert.equal(v2Events[who].length, want, `${who}'s events`);
        }
        assert.deepEqual(
          new Set(v2Events[ADMIN].map((e) => e.id)),
          new Set(USERS.flatMap((u) => v2Events[u].map((e) => e.id))),
        );
        // Every delivery has been tried (and failed) at least once, so each is pending with
        // attempts behind it when version 2 stops.
        for (const r of ['alice', 'bob', ADMIN] as const) {
          const want = new Set(v2Events[r].map((e) => e.id));
          await until(
            `${r}'s receiver to have been tried with each of ${want.size} events`,
            () => {
              const got = new Set(receivers[r].received.map((d) => d.headers['webhook-id'] as string));
              return [...want].every((id) => got.has(id));
            },
            60_000,
          );
          for (const d of receivers[r].received) {
            const id = d.headers['webhook-id'] as string;
            if (!v2Deliveries.has(id)) v2Deliveries.set(id, d.body);
          }
        }

        // The store is what this test thinks it is.
        for (const p of plants.values()) {
          const res = await call(base, tok(p.owner), 'GET', `/plants/${p.id}`);
          assert.equal(res.status, 200);
          assert.equal(res.headers.get('etag'), p.etag);
          assert.deepEqual(res.body, { name: p.name, ...(p.tag !== undefined ? { tag: p.tag } : {}) });
        }
        assert.ok(
          plants.size >= 25 && deletedIds.size >= 7,
          `${plants.size} plants, ${deletedIds.size} deleted`,
        );
        // What version 2 answers to every probe; its replays answer as the first time did.
        for (const p of probes()) {
          const answer = await p.run(base);
          v2Answers.set(p.label, answer);
          if (p.want !== null) assert.equal((answer as { status: number }).status, p.want, p.label);
        }
        const reused = [...v2Answers].filter(([label]) => label.endsWith('with another body'));
        assert.ok(reused.length >= 4);
        for (const [label, a] of reused)
          assert.deepEqual(
            (a as { body: unknown }).body,
            { error: 422, code: 'idempotency_key_reused' },
            label,
          );
        for (const k of keyed) {
          const replay = v2Answers.get(`${k.who}: ${k.method} ${k.key} replayed`) as Record<string, unknown>;
          assert.deepEqual({ ...replay, replayed: undefined }, k.first, `${k.key} replays its first answer`);
          assert.equal(replay.replayed, 'true');
        }
        made = true;
        t.diagnostic(
          `version 2 made ${plants.size} plants of ${USERS.length} users (${deletedIds.size} ids deleted), ` +
            `${v2Events[ADMIN].length} events, ${v2Events.alice.length + v2Events.bob.length + v2Events[ADMIN].length} pending deliveries to 3 endpoints, ${keyed.length} Idempotency-Keys`,
        );
      } finally {
        for (const s of Object.values(streams)) s.close();
        assert.equal(await old.stop(), 0, 'version 2 stops cleanly');
      }
    });

    it('migrate applies the gardens migration, and a second migrate applies nothing', async () => {
      needs(made, 'making the version-2 store');
      const first = await cli(['migrate'], env);
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stderr, /^applied \S*gardens/m);
      const second = await cli(['migrate'], env);
      assert.equal(second.code, 0, second.stderr);
      assert.equal(second.stderr, 'schema is up to date\n');
      migrated = true;
    });

    it('the new version serves the store: every version-2 request answers as it did', async (t) => {
      needs(migrated, 'the migration');
      mark = {
        alice: receivers.alice.received.length,
        bob: receivers.bob.received.length,
        [ADMIN]: receivers[ADMIN].received.length,
      };
      // From now on the receivers acknowledge.
      for (const r of Object.values(receivers)) r.answers.length = 0;
      server = await serve([], env);
      const differ: string[] = [];
      for (const p of probes()) {
        const now = await p.run(server.url);
        try {
          assert.deepEqual(now, v2Answers.get(p.label));
        } catch {
          differ.push(
            `${p.label}:\n  version 2: ${JSON.stringify(v2Answers.get(p.label))}\n  now:       ${JSON.stringify(now)}`,
          );
        }
      }
      assert.equal(v2Answers.size, probes().length);
      if (differ.length > 0) {
        assert.fail(`${differ.length} of ${v2Answers.size} answers changed:\n${differ.join('\n')}`);
      }
      t.diagnostic(`${v2Answers.size} answers of version 2 given alike`);
    });

    it("every plant is in its owner's home garden, the only garden each user has", async () => {
      needs(server !== undefined, 'starting the new version');
      const base = server!.url;
      for (const user of USERS) {
        const res = await call(base, tok(user), 'GET', '/gardens');
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const gardens = res.body as Garden[];
        assert.equal(gardens.length, 1, `${user}'s gardens: ${JSON.stringify(gardens)}`);
        const home = gardens[0]!;
        assert.match(home.id, /^gdn_/);
        assert.equal(home.home, true);
        assert.equal(home.role, 'owner');
        assert.ok(typeof home.name === 'string' && home.name.length > 0);
        assert.ok(!Number.isNaN(Date.parse(home.createdAt)));
        homes[user] = home.id;
        const one = await call(base, tok(user), 'GET', `/gardens/${home.id}`);
        assert.equal(one.status, 200);
        assert.deepEqual(one.body, home);
        const members = await call(base, tok(user), 'GET', `/gardens/${home.id}/members`);
        assert.equal(members.status, 200);
        assert.deepEqual(
          (members.body as { user: string; role: string }[]).map((m) => ({ user: m.user, role: m.role })),
          [{ user, role: 'owner' }],
        );
      }
      assert.equal(new Set(Object.values(homes)).size, USERS.length, 'each user has a garden of its own');

      const own = (user: User) =>
        [...plants.values()]
          .filter((p) => p.owner === user)
          .sort((a, b) => a.id - b.id)
          .map((p) => ({
            id: p.id,
            garden: homes[user],
            name: p.name,
            ...(p.tag !== undefined ? { tag: p.tag } : {}),
          }));
      const strip = (list: unknown) =>
        (list as { version?: unknown }[]).map(({ version, ...rest }) => {
          assert.ok(Number.isSafeInteger(version) && (version as number) > 0);
          return rest;
        });
      for (const user of USERS) {
        const listed = await call(base, tok(user), 'GET', '/plants?limit=1000&include=id,version,garden');
        assert.equal(listed.status, 200);
        assert.deepEqual(strip(listed.body), own(user), `${user}'s list`);
        // The versions are the ones version 2 listed.
        const v2List = (
          v2Answers.get(`${user}: list with ids and versions`) as { body: { id: number; version: number }[] }
        ).body;
        assert.deepEqual(
          (listed.body as { id: number; version: number }[]).map((p) => [p.id, p.version]),
          v2List.map((p) => [p.id, p.version]),
        );
        const inGarden = await call(
          base,
          tok(user),
          'GET',
          `/gardens/${homes[user]}/plants?limit=1000&include=garden,id,version`,
        );
        assert.equal(inGarden.status, 200);
        assert.deepEqual(inGarden.body, listed.body, `${user}'s home garden lists the same plants`);
        const filtered = await call(
          base,
          tok(user),
          'GET',
          `/plants?limit=1000&include=id,version,garden&garden=${homes[user]}`,
        );
        assert.equal(filtered.status, 200);
        assert.deepEqual(filtered.body, listed.body);
        // Nobody else's garden is there for them.
        for (const other of USERS.filter((u) => u !== user)) {
          for (const path of [
            `/gardens/${homes[other]}`,
            `/gardens/${homes[other]}/plants`,
            `/gardens/${homes[other]}/members`,
            `/plants?garden=${homes[other]}`,
          ]) {
            const res = await call(base, tok(user), 'GET', path);
            assert.equal(res.status, 404, `${user} GET ${path}`);
          }
        }
      }
      // The admin sees every plant, each in its owner's home garden.
      const everything = await call(base, tok(ADMIN), 'GET', '/plants?limit=1000&include=id,garden');
      assert.equal(everything.status, 200);
      assert.deepEqual(
        everything.body,
        [...plants.values()]
          .sort((a, b) => a.id - b.id)
          .map((p) => ({
            id: p.id,
            garden: homes[p.owner],
            name: p.name,
            ...(p.tag !== undefined ? { tag: p.tag } : {}),
          })),
      );
    });

    /** An event version 2 wrote, as the new version shows it: the same, and in the owner's home garden. */
    // Version 3 put each event in its owner's home garden; version 5 says who did it: nobody
    // recorded it before (null).
    const asMigrated = (e: EventJson, owner: User): EventJson => ({
      ...e,
      actor: null,
      requestId: null,
      data: { ...e.data, garden: homes[owner] },
    });
    const ownerOf = new Map<string, User>(); // event id → its plant's owner
    const v2OwnerOf = () => {
      for (const u of USERS) for (const e of v2Events[u]) ownerOf.set(e.id, u);
    };

    it('the pending deliveries of version 2 are delivered, with their event ids, once the receivers answer', async (t) => {
      needs(server !== undefined, 'starting the new version');
      needs(Object.keys(homes).length === USERS.length, 'reading the home gardens');
      v2OwnerOf();
      // The admin's endpoint is owner-only now, and its owner has no plants: every version-2
      // delivery pending for it ends unsent, logged with the reason, and none reaches its receiver.
      await until(
        `every version-2 delivery to ${ADMIN}'s endpoint ended unsent`,
        async () => {
          const ended = new Set(
            (
              await pagesOf<Attempt>(
                server!.url,
                tok(ADMIN),
                `/webhooks/${endpoints[ADMIN].id}/deliveries?limit=1000`,
              )
            )
              .flat()
              .filter(
                (a) => a.outcome === 'failed' && a.status === null && (a.error ?? '').startsWith('not sent:'),
              )
              .map((a) => a.eventId),
          );
          return v2Events[ADMIN].every((e) => ended.has(e.id));
        },
        60_000,
      );
      assert.equal(receivers[ADMIN].received.length, mark[ADMIN], `nothing more reached ${ADMIN}'s receiver`);
      for (const r of ['alice', 'bob'] as const) {
        const want = v2Events[r];
        const since = () => receivers[r].received.slice(mark[r]);
        await until(
          `${r}'s receiver to get each of ${want.length} version-2 events again`,
          () => {
            const got = new Set(since().map((d) => d.headers['webhook-id']));
            return want.every((e) => got.has(e.id));
          },
          60_000,
        );
        const wh = new Webhook(endpoints[r].secret);
        for (const d of since()) {
          const id = d.headers['webhook-id'] as string;
          const e = v2Events[r].find((x) => x.id === id);
          assert.ok(e, `${r}'s receiver got only its own events (${id})`);
          const sent = wh.verify(d.body, d.headers as Record<string, string>) as EventJson;
          const first = JSON.parse(v2Deliveries.get(id)!) as EventJson;
          assert.deepEqual(first, e.payload, 'version 2 sent what its stream showed');
          assert.deepEqual(
            sent,
            asMigrated(first, ownerOf.get(id)!),
            `event ${id} as delivered after the migration`,
          );
        }
        // The endpoint is as it was, and its log has version 2's failed attempts and the new ones.
        const ep = await call(server!.url, tok(r), 'GET', `/webhooks/${endpoints[r].id}`);
        assert.equal(ep.status, 200);
        assert.equal((ep.body as { status: string; secret: string }).status, 'enabled');
        assert.equal((ep.body as { status: string; secret: string }).secret, endpoints[r].secret);
        const log = async () =>
          (
            await pagesOf<Attempt>(server!.url, tok(r), `/webhooks/${endpoints[r].id}/deliveries?limit=1000`)
          ).flat();
        const logged = await log();
        for (const e of want) {
          assert.ok(
            logged.some((a) => a.eventId === e.id && a.status === 500 && a.outcome === 'retrying'),
            `${e.id}: the failed attempt of version 2 is in ${r}'s log`,
          );
        }
        // An acknowledgement is logged once the receiver has answered: moments after it got it.
        await until(`every version-2 event's acknowledged attempt in ${r}'s log`, async () => {
          const ok = new Set(
            (await log()).filter((a) => a.outcome === 'succeeded' && a.status === 200).map((a) => a.eventId),
          );
          return want.every((e) => ok.has(e.id));
        });
      }
      t.diagnostic(
        `${v2Events.alice.length + v2Events.bob.length} pending deliveries of version 2 delivered, ${v2Events[ADMIN].length} to the admin's endpoint ended unsent`,
      );
    });

    it('the live stream resumes from a version-2 event id; new events are in the home garden, on the stream and webhooks', async () => {
      needs(server !== undefined, 'starting the new version');
      needs(Object.keys(homes).length === USERS.length, 'reading the home gardens');
      const base = server!.url;
      const resumed = {} as Record<User | typeof ADMIN, SseReader>;
      const from = {} as Record<User | typeof ADMIN, number>; // index of the Last-Event-ID in v2Events
      for (const who of [...USERS, ADMIN] as const) {
        from[who] = who === 'alice' ? 1 : who === ADMIN ? 5 : v2Events[who].length - 1;
        resumed[who] = await openStream(`${base}/events`, {
          authorization: `Bearer ${tok(who)}`,
          'last-event-id': v2Events[who][from[who]]!.id,
        });
        assert.equal(resumed[who].status, 200);
        streams[who] = resumed[who];
      }
      // Each catches up on what followed that event in version 2.
      for (const who of [...USERS, ADMIN] as const) {
        const rest = v2Events[who].slice(from[who] + 1);
        const got = (await resumed[who].waitFor(rest.length, 30_000)).map(parseEvent);
        assert.deepEqual(
          got.map((e) => e.id),
          rest.map((e) => e.id),
          `${who} resumes right after its version-2 event`,
        );
        for (const [i, e] of got.entries()) {
          assert.equal(e.type, rest[i]!.type);
          assert.deepEqual(e.payload, asMigrated(rest[i]!.payload, ownerOf.get(e.id)!));
        }
      }
      const counts = Object.fromEntries(
        ([...USERS, ADMIN] as const).map((w) => [w, dataMessages(resumed[w]).length]),
      ) as Record<User | typeof ADMIN, number>;

      // New writes on migrated plants, with version 2's ETags, and new plants.
      const fern = [...plants.values()].find((p) => p.owner === 'alice' && p.name === 'Fern')!;
      const mint = [...deletedIds].find(([, u]) => u === 'alice')![0];
      const bobs = [...plants.values()].filter((p) => p.owner === 'bob').sort((a, b) => a.id - b.id);
      const moss = await call(base, tok('alice'), 'POST', '/plants', {
        body: { name: 'Moss', tag: 'indoor' },
      });
      assert.equal(moss.status, 201, JSON.stringify(moss.body));
      const mossId = idOf(moss.headers.get('location'));
      assert.ok(mossId > maxServerId, `a new server id (${mossId}) follows version 2's (${maxServerId})`);
      const changed = await call(base, tok('alice'), 'PATCH', `/plants/${fern.id}`, {
        body: { tag: 'shade' },
        headers: { 'if-match': fern.etag },
      });
      assert.equal(changed.status, 200, JSON.stringify(changed.body));
      assert.ok(!etagsEver.get(fern.id)!.has(changed.headers.get('etag')!));
      const again = await call(base, tok('alice'), 'POST', '/plants', {
        body: { id: mint, name: 'Mint again' },
      });
      assert.equal(again.status, 201, JSON.stringify(again.body));
      assert.ok(
        !etagsEver.get(mint)!.has(again.headers.get('etag')!),
        'a re-created id never repeats an ETag',
      );
      const gone = await call(base, tok('bob'), 'DELETE', `/plants/${bobs[0]!.id}`, {
        headers: { 'if-match': bobs[0]!.etag },
      });
      assert.equal(gone.status, 204);
      // A replay of a version-2 create creates nothing: the next event is the sentinel's.
      const basil = keyed.find((k) => k.who === 'alice' && k.key === 'same-key')!;
      const replay = await call(base, tok('alice'), 'POST', '/plants', {
        body: basil.body,
        headers: { 'idempotency-key': 'same-key' },
      });
      assert.deepEqual({ ...(shape(replay) as object), replayed: undefined }, basil.first);
      const sentinel = await call(base, tok('alice'), 'POST', '/plants', { body: { name: 'Sentinel' } });
      assert.equal(sentinel.status, 201);
      const sentinelId = idOf(sentinel.headers.get('location'));

      const want: Record<User, [string, number, Partial<EventJson['data']>][]> = {
        alice: [
          ['plant.created', mossId, { name: 'Moss', tag: 'indoor' }],
          ['plant.updated', fern.id, { name: 'Fern', tag: 'shade', previous: { tag: 'indoor' } }],
          ['plant.created', mint, { name: 'Mint again' }],
          ['plant.created', sentinelId, { name: 'Sentinel' }],
        ],
        bob: [
          [
            'plant.deleted',
            bobs[0]!.id,
            { name: bobs[0]!.name, ...(bobs[0]!.tag ? { tag: bobs[0]!.tag } : {}) },
          ],
        ],
        carol: [],
        dave: [],
      };
      const expect = (user: User) =>
        want[user].map(([type, id, data]) => ({ type, data: { id, ...data, garden: homes[user] } }));
      const newOnStream = async (who: User | typeof ADMIN, n: number) =>
        (await resumed[who].waitFor(counts[who] + n, 30_000))
          .slice(counts[who])
          .map(parseEvent)
          .map((e) => ({ type: e.payload.type, data: e.payload.data, id: e.id }));
      const aliceNew = await newOnStream('alice', 4);
      assert.deepEqual(
        aliceNew.map(({ id, ...e }) => e),
        expect('alice'),
      );
      const bobNew = await newOnStream('bob', 1);
      assert.deepEqual(
        bobNew.map(({ id, ...e }) => e),
        expect('bob'),
      );
      // The admin's stream has them all, in commit order (bob's delete came before the sentinel).
      const adminNew = await newOnStream(ADMIN, 5);
      assert.deepEqual(
        adminNew.map(({ id, ...e }) => e),
        [...expect('alice').slice(0, 3), ...expect('bob'), ...expect('alice').slice(3)],
      );
      // Nothing of anyone else's reached alice's or bob's stream: the sentinel came after bob's delete.
      assert.equal(dataMessages(resumed.alice).length, counts.alice + 4);
      for (const who of ['carol', 'dave'] as const)
        assert.equal(dataMessages(resumed[who]).length, counts[who]);

      // And the webhooks: alice's endpoint gets hers, bob's his, each in the owner's home garden.
      for (const [r, news] of [
        ['alice', aliceNew],
        ['bob', bobNew],
      ] as const) {
        await until(
          `${r}'s receiver to get ${news.length} new events`,
          () => {
            const got = new Set(receivers[r].received.slice(mark[r]).map((d) => d.headers['webhook-id']));
            return news.every((e) => got.has(e.id));
          },
          30_000,
        );
        const wh = new Webhook(endpoints[r].secret);
        for (const e of news) {
          const d = receivers[r].received.slice(mark[r]).find((x) => x.headers['webhook-id'] === e.id)!;
          const sent = wh.verify(d.body, d.headers as Record<string, string>) as EventJson;
          assert.deepEqual({ type: sent.type, data: sent.data }, { type: e.type, data: e.data });
        }
      }
      for (const d of receivers.bob.received.slice(mark.bob)) {
        const body = JSON.parse(d.body) as EventJson;
        assert.equal(body.data.garden, homes.bob, "bob's endpoint got only bob's events");
      }
      for (const d of receivers.alice.received.slice(mark.alice)) {
        const body = JSON.parse(d.body) as EventJson;
        assert.equal(body.data.garden, homes.alice, "alice's endpoint got only alice's events");
      }
      // The admin's endpoint, owner-only since the migration, gets its owner's own event, and
      // nothing of the others' written before it.
      const own = await call(base, tok(ADMIN), 'POST', '/plants', { body: { name: 'Keeper sentinel' } });
      assert.equal(own.status, 201, JSON.stringify(own.body));
      await until(`${ADMIN}'s receiver to get its owner's event`, () =>
        receivers[ADMIN].received.slice(mark[ADMIN]).some((d) => d.body.includes('Keeper sentinel')),
      );
      assert.deepEqual(
        receivers[ADMIN].received.slice(mark[ADMIN]).map((d) => (JSON.parse(d.body) as EventJson).data.name),
        ['Keeper sentinel'],
      );
    });

    it('version-2 tokens are listed and still revocable', async () => {
      needs(server !== undefined, 'starting the new version');
      const listed = await cli(['token', 'list', '--json'], env);
      assert.equal(listed.code, 0, listed.stderr);
      const list = JSON.parse(listed.stdout) as { id: string; user: string; status: string }[];
      for (const who of Object.keys(tokens) as Who[]) {
        const t = list.find((x) => x.id === tokens[who].id);
        assert.equal(t?.status, 'active', `${who}'s token`);
      }
      const revoked = await cli(['token', 'revoke', tokens.dave.id], env);
      assert.equal(revoked.code, 0, revoked.stderr);
      await until("dave's revoked token to be refused", async () => {
        const res = await call(server!.url, tok('dave'), 'GET', '/plants');
        return res.status === 401;
      });
      assert.equal((await call(server!.url, tok('carol'), 'GET', '/plants')).status, 200);
    });
  });
}

/** The bodies of every page of a JSON list. */
async function pagesOf<T>(base: string, token: string, path: string): Promise<T[][]> {
  const out: T[][] = [];
  let next: string | null = path;
  while (next !== null) {
    const r = await call(base, token, 'GET', next);
    assert.equal(r.status, 200, `${next}: ${JSON.stringify(r.body)}`);
    out.push(r.body as T[]);
    next = /^<([^>]+)>; rel="next"$/.exec(r.headers.get('link') ?? '')?.[1] ?? null;
    assert.ok(out.length < 50);
  }
  return out;
}
