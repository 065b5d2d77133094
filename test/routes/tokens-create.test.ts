// Contract 3.3: POST /tokens behind tokens:manage. The answer (exactly its fields, the secret
// once, no-store, Location) and its defaults, the new token at work (GET /me, plants), a read-only
// token's 403 on every write, the body rules, and 401/403 for a caller without a token or without
// tokens:manage; on every engine.
//
// Contract 3.3: no escalation. A new token never holds more than its maker: no scope it lacks,
// no other user without plants:admin, no longer life (a JWT's exp included), no token from a
// maker revoked or expired a moment ago; an admin makes tokens for anyone within its own expiry;
// on every engine.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createToken } from '../../src/identity/tokens.js';
import type { Scope } from '../../src/schemas/token.js';
import { clientAs, errorBody, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { startTestIssuer, type TestIssuer } from '../helpers/issuer.js';
import {
  ADMIN,
  CREATED_KEYS,
  type Created,
  call,
  getToken,
  HOUR,
  insufficientScope,
  invalidToken,
  listedIds,
  MANAGE,
  MINUTE,
  made,
  me,
  notHeld,
  postToken,
  REALM,
  refusedAs,
  revoke,
  SECRET,
  TOKEN_ID,
  tokensOverHttp,
  uniqueUser,
  viewOf,
} from '../helpers/tokens.js';
import { until } from '../helpers/wait.js';

const T = { timeout: 30_000 };

for (const engine of ENGINES) {
  describe(`tokens over HTTP (${engine.name})`, { skip: engine.skip }, () => {
    const { h, manager } = tokensOverHttp(engine);

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
            [{ name: '\u200b\u2060' }, '/name'],
            [{ name: 'ci\ud800' }, '/name'],
            [{ user: 'bob\udc00' }, '/user'],
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
  });
}

for (const engine of ENGINES) {
  describe(`tokens over HTTP (${engine.name})`, { skip: engine.skip }, () => {
    const { h, manager } = tokensOverHttp(engine);

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
}
