// Contract 3.3: one token. GET /tokens/{id} (active, expired, revoked; another user's 404 but
// to an admin), DELETE /tokens/{id} (refused on its very next request, the token in use too,
// another user's 404 but to an admin), 405 with Allow, and lastUsedAt to the minute; on every
// engine.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createToken } from '../../src/identity/tokens.js';
import { errorBody } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  ADMIN,
  call,
  getToken,
  HOUR,
  invalidToken,
  MANAGE,
  MINUTE,
  made,
  me,
  refusedAs,
  revoke,
  tokensOverHttp,
  viewOf,
} from '../helpers/tokens.js';
import { until } from '../helpers/wait.js';

const T = { timeout: 30_000 };
const minuteOf = (ms: number) => new Date(ms - (ms % MINUTE)).toISOString();

for (const engine of ENGINES) {
  describe(`tokens over HTTP (${engine.name})`, { skip: engine.skip }, () => {
    const { h, manager } = tokensOverHttp(engine);

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
}
