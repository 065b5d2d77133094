// Contract 3.3: what making and revoking tokens leaves behind. One audit line at info and a count
// in GET /metrics for every creation and revocation (none for a refusal), and never a secret made
// in a test in any log line at trace, list body, error body or header; on every engine.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  ADMIN,
  type Created,
  call,
  getToken,
  MANAGE,
  me,
  nextOf,
  notHeld,
  postToken,
  refusedAs,
  revoke,
  uniqueUser,
  viewOf,
} from '../helpers/tokens.js';
import { until } from '../helpers/wait.js';

const T = { timeout: 30_000 };

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
