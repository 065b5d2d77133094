// Contract 3.3: GET /tokens. Newest first as made, paged by Link with every token exactly once
// (also many made in one millisecond), the parameter and cursor rules, and whose tokens a caller
// sees (its own user's; an admin everyone's, or one user's with user=); never a secret; on every
// engine.
//
// Contract 3.3: one token. GET /tokens/{id} (active, expired, revoked; another user's 404 but
// to an admin), DELETE /tokens/{id} (refused on its very next request, the token in use too,
// another user's 404 but to an admin), 405 with Allow, and lastUsedAt to the minute; on every
// engine.
//
// Contract 3.3: what making and revoking tokens leaves behind. One audit line at info and a count
// in GET /metrics for every creation and revocation (none for a refusal), and never a secret made
// in a test in any log line at trace, list body, error body or header; on every engine.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { createToken } from '../../src/identity/tokens.js';
import { errorBody, type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  ADMIN,
  type Created,
  call,
  getToken,
  HOUR,
  invalidToken,
  listedIds,
  MANAGE,
  MINUTE,
  made,
  me,
  nextOf,
  notHeld,
  postToken,
  refusedAs,
  revoke,
  tokensOverHttp,
  uniqueUser,
  type View,
  viewOf,
  walk,
} from '../helpers/tokens.js';
import { until } from '../helpers/wait.js';

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

const minuteOf = (ms: number) => new Date(ms - (ms % MINUTE)).toISOString();

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

for (const engine of ENGINES) {
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
