// Contract 3.3: no escalation. A new token never holds more than its maker: no scope it lacks,
// no other user without plants:admin, no longer life (a JWT's exp included), no token from a
// maker revoked or expired a moment ago; an admin makes tokens for anyone within its own expiry;
// on every engine.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createToken } from '../../src/identity/tokens.js';
import type { Scope } from '../../src/schemas/token.js';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { startTestIssuer, type TestIssuer } from '../helpers/issuer.js';
import {
  ADMIN,
  call,
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
  revoke,
  tokensOverHttp,
  uniqueUser,
  viewOf,
} from '../helpers/tokens.js';
import { until } from '../helpers/wait.js';

const T = { timeout: 30_000 };

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
