import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { ENGINES } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';
import { cli, type Server, serve } from './process.js';

const postgres = ENGINES.find((e) => e.name === 'postgres')!;

describe('two instances on one PostgreSQL', { skip: postgres.skip }, () => {
  const env = { DATABASE_URL: '' };
  let drop = async () => {};
  let servers: Server[] = [];
  let token: string;

  const call = (i: number, path: string, init: RequestInit = {}, t = token) =>
    fetch(`${servers[i % servers.length]!.url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${t}`, ...(init.headers ?? {}) },
    });
  const post = (i: number, body: unknown, headers: Record<string, string> = {}) =>
    call(i, '/plants', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  const idOf = (res: Response) => Number(/^\/plants\/([0-9]+)$/.exec(res.headers.get('location') ?? '')![1]);

  before(async () => {
    const db = await postgres.database();
    env.DATABASE_URL = db.url;
    drop = db.drop;
    // Both start at once: migrations take turns under an advisory lock.
    servers = await Promise.all([serve([], env), serve([], env)]);
    token = (await cli(['token', 'create', '--user', 'scale'], env)).stdout.trim();
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await drop();
  });

  it('the same client id created through both at once: exactly one 201, the rest 409', async () => {
    for (let round = 0; round < 5; round++) {
      const id = 5_000_000 + round;
      const statuses = await Promise.all(
        Array.from({ length: 10 }, (_, i) => post(i, { id, name: `race ${round}` }).then((r) => r.status)),
      );
      assert.equal(statuses.filter((s) => s === 201).length, 1, String(statuses));
      assert.equal(statuses.filter((s) => s === 409).length, 9, String(statuses));
    }
  });

  it('PATCHes with one ETag through both instances at once: exactly one 200, the rest 412; each sees the change', async () => {
    for (let round = 0; round < 5; round++) {
      const made = await post(round, { name: `shared ${round}`, tag: 'a' });
      const id = idOf(made);
      const etag = made.headers.get('etag')!;
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          call(i, `/plants/${id}`, {
            method: 'PATCH',
            headers: { 'content-type': 'application/merge-patch+json', 'if-match': etag },
            body: JSON.stringify({ name: `edit ${i}` }),
          }),
        ),
      );
      const statuses = answers.map((r) => r.status);
      assert.equal(statuses.filter((s) => s === 200).length, 1, String(statuses));
      assert.equal(statuses.filter((s) => s === 412).length, 9, String(statuses));
      const winner = answers.find((r) => r.status === 200)!;
      const won = (await winner.json()) as { name: string };
      for (const i of [0, 1]) {
        const now = await call(i, `/plants/${id}`);
        assert.equal(now.headers.get('etag'), winner.headers.get('etag'), `instance ${i}`);
        assert.deepEqual(await now.json(), { name: won.name, tag: 'a' });
      }
    }
  });

  it('server-assigned ids are unique across instances, and increase', async () => {
    const concurrent = await Promise.all(Array.from({ length: 60 }, (_, i) => post(i, { name: `c${i}` })));
    const ids = concurrent.map(idOf);
    assert.ok(concurrent.every((r) => r.status === 201));
    assert.equal(new Set(ids).size, ids.length, 'duplicate ids');
    assert.ok(Math.min(...ids) > 5_000_004, 'server ids jump past client-chosen ones');
    let last = Math.max(...ids);
    for (let i = 0; i < 10; i++) {
      const id = idOf(await post(i, { name: `s${i}` }));
      assert.ok(id > last, `${id} after ${last}`);
      last = id;
    }
  });

  it('an Idempotency-Key replayed on the other instance gets the first response', async () => {
    const key = { 'idempotency-key': 'cross-instance-1' };
    const first = await post(0, { name: 'once', tag: 'x' }, key);
    const again = await post(1, { name: 'once', tag: 'x' }, key);
    assert.equal(first.status, 201);
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('location'), first.headers.get('location'));
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal((await post(1, { name: 'other' }, key)).status, 422);
  });

  it('an Idempotency-Key still in flight on one instance is 409 on the other', async () => {
    // Hold the plants table so the first create stays in flight after claiming its key.
    const blocker = new pg.Client({ connectionString: env.DATABASE_URL });
    await blocker.connect();
    let first!: Promise<Response>;
    let second: Response;
    try {
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE plants IN EXCLUSIVE MODE');
      const key = { 'idempotency-key': 'cross-instance-2' };
      first = post(0, { name: 'slow' }, key);
      // The key is claimed (committed, pending) before the insert that the lock holds up.
      await until('the first create to claim its key and wait on the locked plants table', async () => {
        const claimed = await blocker.query(
          "SELECT 1 FROM idempotency_keys WHERE key = $1 AND state = 'pending'",
          ['cross-instance-2'],
        );
        const waiting = await blocker.query(
          "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        );
        return claimed.rowCount === 1 && (waiting.rowCount ?? 0) > 0;
      });
      second = await post(1, { name: 'slow' }, key);
    } finally {
      await blocker.query('COMMIT').catch(() => {});
      await blocker.end();
    }
    assert.equal(second.status, 409);
    assert.equal(((await second.json()) as { code: string }).code, 'idempotency_key_in_flight');
    assert.equal((await first).status, 201);
  });

  it('a token revoked through the CLI stops working on every instance within 5 s', async () => {
    const t = JSON.parse(
      (await cli(['token', 'create', '--user', 'revoked-everywhere', '--json'], env)).stdout,
    );
    for (const i of [0, 1]) assert.equal((await call(i, '/plants', {}, t.token)).status, 200);
    assert.equal((await cli(['token', 'revoke', t.id], env)).code, 0);
    const stopped = new Set<number>();
    await until(
      'the revoked token to be refused by both instances within 5 s',
      async () => {
        for (const i of [0, 1]) if ((await call(i, '/plants', {}, t.token)).status === 401) stopped.add(i);
        return stopped.size === 2;
      },
      5_000,
    ).catch((err) => {
      throw new Error(
        `${(err as Error).message}: still accepted by instance(s) ${[0, 1].filter((i) => !stopped.has(i))}`,
      );
    });
  });

  it('walking Link pages alternately across instances visits every plant exactly once', async () => {
    const t = (await cli(['token', 'create', '--user', 'walker'], env)).stdout.trim();
    const made: string[] = [];
    for (let i = 0; i < 45; i++) {
      const name = `w${i}`;
      const r = await fetch(`${servers[i % 2]!.url}/plants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name }),
      });
      assert.equal(r.status, 201);
      made.push(name);
    }
    const seen: string[] = [];
    let next: string | null = '/plants?limit=7';
    for (let page = 0; next; page++) {
      const res: Response = await call(page, next, {}, t);
      seen.push(...((await res.json()) as { name: string }[]).map((p) => p.name));
      next = /^<([^>]+)>; rel="next"$/.exec(res.headers.get('link') ?? '')?.[1] ?? null;
    }
    assert.deepEqual(seen, made);
  });
});
