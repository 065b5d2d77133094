import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createToken } from '../../src/identity/tokens.js';
import { errorBody, type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { startTestIssuer, type TestIssuer } from '../helpers/issuer.js';
import { until } from '../helpers/wait.js';

const AUDIENCE = 'https://plantstore.test/api';

for (const engine of ENGINES) {
  describe(`GET /me (${engine.name})`, { skip: engine.skip }, () => {
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

    const me = (token: string) =>
      h.app.inject({ method: 'GET', url: '/me', headers: { authorization: `Bearer ${token}` } });

    it('a built-in token: its user, scopes as an array, kind token, its id and expiry (null: never)', async () => {
      const c = await h.user();
      const res = await me(c.token);
      assert.equal(res.statusCode, 200, res.body);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      assert.deepEqual(res.json(), {
        user: c.user,
        scopes: ['plants:read', 'plants:write'],
        kind: 'token',
        tokenId: c.tokenId,
        expiresAt: null,
      });
      const at = new Date(Date.now() + 3_600_000);
      const { record, secret } = await createToken(h.store, {
        user: 'reader',
        scopes: ['plants:read'],
        name: null,
        expiresInMs: 3_600_000,
      });
      const body = (await me(secret)).json();
      assert.deepEqual(body.scopes, ['plants:read']);
      assert.equal(body.tokenId, record.id);
      assert.equal(body.expiresAt, record.expiresAt!.toISOString());
      assert.ok(Math.abs(Date.parse(body.expiresAt) - at.getTime()) < 60_000);
    });

    it('needs no scope: a token with none of the plant scopes still learns who it is', async () => {
      const { secret } = await createToken(h.store, {
        user: 'nobody',
        scopes: [],
        name: null,
        expiresInMs: null,
      });
      const res = await me(secret);
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json().scopes, []);
      assert.equal(
        (
          await h.app.inject({
            method: 'GET',
            url: '/plants',
            headers: { authorization: `Bearer ${secret}` },
          })
        ).statusCode,
        403,
      );
    });

    it('a JWT: its user, scopes, kind jwt and exp; no token id', async () => {
      const exp = Math.floor(Date.now() / 1000) + 600;
      const token = await issuer.sign({ sub: 'jwt-user', scope: 'plants:read plants:admin', exp });
      const res = await me(token);
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json(), {
        user: 'jwt-user',
        scopes: ['plants:admin', 'plants:read'],
        kind: 'jwt',
        expiresAt: new Date(exp * 1000).toISOString(),
      });
    });

    it('no token, or a bad one, is 401 with the challenge; another method is 405 before any token check', async () => {
      const none = await h.app.inject({ method: 'GET', url: '/me' });
      assert.equal(none.statusCode, 401);
      assert.match(String(none.headers['www-authenticate']), /^Bearer realm="plantstore"/);
      const bad = await me('pst_not-a-real-token-at-all-not-a-real-token-at-all');
      assert.equal(bad.statusCode, 401);
      assert.equal(errorBody(bad).code, 'invalid_token');
      const post = await h.app.inject({ method: 'POST', url: '/me' });
      assert.equal(post.statusCode, 405);
      assert.equal(post.headers.allow, 'GET, HEAD');
    });

    it('a revoked token is 401 on /me within 5 s, as everywhere', async () => {
      const c = await h.user();
      assert.equal((await me(c.token)).statusCode, 200);
      await h.store.revokeToken(c.tokenId, new Date());
      await until('the revoked token refused', async () => (await me(c.token)).statusCode === 401, 5_000);
    });
  });
}
