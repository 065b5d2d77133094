// Contract 3.3: POST /tokens behind tokens:manage. The answer (exactly its fields, the secret
// once, no-store, Location) and its defaults, the new token at work (GET /me, plants), a read-only
// token's 403 on every write, the body rules, and 401/403 for a caller without a token or without
// tokens:manage; on every engine.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Scope } from '../../src/schemas/token.js';
import { clientAs, errorBody, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  CREATED_KEYS,
  type Created,
  call,
  getToken,
  HOUR,
  insufficientScope,
  invalidToken,
  listedIds,
  made,
  me,
  postToken,
  REALM,
  refusedAs,
  revoke,
  SECRET,
  TOKEN_ID,
  tokensOverHttp,
  viewOf,
} from '../helpers/tokens.js';

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
