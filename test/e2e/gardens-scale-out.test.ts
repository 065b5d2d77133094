// Two `bin/plantstore serve` instances on one PostgreSQL (contract 3.2): a change of membership
// made through one instance is what the other answers with on the very next request ("on every
// instance: the next request is answered with the new memberships"), and the live stream of the
// other instance shows a removed member nothing more of the garden.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ENGINES } from '../helpers/engines.js';
import { openStream, type SseReader } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';
import { cli, type Server, serve } from './process.js';

const postgres = ENGINES.find((e) => e.name === 'postgres')!;
const sqlite = ENGINES.find((e) => e.name === 'sqlite')!;

interface Plant {
  id: number;
  garden: string;
  name: string;
  tag?: string;
}

// Two instances on one PostgreSQL, as docs/scale-out.md deploys them; and two processes on one
// SQLite file, as `serve --workers` runs them (there each keeps users' memberships in memory while
// the file's membership clock stands still, so the other's changes must move it).
for (const [title, engine] of [
  ['two instances on one PostgreSQL', postgres],
  ['two processes on one SQLite file', sqlite],
] as const)
  describe(`gardens across ${title}`, { skip: engine.skip }, () => {
    const env = { DATABASE_URL: '' };
    let drop = async () => {};
    let A: Server;
    let B: Server;
    const readers: SseReader[] = [];

    before(async () => {
      const db = await engine.database();
      env.DATABASE_URL = db.url;
      drop = db.drop;
      [A, B] = await Promise.all([serve([], env), serve([], env)]);
    });
    after(async () => {
      for (const r of readers) r.close();
      await Promise.all([A, B].filter(Boolean).map((s) => s.stop()));
      await drop();
    });

    /** A new user with a token; calls go to the instance given. */
    async function user() {
      const name = `scale-${randomUUID().slice(0, 8)}`;
      const token = (await cli(['token', 'create', '--user', name], env)).stdout.trim();
      assert.match(token, /^pst_/, `token create for ${name}`);
      const call = (
        s: Server,
        method: string,
        path: string,
        body?: unknown,
        headers: Record<string, string> = {},
      ) =>
        fetch(`${s.url}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
            ...headers,
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      const json = async <T>(s: Server, path: string): Promise<{ status: number; body: T }> => {
        const res = await call(s, 'GET', path);
        return { status: res.status, body: (await res.json()) as T };
      };
      const list = async (s: Server, query = ''): Promise<Plant[]> => {
        const all: Plant[] = [];
        for (let next: string | null = `/plants?limit=2&include=id,garden${query}`; next !== null; ) {
          const res: Response = await call(s, 'GET', next);
          assert.equal(res.status, 200, `${name} GET ${next} on ${s === A ? 'A' : 'B'}`);
          all.push(...((await res.json()) as Plant[]));
          next = /^<([^>]+)>; rel="next"$/.exec(res.headers.get('link') ?? '')?.[1] ?? null;
        }
        return all;
      };
      const stream = async (s: Server, headers: Record<string, string> = {}) => {
        const r = await openStream(`${s.url}/events`, { authorization: `Bearer ${token}`, ...headers });
        assert.equal(r.status, 200);
        readers.push(r);
        return r;
      };
      return { name, token, call, json, list, stream };
    }
    type User = Awaited<ReturnType<typeof user>>;

    async function garden(owner: User, s: Server, name: string): Promise<string> {
      const res = await owner.call(s, 'POST', '/gardens', { name });
      assert.equal(res.status, 201);
      return ((await res.json()) as { id: string }).id;
    }
    async function plant(u: User, s: Server, gid: string | null, name: string): Promise<number> {
      const res = await u.call(s, 'POST', gid === null ? '/plants' : `/gardens/${gid}/plants`, { name });
      assert.equal(res.status, 201, `${u.name} creates ${name} in ${gid ?? 'its home'}: ${res.status}`);
      return Number(/[0-9]+$/.exec(res.headers.get('location')!)![0]);
    }
    async function share(owner: User, s: Server, gid: string, member: User, role: string, status = 201) {
      const res = await owner.call(s, 'PUT', `/gardens/${gid}/members/${encodeURIComponent(member.name)}`, {
        role,
      });
      assert.equal(res.status, status, `share ${gid} with ${member.name} as ${role}`);
    }
    /** The names, in order, of the events a reader has shown so far. */
    const names = (r: SseReader) =>
      r.messages
        .filter((m) => m.data !== undefined)
        .map((m) => (JSON.parse(m.data!) as { data: { name: string; garden: string } }).data);

    it('a member removed through A is refused by B on its very next request, and its stream on B shows nothing more of the garden', async () => {
      const owner = await user();
      const member = await user();
      const gid = await garden(owner, A, 'shared');
      await share(owner, A, gid, member, 'editor');
      const id = await plant(member, B, gid, 'before');
      // Seen on both while a member.
      for (const s of [A, B]) {
        assert.equal((await member.call(s, 'GET', `/plants/${id}`)).status, 200);
        assert.deepEqual(
          (await member.list(s)).map((p) => p.id),
          [id],
        );
      }
      const live = await member.stream(B);
      const marker0 = await plant(member, A, null, 'marker-0');
      await until('the member’s stream on B to show its marker', () =>
        names(live).some((d) => d.name === 'marker-0'),
      );

      const removed = await owner.call(
        A,
        'DELETE',
        `/gardens/${gid}/members/${encodeURIComponent(member.name)}`,
      );
      assert.equal(removed.status, 204);
      // The very next requests, on B: nothing of the garden.
      assert.equal((await member.call(B, 'GET', `/plants/${id}`)).status, 404, 'GET the plant');
      assert.equal((await member.call(B, 'GET', `/gardens/${gid}`)).status, 404, 'GET the garden');
      assert.equal((await member.call(B, 'GET', `/gardens/${gid}/plants`)).status, 404, 'the nested list');
      assert.equal((await member.call(B, 'GET', `/plants?garden=${gid}`)).status, 404, 'list garden=');
      assert.deepEqual(
        (await member.list(B)).filter((p) => p.garden === gid),
        [],
        'GET /plants shows none of its plants',
      );
      const gardens = await member.json<{ id: string }[]>(B, '/gardens');
      assert.ok(!gardens.body.some((g) => g.id === gid), 'GET /gardens no longer lists it');
      const patch = await member.call(B, 'PATCH', `/plants/${id}`, { name: 'x' }, { 'if-match': '*' });
      assert.equal(patch.status, 404, 'PATCH');
      assert.equal((await member.call(B, 'DELETE', `/plants/${id}`)).status, 404, 'DELETE');
      assert.equal(
        (await member.call(B, 'POST', `/gardens/${gid}/plants`, { name: 'y' })).status,
        404,
        'create',
      );

      // Its stream on B: the owner's next change in the garden never comes; a later event of its
      // own (committed after it) does, so everything before that has been read.
      await plant(owner, A, gid, 'after-removal');
      await plant(member, A, null, 'marker-1');
      await until('the member’s stream on B to show its second marker', () =>
        names(live).some((d) => d.name === 'marker-1'),
      );
      assert.ok(
        !names(live).some((d) => d.name === 'after-removal'),
        `the removed member's stream on B showed an event of ${gid}: ${JSON.stringify(names(live))}`,
      );
      // A new stream on B resuming from before the removal shows nothing of the garden either.
      const first = live.messages.find((m) => m.data?.includes(`"id":${marker0},`))!;
      const resumed = await member.stream(B, { 'last-event-id': first.id! });
      await until('the resumed stream on B to show the second marker', () =>
        names(resumed).some((d) => d.name === 'marker-1'),
      );
      assert.deepEqual(
        names(resumed).map((d) => d.name),
        ['marker-1'],
        'the resumed stream shows only what the member may see now',
      );
    });

    it('a member added through A sees the garden’s plants through B on its very next request', async () => {
      const owner = await user();
      const member = await user();
      const gid = await garden(owner, A, 'joining');
      const ids = [await plant(owner, A, gid, 'one'), await plant(owner, B, gid, 'two')];
      const live = await member.stream(B);
      // Not yet a member: nothing, on either instance (each may remember this answer).
      for (const s of [A, B]) {
        assert.equal((await member.call(s, 'GET', `/plants/${ids[0]}`)).status, 404);
        assert.equal((await member.call(s, 'GET', `/gardens/${gid}/plants`)).status, 404);
        assert.deepEqual(await member.list(s), []);
      }

      await share(owner, A, gid, member, 'viewer');
      // The very next requests, on B: the garden and its plants.
      const one = await member.json<{ name: string }>(B, `/plants/${ids[0]}`);
      assert.deepEqual(one, { status: 200, body: { name: 'one' } }, 'GET a plant');
      assert.deepEqual(
        (await member.list(B)).map((p) => p.id),
        ids,
        'GET /plants lists them',
      );
      const nested = await member.json<{ id: number }[]>(B, `/gardens/${gid}/plants?include=id`);
      assert.equal(nested.status, 200, 'the nested list');
      assert.deepEqual(
        nested.body.map((p) => p.id),
        ids,
      );
      const g = await member.json<{ id: string; role: string }>(B, `/gardens/${gid}`);
      assert.deepEqual([g.status, g.body.role], [200, 'viewer']);
      // A viewer: it may not change them (403 on B at once), and a later promotion through A lets it.
      const denied = await member.call(B, 'PATCH', `/plants/${ids[0]}`, { name: 'uno' }, { 'if-match': '*' });
      assert.equal(denied.status, 403);
      assert.equal(((await denied.json()) as { code: string }).code, 'insufficient_role');
      await share(owner, A, gid, member, 'editor', 200);
      const allowed = await member.call(
        B,
        'PATCH',
        `/plants/${ids[0]}`,
        { name: 'uno' },
        { 'if-match': '*' },
      );
      assert.equal(allowed.status, 200, 'an editor now, on B at once');

      // A plant created through A after the add: listed on B at once, and on its stream on B.
      const three = await plant(owner, A, gid, 'three');
      assert.deepEqual(
        (await member.list(B)).map((p) => p.id),
        [...ids, three],
        'a plant created through A is listed on B at once',
      );
      await until('the new member’s stream on B to show the garden’s next events', () => {
        const got = names(live).map((d) => d.name);
        return got.includes('uno') && got.includes('three');
      });
      assert.ok(
        names(live).every((d) => d.garden === gid),
        `only events of ${gid}: ${JSON.stringify(names(live))}`,
      );
    });

    it('a member demoted through A is refused a change by B on its very next request', async () => {
      const owner = await user();
      const member = await user();
      const gid = await garden(owner, B, 'demotion');
      await share(owner, B, gid, member, 'editor');
      const id = await plant(member, A, gid, 'mine');
      assert.equal(
        (await member.call(B, 'PATCH', `/plants/${id}`, { tag: 'a' }, { 'if-match': '*' })).status,
        200,
      );
      await share(owner, A, gid, member, 'viewer', 200);
      const patch = await member.call(B, 'PATCH', `/plants/${id}`, { tag: 'b' }, { 'if-match': '*' });
      assert.equal(patch.status, 403, 'PATCH after the demotion');
      assert.equal(
        (await member.call(B, 'DELETE', `/plants/${id}`)).status,
        403,
        'DELETE after the demotion',
      );
      assert.equal(
        (await member.call(B, 'POST', `/gardens/${gid}/plants`, { name: 'z' })).status,
        403,
        'create',
      );
      // Still a viewer: it reads.
      assert.deepEqual(await member.json(B, `/plants/${id}`), {
        status: 200,
        body: { name: 'mine', tag: 'a' },
      });
    });

    it('a garden deleted through B disappears for its members on A at once', async () => {
      const owner = await user();
      const viewer = await user();
      const editor = await user();
      const gid = await garden(owner, A, 'short-lived');
      await share(owner, A, gid, viewer, 'viewer');
      await share(owner, A, gid, editor, 'editor');
      const id = await plant(editor, A, gid, 'temporary');
      for (const u of [owner, viewer, editor]) {
        assert.equal((await u.call(A, 'GET', `/gardens/${gid}`)).status, 200);
        assert.deepEqual(
          (await u.list(A, `&garden=${gid}`)).map((p) => p.id),
          [id],
        );
      }
      // Not empty: refused, on either instance.
      const full = await owner.call(B, 'DELETE', `/gardens/${gid}`);
      assert.equal(full.status, 409);
      assert.equal(((await full.json()) as { code: string }).code, 'garden_not_empty');
      assert.equal((await editor.call(B, 'DELETE', `/plants/${id}`)).status, 204);
      assert.equal((await owner.call(B, 'DELETE', `/gardens/${gid}`)).status, 204);

      for (const u of [owner, viewer, editor]) {
        assert.equal(
          (await u.call(A, 'GET', `/gardens/${gid}`)).status,
          404,
          `${u.name}: GET the garden on A`,
        );
        assert.equal(
          (await u.call(A, 'GET', `/gardens/${gid}/plants`)).status,
          404,
          `${u.name}: nested list on A`,
        );
        assert.equal(
          (await u.call(A, 'GET', `/plants?garden=${gid}`)).status,
          404,
          `${u.name}: list garden= on A`,
        );
        assert.equal(
          (await u.call(A, 'GET', `/gardens/${gid}/members`)).status,
          404,
          `${u.name}: members on A`,
        );
        const listed = await u.json<{ id: string }[]>(A, '/gardens');
        assert.ok(!listed.body.some((g) => g.id === gid), `${u.name}: GET /gardens on A still lists it`);
      }
      assert.equal((await editor.call(A, 'POST', `/gardens/${gid}/plants`, { name: 'late' })).status, 404);
      const reshare = await owner.call(
        A,
        'PUT',
        `/gardens/${gid}/members/${encodeURIComponent(viewer.name)}`,
        {
          role: 'viewer',
        },
      );
      assert.equal(reshare.status, 404, 'sharing a deleted garden');
    });
  });
