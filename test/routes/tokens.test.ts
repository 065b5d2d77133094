// Contract 3.3: tokens over HTTP (POST/GET/DELETE /tokens, GET /tokens/{id}) behind tokens:manage,
// with no escalation, lastUsedAt to the minute, an audit line and a metric for every creation and
// revocation, and never a secret after the answer that made it; on every engine.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { createToken } from '../../src/identity/tokens.js';
import type { Scope } from '../../src/schemas/token.js';
import { clientAs, errorBody, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { startTestIssuer, type TestIssuer } from '../helpers/issuer.js';
import { until } from '../helpers/wait.js';

const T = { timeout: 30_000 };
const JSON_TYPE = { 'content-type': 'application/json' };
const MANAGE: Scope[] = ['tokens:manage', 'plants:read', 'plants:write'];
const ADMIN: Scope[] = ['plants:admin', 'tokens:manage'];
const CREATED_KEYS = ['createdAt', 'expiresAt', 'id', 'name', 'scopes', 'token', 'user'];
const VIEW_KEYS = ['createdAt', 'expiresAt', 'id', 'lastUsedAt', 'name', 'scopes', 'status', 'user'];
const SECRET = /^pst_[A-Za-z0-9_-]{43}$/;
const TOKEN_ID = /^tok_[A-Za-z0-9_-]{12}$/;
const REALM = 'Bearer realm="plantstore"';
const HOUR = 3_600_000;
const MINUTE = 60_000;

interface Created {
  id: string;
  token: string;
  user: string;
  scopes: string[];
  name: string | null;
  createdAt: string;
  expiresAt: string | null;
}

interface View {
  id: string;
  user: string;
  scopes: string[];
  name: string | null;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  status: 'active' | 'expired' | 'revoked';
}

const asBody = (payload: unknown) => (typeof payload === 'string' ? payload : JSON.stringify(payload));
const minuteOf = (ms: number) => new Date(ms - (ms % MINUTE)).toISOString();
const uniqueUser = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
const nextOf = (res: LightMyRequestResponse) =>
  /^<([^>]+)>; rel="next"$/.exec(String(res.headers.link ?? ''))?.[1] ?? null;

/** A request with this bearer secret (none: no Authorization header). */
function call(
  h: Harness,
  secret: string | null,
  method: 'GET' | 'POST' | 'DELETE' | 'PUT' | 'PATCH' | 'HEAD',
  url: string,
  payload?: unknown,
  headers: Record<string, string> = payload === undefined ? {} : JSON_TYPE,
): Promise<LightMyRequestResponse> {
  return h.app.inject({
    method,
    url,
    headers: { ...(secret === null ? {} : { authorization: `Bearer ${secret}` }), ...headers },
    ...(payload === undefined ? {} : { payload: asBody(payload) }),
  });
}

const postToken = (h: Harness, secret: string | null, body: unknown, headers?: Record<string, string>) =>
  call(h, secret, 'POST', '/tokens', body, headers);
const getToken = (h: Harness, secret: string, id: string) => call(h, secret, 'GET', `/tokens/${id}`);
const revoke = (h: Harness, secret: string, id: string) => call(h, secret, 'DELETE', `/tokens/${id}`);
const me = (h: Harness, secret: string) => call(h, secret, 'GET', '/me');

/** POST /tokens answered 201 with exactly the contract's fields; returns them. */
async function made(h: Harness, secret: string, body: unknown = {}): Promise<Created> {
  const res = await postToken(h, secret, body);
  assert.equal(res.statusCode, 201, res.body);
  const c: Created = res.json();
  assert.deepEqual(Object.keys(c).sort(), CREATED_KEYS);
  assert.match(c.token, SECRET);
  assert.match(c.id, TOKEN_ID);
  assert.equal(res.headers.location, `/tokens/${c.id}`);
  assert.equal(res.headers['cache-control'], 'no-store');
  return c;
}

/** One token as GET /tokens/{id} shows it (200 asserted). */
async function viewOf(h: Harness, secret: string, id: string): Promise<View> {
  const res = await getToken(h, secret, id);
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

/** Every page of a listing, following Link (200 asserted on each). */
async function walk(h: Harness, secret: string, url: string) {
  const pages: View[][] = [];
  const links: string[] = [];
  for (let next: string | null = url; next !== null; ) {
    const res = await call(h, secret, 'GET', next);
    assert.equal(res.statusCode, 200, `GET ${next}: ${res.body}`);
    assert.ok(!res.body.includes('pst_'), `a list body carries a secret: ${res.body}`);
    assert.equal(res.headers['cache-control'], 'no-store');
    pages.push(res.json());
    next = nextOf(res);
    if (next !== null) links.push(next);
    assert.ok(pages.length < 10_000, 'the listing ends');
  }
  return { pages, links, tokens: pages.flat() };
}

/** The ids of every token the caller lists (newest first). */
const listedIds = async (h: Harness, secret: string, query = '') =>
  (await walk(h, secret, `/tokens?limit=1000${query}`)).tokens.map((t) => t.id);

/**
 * Newest first: the tokens of `order` (as they were made) come in the reverse of that order, by when
 * they were made, not by createdAt (several may share a millisecond, and tests backdate some).
 */
function assertMadeOrder(tokens: View[], order: string[]): void {
  const listed = tokens.map((t) => t.id).filter((id) => order.includes(id));
  assert.deepEqual(listed, [...order].reverse(), 'newest first, in the order the tokens were made');
}

function refusedAs(res: LightMyRequestResponse, status: number, code: string, what = ''): void {
  assert.equal(res.statusCode, status, `${what} ${res.body}`);
  assert.equal(errorBody(res).code, code, what);
}

function insufficientScope(res: LightMyRequestResponse, what = ''): void {
  refusedAs(res, 403, 'insufficient_scope', what);
  assert.equal(
    res.headers['www-authenticate'],
    `${REALM}, error="insufficient_scope", scope="tokens:manage"`,
    what,
  );
}

function invalidToken(res: LightMyRequestResponse, what = ''): void {
  refusedAs(res, 401, 'invalid_token', what);
  assert.match(String(res.headers['www-authenticate']), /^Bearer realm="plantstore", error="invalid_token"/);
}

/** 403 scope_not_held naming the offending field. */
function notHeld(res: LightMyRequestResponse, field: string, what = ''): void {
  refusedAs(res, 403, 'scope_not_held', what);
  const details = errorBody(res).details as { field: string }[] | undefined;
  assert.deepEqual(
    details?.map((d) => d.field),
    [field],
    what,
  );
}

for (const engine of ENGINES) {
  describe(`tokens over HTTP (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    before(async () => {
      // A long verifier cache: a token refused at once after a revocation here is refused because
      // the revocation (or the fresh check of a maker) reached it, not because its verdict aged.
      h = await harness(engine, { authFailureLimit: 0 }, { tokenCacheMs: 60_000, lastUsedFlushMs: 20 });
    });
    after(() => h?.close());

    const manager = (scopes: Scope[] = MANAGE) => h.user(scopes);

    describe('POST /tokens', () => {
      it(
        '201 with exactly {id, token, user, scopes, name, createdAt, expiresAt}, no-store and Location; defaults: the caller, plants:read plants:write, no name, no expiry',
        T,
        async () => {
          const m = await manager();
          const before = Date.now();
          const res = await postToken(h, m.token, {});
          assert.equal(res.statusCode, 201, res.body);
          assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
          assert.equal(res.headers['cache-control'], 'no-store');
          const c: Created = res.json();
          assert.deepEqual(Object.keys(c).sort(), CREATED_KEYS);
          assert.equal(res.headers.location, `/tokens/${c.id}`);
          assert.match(c.id, TOKEN_ID);
          assert.match(c.token, SECRET);
          assert.equal(c.user, m.user);
          assert.deepEqual(c.scopes, ['plants:read', 'plants:write']);
          assert.equal(c.name, null);
          assert.equal(c.expiresAt, null, 'a maker that never expires makes one that never expires');
          assert.equal(new Date(c.createdAt).toISOString(), c.createdAt);
          assert.ok(Date.parse(c.createdAt) >= before - 1000 && Date.parse(c.createdAt) <= Date.now() + 1000);

          const full = await made(h, m.token, {
            scopes: ['plants:read'],
            expiresIn: '30d',
            name: 'dashboard',
          });
          assert.deepEqual(
            { user: full.user, scopes: full.scopes, name: full.name },
            { user: m.user, scopes: ['plants:read'], name: 'dashboard' },
          );
          assert.equal(Date.parse(full.expiresAt!) - Date.parse(full.createdAt), 30 * 24 * HOUR);
          // expiresIn null is as absent; the secret is new every time.
          const nulled = await made(h, m.token, { expiresIn: null, name: null, user: m.user });
          assert.equal(nulled.expiresAt, null);
          assert.equal(new Set([c.token, full.token, nulled.token]).size, 3);
          assert.equal(new Set([c.id, full.id, nulled.id]).size, 3);
        },
      );

      it(
        'the new token works: GET /me shows it; it creates, lists, reads, patches and deletes plants',
        T,
        async () => {
          const m = await manager();
          const c = await made(h, m.token, { name: 'worker' });
          const who = await me(h, c.token);
          assert.equal(who.statusCode, 200, who.body);
          assert.deepEqual(who.json(), {
            user: m.user,
            scopes: ['plants:read', 'plants:write'],
            kind: 'token',
            tokenId: c.id,
            expiresAt: null,
          });
          const created = await call(h, c.token, 'POST', '/plants', { name: 'Fern', tag: 'made-over-http' });
          assert.equal(created.statusCode, 201, created.body);
          const id = locationId(created);
          // The same user as its maker: the maker sees the plant too.
          assert.deepEqual((await call(h, m.token, 'GET', `/plants/${id}`)).json(), {
            name: 'Fern',
            tag: 'made-over-http',
          });
          const listed = await call(h, c.token, 'GET', '/plants?include=id');
          assert.equal(listed.statusCode, 200);
          assert.deepEqual(
            listed.json().map((p: { id: number }) => p.id),
            [id],
          );
          const patched = await call(
            h,
            c.token,
            'PATCH',
            `/plants/${id}`,
            { name: 'Boston fern' },
            {
              'content-type': 'application/merge-patch+json',
              'if-match': String(created.headers.etag),
            },
          );
          assert.equal(patched.statusCode, 200, patched.body);
          assert.deepEqual((await call(h, c.token, 'GET', `/plants/${id}`)).json(), {
            name: 'Boston fern',
            tag: 'made-over-http',
          });
          assert.equal((await call(h, c.token, 'DELETE', `/plants/${id}`)).statusCode, 204);
          assert.equal((await call(h, c.token, 'GET', `/plants/${id}`)).statusCode, 404);
          // It holds no tokens:manage (not asked for): it manages no tokens.
          insufficientScope(await call(h, c.token, 'GET', '/tokens'));
        },
      );

      it(
        'a read-only token made over HTTP reads plants and gets 403 insufficient_scope on every write',
        T,
        async () => {
          const m = await manager();
          const plant = await call(h, m.token, 'POST', '/plants', { name: 'Cactus' });
          const id = locationId(plant);
          const reader = await made(h, m.token, { scopes: ['plants:read'] });
          assert.deepEqual((await me(h, reader.token)).json().scopes, ['plants:read']);
          assert.equal((await call(h, reader.token, 'GET', `/plants/${id}`)).statusCode, 200);
          assert.equal((await call(h, reader.token, 'GET', '/plants')).statusCode, 200);
          const writes = [
            await call(h, reader.token, 'POST', '/plants', { name: 'no' }),
            await call(
              h,
              reader.token,
              'PATCH',
              `/plants/${id}`,
              { name: 'no' },
              {
                'content-type': 'application/merge-patch+json',
                'if-match': '*',
              },
            ),
            await call(h, reader.token, 'DELETE', `/plants/${id}`),
          ];
          for (const res of writes) {
            refusedAs(res, 403, 'insufficient_scope');
            assert.equal(
              res.headers['www-authenticate'],
              `${REALM}, error="insufficient_scope", scope="plants:write"`,
            );
          }
          assert.deepEqual((await call(h, m.token, 'GET', `/plants/${id}`)).json(), { name: 'Cactus' });
        },
      );

      it(
        'body rules as for POST /plants: 415 not JSON, 413 over 16 KiB, 400 for any other field or a bad value; nothing made',
        T,
        async () => {
          const m = await manager();
          const before = await listedIds(h, m.token);
          const types: Record<string, string>[] = [
            { 'content-type': 'text/plain' },
            {},
            { 'content-type': 'application/jsonx' },
          ];
          for (const headers of types) {
            const res = await postToken(h, m.token, '{}', headers);
            refusedAs(res, 415, 'unsupported_media_type', JSON.stringify(headers));
          }
          const big = await postToken(h, m.token, { name: 'x'.repeat(17 * 1024) });
          refusedAs(big, 413, 'body_too_large');
          // Just under 16 KiB of JSON is read (and refused for its content, not its size).
          const under = await postToken(h, m.token, { name: 'x'.repeat(16 * 1024 - 20) });
          refusedAs(under, 400, 'invalid_body');

          const bad: [unknown, string][] = [
            [{ token: 'pst_mine' }, '/token'],
            [{ id: 'tok_AAAAAAAAAAAA' }, '/id'],
            [{ scope: ['plants:read'] }, '/scope'],
            [{ createdAt: new Date().toISOString() }, '/createdAt'],
            [{ scopes: 'plants:read' }, '/scopes'],
            [{ scopes: 'plants:read plants:write' }, '/scopes'],
            [{ scopes: ['plants:fly'] }, '/scopes/0'],
            [{ scopes: ['plants:read', 'tokens:admin'] }, '/scopes/1'],
            [{ scopes: [] }, '/scopes'],
            [{ scopes: [1] }, '/scopes/0'],
            [{ scopes: null }, '/scopes'],
            [{ user: 5 }, '/user'],
            [{ user: '' }, '/user'],
            [{ user: 'two words' }, '/user'],
            [{ user: 'x'.repeat(201) }, '/user'],
            [{ user: null }, '/user'],
            [{ name: 5 }, '/name'],
            [{ name: '' }, '/name'],
            [{ name: '   ' }, '/name'],
            [{ name: 'x'.repeat(201) }, '/name'],
            [{ name: 'tab\there' }, '/name'],
            [{ expiresIn: '2x' }, '/expiresIn'],
            [{ expiresIn: '0s' }, '/expiresIn'],
            [{ expiresIn: '0d' }, '/expiresIn'],
            [{ expiresIn: '1.5d' }, '/expiresIn'],
            [{ expiresIn: '30' }, '/expiresIn'],
            [{ expiresIn: '30D' }, '/expiresIn'],
            [{ expiresIn: '-1d' }, '/expiresIn'],
            [{ expiresIn: ' 1d' }, '/expiresIn'],
            [{ expiresIn: '250ms' }, '/expiresIn'],
            [{ expiresIn: '999999999d' }, '/expiresIn'],
            [{ expiresIn: '' }, '/expiresIn'],
            [{ expiresIn: 30 }, '/expiresIn'],
            [{ expiresIn: true }, '/expiresIn'],
          ];
          for (const [body, field] of bad) {
            const res = await postToken(h, m.token, body);
            refusedAs(res, 400, 'invalid_body', JSON.stringify(body).slice(0, 80));
            const details = (errorBody(res).details ?? []) as { field: string }[];
            assert.ok(
              details.some((d) => d.field === field),
              `${JSON.stringify(body).slice(0, 80)}: no detail for ${field} in ${res.body}`,
            );
          }
          for (const payload of ['[]', '"x"', '42', 'null', '{oops', '']) {
            const res = await postToken(h, m.token, payload);
            assert.equal(res.statusCode, 400, `${JSON.stringify(payload)}: ${res.body}`);
            errorBody(res);
          }
          assert.deepEqual(await listedIds(h, m.token), before, 'a refused body makes no token');
        },
      );

      it(
        '401 without a token or with an unknown one; 403 insufficient_scope for a token without tokens:manage, even plants:admin',
        T,
        async () => {
          const none = await postToken(h, null, {});
          refusedAs(none, 401, 'missing_token');
          assert.equal(none.headers['www-authenticate'], REALM);
          // Authentication comes before the body's type and content.
          refusedAs(await postToken(h, null, 'x', { 'content-type': 'text/plain' }), 401, 'missing_token');
          invalidToken(await postToken(h, `pst_${'A'.repeat(43)}`, {}));
          invalidToken(await postToken(h, 'not-a-token', {}));

          const bob = await manager();
          const target = await made(h, bob.token);
          for (const scopes of [
            ['plants:read', 'plants:write'],
            ['plants:admin'],
            ['plants:admin', 'plants:read', 'plants:write'],
          ] as Scope[][]) {
            const c = await clientAs(h, bob.user, scopes);
            const what = scopes.join(' ');
            insufficientScope(await postToken(h, c.token, {}), `POST with ${what}`);
            insufficientScope(
              await postToken(h, c.token, 'x', { 'content-type': 'text/plain' }),
              `415 after 403: ${what}`,
            );
            insufficientScope(await call(h, c.token, 'GET', '/tokens'), `list with ${what}`);
            insufficientScope(await getToken(h, c.token, target.id), `read with ${what}`);
            insufficientScope(await revoke(h, c.token, target.id), `revoke with ${what}`);
          }
          assert.equal((await viewOf(h, bob.token, target.id)).status, 'active');
          for (const [method, url] of [
            ['GET', '/tokens'],
            ['GET', `/tokens/${target.id}`],
            ['DELETE', `/tokens/${target.id}`],
          ] as const) {
            refusedAs(await call(h, null, method, url), 401, 'missing_token', `${method} ${url}`);
          }
        },
      );
    });

    describe('no escalation', () => {
      it(
        'a scope the maker does not hold: 403 scope_not_held, nothing made; held scopes are fine',
        T,
        async () => {
          const m = await manager(['tokens:manage', 'plants:read']);
          const before = await listedIds(h, m.token);
          for (const body of [
            { scopes: ['plants:admin'] },
            { scopes: ['plants:write'] },
            { scopes: ['plants:read', 'plants:admin'] },
            { scopes: ['plants:read', 'plants:write'] },
            {}, // the default scopes include plants:write, which this maker lacks
            { scopes: ['plants:admin'], name: 'sneaky', expiresIn: '1h' },
          ]) {
            notHeld(await postToken(h, m.token, body), '/scopes', JSON.stringify(body));
          }
          assert.deepEqual(await listedIds(h, m.token), before, 'nothing was made');
          // What it holds, it may give, tokens:manage included.
          const ok = await made(h, m.token, { scopes: ['plants:read', 'tokens:manage'] });
          assert.deepEqual([...ok.scopes].sort(), ['plants:read', 'tokens:manage']);
          const again = await made(h, ok.token, { scopes: ['plants:read'] });
          assert.equal(again.user, m.user);
        },
      );

      it(
        'another user without plants:admin: 403 scope_not_held, nothing made for either; its own name is fine',
        T,
        async () => {
          const m = await manager();
          const other = await manager();
          const mine = await listedIds(h, m.token);
          const theirs = await listedIds(h, other.token);
          notHeld(await postToken(h, m.token, { user: other.user }), '/user');
          notHeld(await postToken(h, m.token, { user: other.user, scopes: ['plants:read'] }), '/user');
          notHeld(await postToken(h, m.token, { user: uniqueUser('nobody-yet') }), '/user');
          assert.deepEqual(await listedIds(h, m.token), mine);
          assert.deepEqual(await listedIds(h, other.token), theirs);
          const own = await made(h, m.token, { user: m.user });
          assert.equal(own.user, m.user);
        },
      );

      it(
        'a maker that expires in 1h: 2h is 403 scope_not_held, 30m is fine, none gets the maker’s own expiry',
        T,
        async () => {
          const root = await manager();
          const maker = await made(h, root.token, { scopes: MANAGE, expiresIn: '1h' });
          assert.equal(Date.parse(maker.expiresAt!) - Date.parse(maker.createdAt), HOUR);
          assert.equal((await me(h, maker.token)).json().expiresAt, maker.expiresAt);
          const before = await listedIds(h, root.token);
          for (const expiresIn of ['2h', '61m', '1d', '3601s']) {
            notHeld(await postToken(h, maker.token, { expiresIn }), '/expiresIn', expiresIn);
          }
          assert.deepEqual(await listedIds(h, root.token), before, 'nothing was made');
          const short = await made(h, maker.token, { expiresIn: '30m' });
          assert.equal(Date.parse(short.expiresAt!) - Date.parse(short.createdAt), 30 * MINUTE);
          for (const body of [{}, { expiresIn: null }, { scopes: MANAGE }]) {
            const bounded = await made(h, maker.token, body);
            assert.equal(bounded.expiresAt, maker.expiresAt, JSON.stringify(body));
            assert.equal((await me(h, bounded.token)).json().expiresAt, maker.expiresAt);
          }
          // A grandchild is bound by the same end.
          const child = await made(h, maker.token, { scopes: MANAGE });
          notHeld(await postToken(h, child.token, { expiresIn: '2h' }), '/expiresIn');
          assert.equal((await made(h, child.token)).expiresAt, maker.expiresAt);
        },
      );

      it(
        'a maker revoked in the store a moment ago makes and revokes nothing, though its verdict is cached',
        T,
        async () => {
          const m = await manager();
          const victim = await made(h, m.token);
          // Cached now (for 60 s in this harness).
          assert.equal((await call(h, m.token, 'GET', '/tokens')).statusCode, 200);
          // Revoked by someone else (another instance, the command line): only the store knows.
          assert.deepEqual(await h.store.revokeToken(m.tokenId, new Date()), { ok: true });
          invalidToken(await postToken(h, m.token, {}), 'POST');
          invalidToken(await revoke(h, m.token, victim.id), 'DELETE');
          const rows = await h.store.pageTokens({ user: m.user, before: null, limit: 100 });
          assert.deepEqual(rows.map((r) => r.id).sort(), [m.tokenId, victim.id].sort(), 'nothing made');
          assert.equal(rows.find((r) => r.id === victim.id)!.revokedAt, null, 'nothing revoked');
          // And refused everywhere from then on, reads included (the refetch was cached).
          invalidToken(await call(h, m.token, 'GET', '/tokens'), 'GET after the refusal');
        },
      );

      it('a maker revoked over HTTP by a sibling token is refused (401) on its next request', T, async () => {
        const m = await manager();
        const maker = await made(h, m.token, { scopes: MANAGE });
        assert.equal((await postToken(h, maker.token, {})).statusCode, 201);
        assert.equal((await revoke(h, m.token, maker.id)).statusCode, 204);
        const before = await listedIds(h, m.token);
        invalidToken(await postToken(h, maker.token, {}));
        invalidToken(await call(h, maker.token, 'GET', '/tokens'));
        assert.deepEqual(await listedIds(h, m.token), before, 'nothing was made');
      });

      it(
        'an expired maker is refused with 401, and so is the token it made without a lifetime',
        T,
        async () => {
          const m = await manager();
          const { record, secret } = await createToken(h.store, {
            user: m.user,
            scopes: MANAGE,
            name: 'short-lived',
            expiresInMs: 1500,
          });
          const child = await made(h, secret);
          assert.equal(child.expiresAt, record.expiresAt!.toISOString(), 'it ends with its maker');
          await until('the maker to expire', async () => (await me(h, secret)).statusCode === 401, 10_000);
          const before = await listedIds(h, m.token);
          invalidToken(await postToken(h, secret, {}), 'POST by an expired maker');
          invalidToken(await call(h, secret, 'GET', '/tokens'), 'GET by an expired maker');
          invalidToken(await me(h, child.token), 'its child');
          assert.deepEqual(await listedIds(h, m.token), before, 'nothing was made');
          assert.equal((await viewOf(h, m.token, record.id)).status, 'expired');
          assert.equal((await viewOf(h, m.token, child.id)).status, 'expired');
        },
      );

      it(
        'an admin (plants:admin + tokens:manage) makes tokens for another user with any scopes',
        T,
        async () => {
          const admin = await manager(ADMIN);
          const bob = uniqueUser('bob');
          const all: Scope[] = ['plants:read', 'plants:write', 'plants:admin', 'tokens:manage'];
          const t = await made(h, admin.token, { user: bob, scopes: all, name: 'for bob', expiresIn: '1d' });
          assert.equal(t.user, bob);
          assert.deepEqual([...t.scopes].sort(), [...all].sort());
          const who = (await me(h, t.token)).json();
          assert.equal(who.user, bob);
          assert.deepEqual(who.scopes, [...all].sort());
          const plain = await made(h, admin.token, { user: bob });
          assert.deepEqual(plain.scopes, ['plants:read', 'plants:write']);
          assert.equal(plain.expiresAt, null);
          // Scopes it does not hold itself, for itself too.
          const self = await made(h, admin.token, { scopes: ['plants:read'] });
          assert.equal(self.user, admin.user);
          // Bob's token, made by the admin, is bob's: bob's own manager lists it.
          assert.ok((await listedIds(h, t.token)).includes(plain.id));
        },
      );

      it(
        'an admin that expires is bound by its expiry too, for every user: a longer life is 403',
        T,
        async () => {
          const root = await manager(ADMIN);
          const admin = await made(h, root.token, { scopes: ADMIN, expiresIn: '1h' });
          const bob = uniqueUser('bob');
          notHeld(await postToken(h, admin.token, { user: bob, expiresIn: '2h' }), '/expiresIn');
          notHeld(await postToken(h, admin.token, { expiresIn: '2h' }), '/expiresIn');
          assert.deepEqual(await listedIds(h, root.token, `&user=${bob}`), [], 'nothing was made');
          const forBob = await made(h, admin.token, { user: bob, scopes: ['plants:admin'] });
          assert.equal(forBob.expiresAt, admin.expiresAt, 'no lifetime: the admin’s own expiry');
        },
      );

      it('duplicate scopes are given once', T, async () => {
        const m = await manager();
        const t = await made(h, m.token, { scopes: ['plants:read', 'plants:read'] });
        assert.deepEqual(t.scopes, ['plants:read']);
        assert.deepEqual((await me(h, t.token)).json().scopes, ['plants:read']);
      });
    });

    describe('GET /tokens', () => {
      it(
        'newest first, never a secret, paged by Link: limit=2 shows every token exactly once',
        T,
        async () => {
          const m = await manager();
          const made6: string[] = [m.tokenId];
          for (let i = 0; i < 5; i++) made6.push((await made(h, m.token, { name: `n${i}` })).id);
          const { pages, links, tokens } = await walk(h, m.token, '/tokens?limit=2');
          assert.deepEqual(
            pages.map((p) => p.length),
            [2, 2, 2],
          );
          assert.equal(links.length, 2, 'no Link on the last page');
          for (const l of links) assert.match(l, /^\/tokens\?limit=2&cursor=[A-Za-z0-9_-]+$/);
          const ids = tokens.map((t) => t.id);
          assert.equal(new Set(ids).size, ids.length, `a token listed twice: ${ids}`);
          assert.deepEqual([...ids].sort(), [...made6].sort());
          assertMadeOrder(tokens, made6);
          for (const t of tokens) {
            assert.deepEqual(Object.keys(t).sort(), VIEW_KEYS);
            assert.equal(t.user, m.user);
            assert.equal(t.status, 'active');
          }
          // One page of all: the same order.
          assert.deepEqual(await listedIds(h, m.token), ids);
          const first = await call(h, m.token, 'GET', '/tokens');
          assert.equal(first.headers.link, undefined, 'the default limit (100) holds them all');
          assert.deepEqual(
            first.json().map((t: View) => t.id),
            ids,
          );
        },
      );

      for (const q of [
        'limit=0',
        'limit=1001',
        'limit=x',
        'limit=',
        'limit=-1',
        'limit=1.5',
        'limit=01',
        'limit=2&limit=3',
      ]) {
        it(`400 invalid_parameter for ${q}`, T, async () => {
          const m = await manager();
          const res = await call(h, m.token, 'GET', `/tokens?${q}`);
          refusedAs(res, 400, 'invalid_parameter', q);
          assert.match(errorBody(res).message, /limit/);
        });
      }

      it(
        'tokens made in the same millisecond are each listed exactly once, newest first as made, whatever the page size',
        T,
        async () => {
          const m = await manager();
          const at = new Date(Date.now() - MINUTE);
          const ties = [m.tokenId];
          for (let i = 0; i < 7; i++) {
            const t = await createToken(
              h.store,
              { user: m.user, scopes: ['plants:read'], name: `tie${i}`, expiresInMs: null },
              at,
            );
            ties.push(t.record.id);
          }
          const all = await listedIds(h, m.token);
          assert.deepEqual(all, [...ties].reverse(), 'the order they were made in, newest first');
          for (const limit of [1, 2, 3, 7]) {
            const { tokens } = await walk(h, m.token, `/tokens?limit=${limit}`);
            assert.deepEqual(
              tokens.map((t) => t.id),
              all,
              `limit=${limit}: the pages together are the one-page list`,
            );
          }
        },
      );

      it('limit 1 and 1000 are fine; an unknown query parameter is 400', T, async () => {
        const m = await manager();
        assert.equal((await call(h, m.token, 'GET', '/tokens?limit=1')).statusCode, 200);
        assert.equal((await call(h, m.token, 'GET', '/tokens?limit=1000')).statusCode, 200);
        refusedAs(await call(h, m.token, 'GET', '/tokens?bogus=1'), 400, 'invalid_parameter');
      });

      it(
        'a bad cursor is 400 invalid_cursor, as is one issued to another user or for another user filter',
        T,
        async () => {
          const alice = await manager();
          const bob = await manager();
          for (const c of [alice, bob]) {
            await made(h, c.token);
            await made(h, c.token);
          }
          const aliceFirst = await call(h, alice.token, 'GET', '/tokens?limit=1');
          const aliceNext = nextOf(aliceFirst)!;
          assert.ok(aliceNext, 'alice has a second page');
          const cursor = new URL(aliceNext, 'http://x').searchParams.get('cursor')!;
          const forged = Buffer.from(`1.${Date.now()}.tok_AAAAAAAAAAAA.AAAAAAAAAAAAAAAA`).toString(
            'base64url',
          );
          for (const bad of ['nope', '!!', 'x'.repeat(300), forged, `${cursor}x`, cursor.slice(0, -2)]) {
            const res = await call(h, alice.token, 'GET', `/tokens?cursor=${encodeURIComponent(bad)}`);
            refusedAs(res, 400, 'invalid_cursor', bad.slice(0, 40));
          }
          // Not a cursor's shape at all (empty, too long for any cursor): the parameter is invalid.
          for (const bad of ['', 'x'.repeat(513)]) {
            refusedAs(await call(h, alice.token, 'GET', `/tokens?cursor=${bad}`), 400, 'invalid_parameter');
          }
          // Alice's cursor, shown by bob: refused (bob sees nothing of alice's listing).
          refusedAs(
            await call(h, bob.token, 'GET', `/tokens?cursor=${cursor}`),
            400,
            'invalid_cursor',
            'bob',
          );
          // Alice's own is fine for her, with or without naming herself (the same listing).
          assert.equal((await call(h, alice.token, 'GET', aliceNext)).statusCode, 200);
          // An admin's cursors belong to the user filter they were issued for.
          const admin = await manager(ADMIN);
          refusedAs(await call(h, admin.token, 'GET', `/tokens?cursor=${cursor}`), 400, 'invalid_cursor');
          const forBob = nextOf(await call(h, admin.token, 'GET', `/tokens?limit=1&user=${bob.user}`))!;
          const bobCursor = new URL(forBob, 'http://x').searchParams.get('cursor')!;
          refusedAs(await call(h, admin.token, 'GET', `/tokens?cursor=${bobCursor}`), 400, 'invalid_cursor');
          refusedAs(
            await call(h, admin.token, 'GET', `/tokens?cursor=${bobCursor}&user=${alice.user}`),
            400,
            'invalid_cursor',
          );
          const all = nextOf(await call(h, admin.token, 'GET', '/tokens?limit=1'))!;
          const allCursor = new URL(all, 'http://x').searchParams.get('cursor')!;
          refusedAs(
            await call(h, admin.token, 'GET', `/tokens?cursor=${allCursor}&user=${bob.user}`),
            400,
            'invalid_cursor',
          );
          assert.equal((await call(h, admin.token, 'GET', forBob)).statusCode, 200);
        },
      );

      it(
        'a non-admin sees only its own user’s tokens; user=<other> is 403 scope_not_held, user=<self> is fine',
        T,
        async () => {
          const alice = await manager();
          const bob = await manager();
          const a = [alice.tokenId, (await made(h, alice.token)).id, (await made(h, alice.token)).id];
          const b = [bob.tokenId, (await made(h, bob.token)).id];
          assert.deepEqual([...(await listedIds(h, alice.token))].sort(), [...a].sort());
          assert.deepEqual([...(await listedIds(h, bob.token))].sort(), [...b].sort());
          notHeld(await call(h, alice.token, 'GET', `/tokens?user=${bob.user}`), '/user');
          notHeld(await call(h, alice.token, 'GET', `/tokens?user=${uniqueUser('ghost')}`), '/user');
          const self = await walk(h, alice.token, `/tokens?limit=1&user=${alice.user}`);
          assert.deepEqual(
            self.tokens.map((t) => t.id),
            await listedIds(h, alice.token),
          );
          for (const l of self.links) assert.ok(l.endsWith(`&user=${encodeURIComponent(alice.user)}`), l);
        },
      );

      it(
        'an admin sees every user’s tokens, and with user=<bob> only bob’s; the Link repeats user=',
        T,
        async () => {
          const admin = await manager(ADMIN);
          const alice = await manager();
          // A name that needs encoding in a query string.
          const bob = `bob&x=1+y#${randomUUID().slice(0, 6)}`;
          const bobs = [
            (await made(h, admin.token, { user: bob })).id,
            (await made(h, admin.token, { user: bob })).id,
            (await made(h, admin.token, { user: bob })).id,
          ];
          const everyone = await walk(h, admin.token, '/tokens?limit=1000');
          const ids = everyone.tokens.map((t) => t.id);
          assert.equal(new Set(ids).size, ids.length);
          for (const id of [...bobs, alice.tokenId, admin.tokenId]) assert.ok(ids.includes(id), id);
          assert.ok(new Set(everyone.tokens.map((t) => t.user)).size >= 3);
          assertMadeOrder(everyone.tokens, [admin.tokenId, alice.tokenId, ...bobs]);

          const onlyBob = await walk(h, admin.token, `/tokens?limit=1&user=${encodeURIComponent(bob)}`);
          assert.deepEqual(onlyBob.tokens.map((t) => t.id).sort(), [...bobs].sort());
          assertMadeOrder(onlyBob.tokens, bobs);
          assert.ok(onlyBob.tokens.every((t) => t.user === bob));
          assert.equal(onlyBob.links.length, 2);
          for (const l of onlyBob.links) assert.ok(l.endsWith(`&user=${encodeURIComponent(bob)}`), l);
          assert.deepEqual(await listedIds(h, admin.token, `&user=${encodeURIComponent(alice.user)}`), [
            alice.tokenId,
          ]);
          assert.deepEqual(await listedIds(h, admin.token, `&user=${uniqueUser('nobody')}`), []);
        },
      );
    });

    describe('GET /tokens/{id}', () => {
      it(
        'one token {id, user, scopes, name, createdAt, expiresAt, lastUsedAt, status}: active, expired, revoked; no secret',
        T,
        async () => {
          const m = await manager();
          const c = await made(h, m.token, { scopes: ['plants:read'], name: 'viewed', expiresIn: '7d' });
          const res = await getToken(h, m.token, c.id);
          assert.equal(res.statusCode, 200);
          assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
          assert.ok(!res.body.includes('pst_'));
          const { token: _secret, ...shown } = c;
          assert.deepEqual(res.json(), { ...shown, lastUsedAt: null, status: 'active' });

          // Expired: made an hour ago for a minute.
          const old = await createToken(
            h.store,
            { user: m.user, scopes: ['plants:read'], name: null, expiresInMs: MINUTE },
            new Date(Date.now() - HOUR),
          );
          const expired = await viewOf(h, m.token, old.record.id);
          assert.equal(expired.status, 'expired');
          assert.equal(expired.expiresAt, old.record.expiresAt!.toISOString());

          assert.equal((await revoke(h, m.token, c.id)).statusCode, 204);
          assert.deepEqual(await viewOf(h, m.token, c.id), { ...shown, lastUsedAt: null, status: 'revoked' });
          // Revoked and expired: revoked.
          assert.equal((await revoke(h, m.token, old.record.id)).statusCode, 204);
          assert.equal((await viewOf(h, m.token, old.record.id)).status, 'revoked');
        },
      );

      it(
        'another user’s token is 404 token_not_found (to an admin, 200); a malformed or unknown id is 404',
        T,
        async () => {
          const alice = await manager();
          const bob = await manager();
          const bobs = await made(h, bob.token);
          refusedAs(await getToken(h, alice.token, bobs.id), 404, 'token_not_found');
          refusedAs(await getToken(h, alice.token, bob.tokenId), 404, 'token_not_found');
          const unknown = await getToken(h, alice.token, 'tok_AAAAAAAAAAAA');
          refusedAs(unknown, 404, 'token_not_found');
          // Another user's and no token at all answer alike.
          assert.deepEqual(unknown.json(), (await getToken(h, alice.token, bobs.id)).json());
          for (const id of [
            'nope',
            'tok_short',
            `tok_${'A'.repeat(13)}`,
            '123',
            bobs.token,
            encodeURIComponent('tok_AAAAAAAAAA/A'),
          ]) {
            const res = await getToken(h, alice.token, id);
            assert.equal(res.statusCode, 404, `${id}: ${res.body}`);
            errorBody(res);
          }
          assert.equal((await call(h, alice.token, 'GET', '/tokens/')).statusCode, 404);
          const admin = await manager(ADMIN);
          assert.equal((await viewOf(h, admin.token, bobs.id)).user, bob.user);
        },
      );
    });

    describe('DELETE /tokens/{id}', () => {
      it(
        '204; the revoked token is refused on its very next request here; revoking again is 204',
        T,
        async () => {
          const m = await manager();
          const c = await made(h, m.token);
          assert.equal((await me(h, c.token)).statusCode, 200, 'used: its verdict is cached');
          const res = await revoke(h, m.token, c.id);
          assert.equal(res.statusCode, 204);
          assert.equal(res.body, '');
          invalidToken(await me(h, c.token), 'the very next request');
          invalidToken(await call(h, c.token, 'GET', '/plants'));
          assert.equal((await revoke(h, m.token, c.id)).statusCode, 204, 'again');
          assert.equal((await viewOf(h, m.token, c.id)).status, 'revoked');
          assert.equal((await me(h, m.token)).statusCode, 200, 'the maker still works');
        },
      );

      it('revoking the token in use is allowed: 204, then that token is refused', T, async () => {
        const m = await manager();
        const sibling = await made(h, m.token, { scopes: MANAGE });
        assert.equal((await revoke(h, m.token, m.tokenId)).statusCode, 204);
        invalidToken(await me(h, m.token));
        invalidToken(await call(h, m.token, 'GET', '/tokens'));
        invalidToken(await revoke(h, m.token, m.tokenId));
        assert.equal((await viewOf(h, sibling.token, m.tokenId)).status, 'revoked');
      });

      it('another user’s token is 404 and still works; an admin may revoke it', T, async () => {
        const alice = await manager();
        const bob = await manager();
        const bobs = await made(h, bob.token);
        refusedAs(await revoke(h, alice.token, bobs.id), 404, 'token_not_found');
        refusedAs(await revoke(h, alice.token, bob.tokenId), 404, 'token_not_found');
        refusedAs(await revoke(h, alice.token, 'tok_AAAAAAAAAAAA'), 404, 'token_not_found');
        refusedAs(await revoke(h, alice.token, 'nope'), 404, 'token_not_found');
        assert.equal((await me(h, bobs.token)).statusCode, 200);
        assert.equal((await me(h, bob.token)).statusCode, 200);
        assert.equal((await viewOf(h, bob.token, bobs.id)).status, 'active');
        const admin = await manager(ADMIN);
        assert.equal((await revoke(h, admin.token, bobs.id)).statusCode, 204);
        invalidToken(await me(h, bobs.token));
      });

      it('405 with Allow for other methods on /tokens and /tokens/{id}', T, async () => {
        const m = await manager();
        for (const method of ['PUT', 'PATCH', 'DELETE'] as const) {
          const res = await call(h, m.token, method, '/tokens', {});
          refusedAs(res, 405, 'method_not_allowed', `${method} /tokens`);
          assert.equal(res.headers.allow, 'GET, HEAD, POST');
        }
        for (const method of ['PUT', 'PATCH', 'POST'] as const) {
          const res = await call(h, m.token, method, `/tokens/${m.tokenId}`, {});
          refusedAs(res, 405, 'method_not_allowed', `${method} /tokens/{id}`);
          assert.equal(res.headers.allow, 'DELETE, GET, HEAD');
        }
        assert.equal((await me(h, m.token)).statusCode, 200, 'nothing was revoked');
      });
    });

    describe('lastUsedAt', () => {
      it('null until the token is used; then the start of the current minute', T, async () => {
        const m = await manager();
        const c = await made(h, m.token);
        // Reading it with another token is not a use of it.
        assert.equal((await viewOf(h, m.token, c.id)).lastUsedAt, null);
        assert.equal((await viewOf(h, m.token, c.id)).lastUsedAt, null);
        const start = Date.now();
        for (let i = 0; i < 5; i++) assert.equal((await me(h, c.token)).statusCode, 200);
        const end = Date.now();
        const used = await until(
          'lastUsedAt to be recorded',
          async () => (await viewOf(h, m.token, c.id)).lastUsedAt ?? undefined,
          10_000,
        );
        assert.ok([minuteOf(start), minuteOf(end)].includes(used), `${used} is not ${minuteOf(start)}`);
        assert.match(used, /:00\.000Z$/);
        // The other tokens of the user were not marked by its use.
        const other = await made(h, m.token);
        assert.equal((await viewOf(h, m.token, other.id)).lastUsedAt, null);
      });
    });
  });

  describe(`tokens made by a JWT (${engine.name})`, { skip: engine.skip }, () => {
    const AUDIENCE = 'https://plantstore.test/api';
    let issuer: TestIssuer;
    let h: Harness;
    before(async () => {
      issuer = await startTestIssuer(AUDIENCE);
      h = await harness(engine, { jwtIssuer: issuer.issuer, jwtAudience: AUDIENCE, authFailureLimit: 0 });
    });
    after(async () => {
      await h?.close();
      await issuer?.close();
    });

    it(
      'a JWT with scope "tokens:manage plants:read" makes a token that ends by its exp; a longer life is 403',
      T,
      async () => {
        const sub = uniqueUser('jwt');
        const exp = Math.floor(Date.now() / 1000) + 600;
        const jwt = await issuer.sign({ sub, scope: 'tokens:manage plants:read', exp });
        const end = new Date(exp * 1000).toISOString();
        const t = await made(h, jwt, { scopes: ['plants:read'] });
        assert.equal(t.user, sub);
        assert.equal(t.expiresAt, end, 'no lifetime: the JWT’s own exp');
        const who = (await me(h, t.token)).json();
        assert.deepEqual(who, {
          user: sub,
          scopes: ['plants:read'],
          kind: 'token',
          tokenId: t.id,
          expiresAt: end,
        });
        const short = await made(h, jwt, { scopes: ['plants:read'], expiresIn: '5m' });
        assert.ok(Date.parse(short.expiresAt!) <= exp * 1000);
        assert.equal(Date.parse(short.expiresAt!) - Date.parse(short.createdAt), 5 * MINUTE);

        const before = await listedIds(h, jwt);
        notHeld(await postToken(h, jwt, { scopes: ['plants:read'], expiresIn: '1h' }), '/expiresIn');
        notHeld(await postToken(h, jwt, {}), '/scopes', 'the defaults need plants:write');
        notHeld(await postToken(h, jwt, { scopes: ['plants:admin'] }), '/scopes');
        notHeld(await postToken(h, jwt, { user: uniqueUser('other'), scopes: ['plants:read'] }), '/user');
        assert.deepEqual(await listedIds(h, jwt), before, 'nothing was made');
        assert.deepEqual([...before].sort(), [t.id, short.id].sort(), 'the JWT lists its user’s tokens');
        // It revokes them too.
        assert.equal((await revoke(h, jwt, short.id)).statusCode, 204);
        invalidToken(await me(h, short.token));
      },
    );

    it('a JWT past its exp but inside the clock leeway is accepted, yet makes no token', T, async () => {
      const sub = uniqueUser('jwt');
      const jwt = await issuer.sign({
        sub,
        scope: 'tokens:manage plants:read',
        exp: Math.floor(Date.now() / 1000) - 10,
      });
      assert.equal((await me(h, jwt)).statusCode, 200, 'within the 30 s leeway');
      notHeld(await postToken(h, jwt, { scopes: ['plants:read'] }), '/expiresIn');
      assert.deepEqual(await listedIds(h, jwt), [], 'nothing was made');
    });

    it('a JWT without tokens:manage gets 403 insufficient_scope on /tokens', T, async () => {
      const jwt = await issuer.sign({
        sub: uniqueUser('jwt'),
        scope: 'plants:read plants:write plants:admin',
      });
      insufficientScope(await postToken(h, jwt, { scopes: ['plants:read'] }));
      insufficientScope(await call(h, jwt, 'GET', '/tokens'));
    });
  });

  describe(`token audit log, secrets and metrics (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    const lines: string[] = [];
    before(async () => {
      h = await harness(
        engine,
        { authFailureLimit: 0, logLevel: 'trace', metrics: true },
        { logStream: { write: (l: string) => void lines.push(l) }, lastUsedFlushMs: 20 },
      );
    });
    after(() => h?.close());

    const auditLines = () =>
      lines
        .map((l) => JSON.parse(l) as { level: number; msg: string; audit?: Record<string, unknown> })
        .filter((l) => l.msg === 'token created' || l.msg === 'token revoked');
    const metric = async (action: string) => {
      const text = (await h.app.inject('/metrics')).body;
      const m = new RegExp(`^plantstore_token_changes_total\\{action="${action}"\\} ([0-9]+)$`, 'm').exec(
        text,
      );
      return m ? Number(m[1]) : 0;
    };

    it(
      'every creation and revocation logs one info line with its audit entry, and counts in GET /metrics',
      T,
      async () => {
        const createdBefore = await metric('created');
        const revokedBefore = await metric('revoked');
        const m = await h.user(MANAGE);
        const admin = await h.user(ADMIN);
        const bob = uniqueUser('bob');
        // Each change's answer, to match its audit line by the request id.
        const rid = (res: LightMyRequestResponse) => String(res.headers['x-request-id']);
        const create = async (secret: string, body: unknown) => {
          const res = await postToken(h, secret, body);
          assert.equal(res.statusCode, 201, res.body);
          return { ...(res.json() as Created), requestId: rid(res) };
        };
        const a = await create(m.token, { scopes: ['plants:read'], name: 'audited', expiresIn: '1d' });
        const b = await create(m.token, {});
        const c = await create(admin.token, { user: bob, scopes: ['plants:admin'] });
        // Refused attempts are neither logged as changes nor counted.
        notHeld(await postToken(h, m.token, { scopes: ['plants:admin'] }), '/scopes');
        refusedAs(await postToken(h, m.token, { bogus: 1 }), 400, 'invalid_body');
        refusedAs(await revoke(h, m.token, c.id), 404, 'token_not_found');
        const revokeA = await revoke(h, m.token, a.id);
        assert.equal(revokeA.statusCode, 204);
        assert.equal((await revoke(h, m.token, a.id)).statusCode, 204, 'again: no second line');
        const revokeC = await revoke(h, admin.token, c.id);
        assert.equal(revokeC.statusCode, 204);

        const byM = { kind: 'token', user: m.user, tokenId: m.tokenId };
        const byAdmin = { kind: 'token', user: admin.user, tokenId: admin.tokenId };
        const ours = new Set([a.id, b.id, c.id]);
        const got = auditLines().filter((l) => ours.has(String(l.audit?.tokenId)));
        assert.ok(
          got.every((l) => l.level === 30),
          'info lines',
        );
        const line = (
          action: 'created' | 'revoked',
          by: object,
          t: { id: string; user: string; scopes: string[]; expiresAt: string | null },
          requestId: string,
        ) => ({
          msg: `token ${action}`,
          audit: {
            action,
            by,
            tokenId: t.id,
            user: t.user,
            scopes: t.scopes,
            expiresAt: t.expiresAt,
            requestId,
          },
        });
        assert.deepEqual(
          got.map((l) => ({ msg: l.msg, audit: l.audit })),
          [
            line('created', byM, a, a.requestId),
            line('created', byM, b, b.requestId),
            line('created', byAdmin, c, c.requestId),
            line('revoked', byM, a, rid(revokeA)),
            line('revoked', byAdmin, c, rid(revokeC)),
          ],
        );
        assert.deepEqual(
          [a.user, a.scopes, b.user, b.scopes, c.user, c.scopes],
          [m.user, ['plants:read'], m.user, ['plants:read', 'plants:write'], bob, ['plants:admin']],
        );
        assert.equal((await metric('created')) - createdBefore, 3);
        assert.equal((await metric('revoked')) - revokedBefore, 2);
      },
    );

    it(
      'no log line (at trace), list body, error body or header carries a secret made in the test',
      T,
      async () => {
        const m = await h.user(MANAGE);
        const admin = await h.user(ADMIN);
        const answers: LightMyRequestResponse[] = [];
        const made201: { res: LightMyRequestResponse; secret: string }[] = [];
        const keep = async (p: Promise<LightMyRequestResponse>) => {
          const res = await p;
          answers.push(res);
          return res;
        };
        const make = async (secret: string, body: unknown) => {
          const res = await postToken(h, secret, body);
          assert.equal(res.statusCode, 201, res.body);
          const c: Created = res.json();
          made201.push({ res, secret: c.token });
          return c;
        };
        const t1 = await make(m.token, { name: 'one' });
        const t2 = await make(m.token, { scopes: ['plants:read'], name: 'two' });
        const t3 = await make(m.token, { scopes: MANAGE, expiresIn: '1h' });
        const t4 = await make(admin.token, { user: uniqueUser('bob') });
        const secrets = [m.token, admin.token, t1.token, t2.token, t3.token, t4.token];

        // Used, listed, read.
        await keep(me(h, t1.token));
        await keep(call(h, t1.token, 'POST', '/plants', { name: 'quiet' }));
        await keep(call(h, m.token, 'GET', '/tokens'));
        await keep(call(h, admin.token, 'GET', '/tokens?limit=1000'));
        const page = await keep(call(h, m.token, 'GET', '/tokens?limit=1'));
        await keep(call(h, m.token, 'GET', nextOf(page)!));
        for (const t of [t1, t2, t3, t4]) await keep(getToken(h, admin.token, t.id));
        await keep(getToken(h, t3.token, t1.id));
        // Failed attempts, some with a secret where an id, a cursor or a user goes.
        await keep(call(h, t2.token, 'POST', '/plants', { name: 'no' }));
        await keep(call(h, t2.token, 'GET', '/tokens'));
        await keep(postToken(h, m.token, { scopes: ['plants:admin'] }));
        await keep(postToken(h, t3.token, { expiresIn: '2h' }));
        await keep(postToken(h, m.token, { user: 'someone-else' }));
        await keep(postToken(h, m.token, { bogus: true }));
        await keep(postToken(h, m.token, { expiresIn: '2x' }));
        await keep(postToken(h, m.token, 'x', { 'content-type': 'text/plain' }));
        await keep(postToken(h, m.token, { name: 'x'.repeat(20_000) }));
        await keep(getToken(h, m.token, t1.token));
        await keep(revoke(h, m.token, t4.token));
        await keep(call(h, m.token, 'GET', `/tokens?cursor=${t1.token}`));
        await keep(call(h, m.token, 'GET', `/tokens?user=${t1.token}`));
        await keep(call(h, m.token, 'GET', `/tokens?limit=${t1.token}`));
        await keep(getToken(h, m.token, t4.id));
        await keep(h.app.inject({ url: '/tokens', headers: { authorization: `Bearer ${t1.token}x` } }));
        await keep(h.app.inject({ url: '/tokens', headers: { authorization: `Basic ${t1.token}` } }));
        await keep(h.app.inject({ url: `/tokens?access_token=${t3.token}` }));
        await keep(h.app.inject({ url: `/tokens?token=${t3.token}` }));
        // Revocations, and the revoked tokens' next use.
        await keep(revoke(h, m.token, t1.id));
        await keep(revoke(h, m.token, t1.id));
        await keep(revoke(h, admin.token, t4.id));
        await keep(me(h, t1.token));
        await keep(postToken(h, t1.token, {}));
        await keep(h.app.inject('/metrics'));
        await h.app.inject({ url: '/readyz' });
        assert.deepEqual(
          answers.map((a) => a.statusCode),
          [
            200,
            201,
            200,
            200,
            200,
            200,
            200,
            200,
            200,
            200,
            200, //
            403,
            403,
            403,
            403,
            403,
            400,
            400,
            415,
            413,
            404,
            404,
            400,
            403,
            400,
            404,
            401,
            401,
            401,
            401,
            204,
            204,
            204,
            401,
            401,
            200,
          ],
        );
        // Once each made token's lastUsedAt is written, every log line it causes is in.
        await until(
          't1’s use to be recorded',
          async () => (await viewOf(h, admin.token, t1.id)).lastUsedAt ?? undefined,
        );

        // Each secret is in the one answer that made it, once, and nowhere else.
        for (const { res, secret } of made201) {
          assert.equal(res.body.split(secret).length, 2, 'the 201 shows its secret once');
          assert.equal(res.body.split('pst_').length, 2, 'and no other');
        }
        const shown = [
          ...made201.map(
            ({ res }) => `${JSON.stringify(res.headers)}\n${res.body.replace(/"token":"pst_[^"]+"/, '')}`,
          ),
          ...answers.map((a) => `${JSON.stringify(a.headers)}\n${a.body}`),
        ].join('\n');
        const logged = lines.join('');
        assert.ok(lines.length > 50, 'the requests were logged at trace');
        assert.ok(logged.includes('"token created"') && logged.includes('"token revoked"'));
        for (const secret of secrets) {
          for (const [where, text] of [
            ['an answer', shown],
            ['the log', logged],
          ] as const) {
            assert.ok(!text.includes(secret), `a secret appeared in ${where}`);
            assert.ok(!text.includes(secret.slice(4)), `a secret's body appeared in ${where}`);
            assert.ok(!text.includes(secret.slice(4, 24)), `a long piece of a secret appeared in ${where}`);
          }
        }
      },
    );
  });
}
