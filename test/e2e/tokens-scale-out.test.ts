// Tokens over HTTP (contract 3.3) across two `bin/plantstore serve` processes on one database: a
// token made through one works through the other, one revoked through one is refused by the other
// within 5 s, and lastUsedAt is written once per minute however many instances see the token.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { sqlitePath } from '../../src/store/index.js';
import { ENGINES } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';
import { cli, type Server, serve } from './process.js';

const postgres = ENGINES.find((e) => e.name === 'postgres')!;
const sqlite = ENGINES.find((e) => e.name === 'sqlite')!;

const T = { timeout: 60_000 };
const MINUTE = 60_000;
const MANAGE = 'tokens:manage,plants:read,plants:write';
const minuteOf = (ms: number) => new Date(ms - (ms % MINUTE)).toISOString();

interface Created {
  id: string;
  token: string;
  user: string;
  expiresAt: string | null;
}

interface View {
  id: string;
  user: string;
  lastUsedAt: string | null;
  status: string;
}

// Every write of a token's lastUsedAt, recorded by a trigger of the test's own (installed after the
// migrations, before either server starts): how many row writes there were is what is checked.
const PG_TOUCH_LOG = `
  CREATE TABLE test_token_touches (id text NOT NULL, minute timestamptz);
  CREATE FUNCTION test_token_touched() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO test_token_touches VALUES (NEW.id, NEW.last_used_at); RETURN NEW; END $$;
  CREATE TRIGGER test_token_touched AFTER UPDATE OF last_used_at ON tokens
    FOR EACH ROW EXECUTE FUNCTION test_token_touched();`;
const SQLITE_TOUCH_LOG = `
  CREATE TABLE test_token_touches (id TEXT NOT NULL, minute INTEGER);
  CREATE TRIGGER test_token_touched AFTER UPDATE OF last_used_at ON tokens
    BEGIN INSERT INTO test_token_touches VALUES (NEW.id, NEW.last_used_at); END;`;

async function installTouchLog(engine: string, url: string): Promise<void> {
  if (engine === 'postgres') {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await c.query(PG_TOUCH_LOG);
    } finally {
      await c.end();
    }
    return;
  }
  const db = new Database(sqlitePath(url), { timeout: 10_000 });
  try {
    db.exec(SQLITE_TOUCH_LOG);
  } finally {
    db.close();
  }
}

/** Every recorded write of lastUsedAt: the token and the minute written. */
async function touches(engine: string, url: string): Promise<{ id: string; minute: string }[]> {
  if (engine === 'postgres') {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const r = await c.query<{ id: string; minute: Date }>('SELECT id, minute FROM test_token_touches');
      return r.rows.map((row) => ({ id: row.id, minute: row.minute.toISOString() }));
    } finally {
      await c.end();
    }
  }
  const db = new Database(sqlitePath(url), { readonly: true, timeout: 10_000 });
  try {
    return db
      .prepare<[], { id: string; minute: number }>('SELECT id, minute FROM test_token_touches')
      .all()
      .map((row) => ({ id: row.id, minute: new Date(row.minute).toISOString() }));
  } finally {
    db.close();
  }
}

for (const [title, engine] of [
  ['two instances on one PostgreSQL', postgres],
  ['two processes on one SQLite file', sqlite],
] as const)
  describe(`tokens over HTTP across ${title}`, { skip: engine.skip }, () => {
    const env = { DATABASE_URL: '' };
    let drop = async () => {};
    let A: Server;
    let B: Server;
    const servers: Server[] = [];

    before(async () => {
      const db = await engine.database();
      env.DATABASE_URL = db.url;
      drop = db.drop;
      const migrated = await cli(['migrate'], env);
      assert.equal(migrated.code, 0, migrated.stderr);
      await installTouchLog(engine.name, env.DATABASE_URL);
      [A, B] = await Promise.all([serve([], env), serve([], env)]);
      servers.push(A, B);
    });
    after(async () => {
      await Promise.all(servers.map((s) => s.stop()));
      await drop();
    });

    const name = (s: Server) => (s === A ? 'A' : s === B ? 'B' : s.url);
    const call = (s: Server, secret: string, method: string, path: string, body?: unknown) =>
      fetch(`${s.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${secret}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(10_000),
      });
    const status = async (s: Server, secret: string, path = '/me') =>
      (await call(s, secret, 'GET', path)).status;

    /** A new user and a token of theirs with tokens:manage, from the command line. */
    async function manager(): Promise<{ user: string; token: string }> {
      const user = `tokens-${randomUUID().slice(0, 8)}`;
      const made = await cli(['token', 'create', '--user', user, '--scopes', MANAGE], env);
      assert.equal(made.code, 0, made.stderr);
      const token = made.stdout.trim();
      assert.match(token, /^pst_/);
      return { user, token };
    }
    async function make(s: Server, secret: string, body: unknown = {}): Promise<Created> {
      const res = await call(s, secret, 'POST', '/tokens', body);
      assert.equal(res.status, 201, `POST /tokens on ${name(s)}`);
      return (await res.json()) as Created;
    }
    async function view(s: Server, secret: string, id: string): Promise<View> {
      const res = await call(s, secret, 'GET', `/tokens/${id}`);
      assert.equal(res.status, 200, `GET /tokens/${id} on ${name(s)}`);
      return (await res.json()) as View;
    }

    it('a token made over HTTP through A works through B at once', T, async () => {
      const m = await manager();
      const t = await make(A, m.token, { name: 'made on A' });
      const who = await call(B, t.token, 'GET', '/me');
      assert.equal(who.status, 200);
      assert.deepEqual(await who.json(), {
        user: m.user,
        scopes: ['plants:read', 'plants:write'],
        kind: 'token',
        tokenId: t.id,
        expiresAt: null,
      });
      const created = await call(B, t.token, 'POST', '/plants', { name: 'made with a new token' });
      assert.equal(created.status, 201);
      const plant = created.headers.get('location')!;
      assert.equal(await status(A, m.token, plant), 200, 'the maker reads it through A');
      // B lists and shows it to the maker, without its secret.
      assert.equal((await view(B, m.token, t.id)).status, 'active');
      const listed = await call(B, m.token, 'GET', '/tokens');
      const text = await listed.text();
      assert.ok(!text.includes('pst_'));
      assert.ok((JSON.parse(text) as View[]).some((v) => v.id === t.id));
      // The audit line is written by the instance that made it, without the secret.
      await until('A’s audit line', () =>
        A.logs.some((l) => l.includes('"token created"') && l.includes(t.id)),
      );
      assert.ok(![...A.logs, ...B.logs].some((l) => l.includes(t.token) || l.includes(m.token)));
    });

    it('a token revoked through A is refused by B within 5 s, and through A at once', T, async () => {
      const m = await manager();
      const t = await make(A, m.token);
      // Both instances have seen it (and may trust that for a moment).
      assert.equal(await status(B, t.token), 200);
      assert.equal(await status(A, t.token), 200);
      const res = await call(A, m.token, 'DELETE', `/tokens/${t.id}`);
      assert.equal(res.status, 204);
      assert.equal(await status(A, t.token), 401, 'A refuses it on its very next request');
      const revokedAt = Date.now();
      await until('B to refuse the revoked token', async () => (await status(B, t.token)) === 401, 5_000);
      assert.ok(Date.now() - revokedAt <= 5_500, 'within 5 s');
      for (const s of [A, B]) {
        assert.equal(await status(s, t.token, '/plants'), 401, `still refused on ${name(s)}`);
        assert.equal((await view(s, m.token, t.id)).status, 'revoked');
      }
    });

    it('a maker revoked through A makes and revokes nothing through B, at once', T, async () => {
      const m = await manager();
      const maker = await make(A, m.token, { scopes: MANAGE.split(',') });
      const victim = await make(A, m.token);
      // B has just checked the maker.
      assert.equal(await status(B, maker.token, '/tokens'), 200);
      assert.equal((await call(A, m.token, 'DELETE', `/tokens/${maker.id}`)).status, 204);
      assert.equal((await call(B, maker.token, 'POST', '/tokens', {})).status, 401, 'POST through B');
      assert.equal((await call(B, maker.token, 'DELETE', `/tokens/${victim.id}`)).status, 401, 'DELETE');
      assert.equal((await view(B, m.token, victim.id)).status, 'active');
      const listed = (await (await call(A, m.token, 'GET', '/tokens')).json()) as View[];
      assert.equal(listed.length, 3, 'the command line’s token, the maker and the victim: nothing more');
    });

    it('lastUsedAt after using a token through both is written once, to the current minute', T, async () => {
      // A pair of its own: stopping them is how the test knows every queued write has been made.
      const pair = await Promise.all([serve([], env), serve([], env)]);
      servers.push(...pair);
      const [C, D] = pair;
      const m = await manager();
      const t = await make(C, m.token);
      assert.equal((await view(D, m.token, t.id)).lastUsedAt, null, 'never used yet');
      const start = Date.now();
      for (let i = 0; i < 5; i++) {
        assert.equal(await status(C, t.token), 200);
        assert.equal(await status(D, t.token), 200);
      }
      const end = Date.now();
      const minutes = [...new Set([minuteOf(start), minuteOf(end)])];
      const used = await until(
        'lastUsedAt to be written',
        async () => (await view(D, m.token, t.id)).lastUsedAt ?? undefined,
      );
      assert.ok(minutes.includes(used), `${used} is not one of ${minutes}`);
      assert.equal((await view(C, m.token, t.id)).lastUsedAt, used, 'both instances show the one value');

      // Stopped cleanly, each has written what it had queued.
      for (const s of pair) assert.equal(await s.stop(), 0);
      assert.ok(
        !pair.some((s) => s.logs.some((l) => l.includes('could not record when tokens were last used'))),
        'no write failed',
      );
      const all = await touches(engine.name, env.DATABASE_URL);
      const ofT = all.filter((w) => w.id === t.id);
      if (minutes.length === 1) {
        assert.deepEqual(ofT, [{ id: t.id, minute: minutes[0] }], 'one write for the one minute');
      } else {
        // The uses spanned a minute's end: at most one write for each of the two minutes.
        assert.ok(ofT.length >= 1 && ofT.length <= 2, JSON.stringify(ofT));
        assert.ok(ofT.every((w) => minutes.includes(w.minute)));
      }
      // However many instances and uses: never two writes of one token for one minute.
      const seen = new Set<string>();
      for (const w of all) {
        const key = `${w.id} ${w.minute}`;
        assert.ok(!seen.has(key), `${key} was written twice`);
        seen.add(key);
      }
      // What the store keeps, as the command line lists it.
      const listed = await cli(['token', 'list', '--user', m.user, '--json'], env);
      assert.equal(listed.code, 0, listed.stderr);
      const rows = JSON.parse(listed.stdout) as { id: string; lastUsedAt: string | null }[];
      assert.equal(
        rows.find((r) => r.id === t.id)?.lastUsedAt,
        ofT
          .map((w) => w.minute)
          .sort()
          .at(-1),
      );
    });
  });
