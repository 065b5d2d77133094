// Contract 3.3: GET /tokens. Newest first as made, paged by Link with every token exactly once
// (also many made in one millisecond), the parameter and cursor rules, and whose tokens a caller
// sees (its own user's; an admin everyone's, or one user's with user=); never a secret; on every
// engine.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { createToken } from '../../src/identity/tokens.js';
import { errorBody } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  ADMIN,
  call,
  listedIds,
  MINUTE,
  made,
  nextOf,
  notHeld,
  refusedAs,
  tokensOverHttp,
  uniqueUser,
  type View,
  walk,
} from '../helpers/tokens.js';

const T = { timeout: 30_000 };
const VIEW_KEYS = ['createdAt', 'expiresAt', 'id', 'lastUsedAt', 'name', 'scopes', 'status', 'user'];

/**
 * Newest first: the tokens of `order` (as they were made) come in the reverse of that order, by when
 * they were made, not by createdAt (several may share a millisecond, and tests backdate some).
 */
function assertMadeOrder(tokens: View[], order: string[]): void {
  const listed = tokens.map((t) => t.id).filter((id) => order.includes(id));
  assert.deepEqual(listed, [...order].reverse(), 'newest first, in the order the tokens were made');
}

for (const engine of ENGINES) {
  describe(`tokens over HTTP (${engine.name})`, { skip: engine.skip }, () => {
    const { h, manager } = tokensOverHttp(engine);

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
  });
}
