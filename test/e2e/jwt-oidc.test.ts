import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeProtectedHeader } from 'jose';
import { ENGINES } from '../helpers/engines.js';
import { type Issuer, startIssuer } from '../helpers/oidc.js';
import { cli, type Server, serve } from './process.js';

// A real OpenID provider (oidc-provider) issues RFC 9068 access tokens through the
// client_credentials grant with a resource indicator, as a team's identity provider would; two
// instances of `bin/plantstore serve` share one store and accept them.
for (const engine of ENGINES)
  describe(`JWTs from a real OpenID provider, bin/plantstore serve on ${engine.name}`, {
    skip: engine.skip,
  }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-oidc-'));
    let issuer: Issuer;
    let servers: Server[] = [];
    let drop = async () => {};
    const env: Record<string, string> = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}` };

    before(async () => {
      issuer = await startIssuer();
      if (engine.name !== 'sqlite') {
        const db = await engine.database();
        env.DATABASE_URL = db.url;
        drop = db.drop;
      }
      Object.assign(env, {
        JWT_ISSUER: issuer.issuer,
        JWT_AUDIENCE: issuer.audience,
        AUTH_FAILURE_LIMIT: '0',
      });
      // SQLite: one file, so one process; PostgreSQL: two instances.
      const count = engine.name === 'sqlite' ? 1 : 2;
      for (let i = 0; i < count; i++) servers.push(await serve([], env));
    });
    after(async () => {
      for (const s of servers) await s.stop();
      servers = [];
      await issuer?.close();
      await drop();
      rmSync(dir, { recursive: true, force: true });
    });

    const call = (i: number, token: string, path: string, init: RequestInit = {}) =>
      fetch(`${servers[i % servers.length]!.url}${path}`, {
        ...init,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          ...(init.headers ?? {}),
        },
      });

    it('a client-credentials token works on every plant endpoint, on every instance', async () => {
      const token = await issuer.token({ scope: 'plants:read plants:write', clientId: 'alice' });
      assert.equal(decodeProtectedHeader(token).typ, 'at+jwt');
      const created = await call(0, token, '/plants', {
        method: 'POST',
        body: JSON.stringify({ name: 'Oak', tag: 'tree' }),
      });
      assert.equal(created.status, 201);
      const location = created.headers.get('location')!;
      const read = await call(1, token, location);
      assert.equal(read.status, 200);
      assert.deepEqual(await read.json(), { name: 'Oak', tag: 'tree' });
      const list = await call(1, token, '/plants?tag=tree');
      assert.deepEqual(await list.json(), [{ name: 'Oak', tag: 'tree' }]);
      assert.equal((await call(0, token, location, { method: 'DELETE' })).status, 204);
      assert.equal((await call(1, token, location, { method: 'DELETE' })).status, 404);
    });

    it('the JWT user is the client id: a built-in token for that user sees the same plants', async () => {
      const token = await issuer.token({ scope: 'plants:read plants:write', clientId: 'bob' });
      const created = await call(0, token, '/plants', {
        method: 'POST',
        body: JSON.stringify({ name: 'Bob’s fern' }),
      });
      const builtin = (await cli(['token', 'create', '--user', 'bob'], env)).stdout.trim();
      const read = await call(1, builtin, created.headers.get('location')!);
      assert.equal(read.status, 200);
      const alice = await issuer.token({ scope: 'plants:read', clientId: 'alice' });
      assert.equal((await call(0, alice, created.headers.get('location')!)).status, 404);
    });

    it('a token without the write scope gets 403 insufficient_scope', async () => {
      const token = await issuer.token({ scope: 'plants:read', clientId: 'alice' });
      const res = await call(0, token, '/plants', { method: 'POST', body: JSON.stringify({ name: 'No' }) });
      assert.equal(res.status, 403);
      assert.equal(
        res.headers.get('www-authenticate'),
        'Bearer realm="plantstore", error="insufficient_scope", scope="plants:write"',
      );
    });

    it('after a key rotation at the provider, new tokens work at once and old ones while published', async () => {
      const before = await issuer.token({ scope: 'plants:read', clientId: 'alice' });
      assert.equal((await call(0, before, '/plants')).status, 200);
      await issuer.rotateKeys({ keepOld: true });
      const after = await issuer.token({ scope: 'plants:read', clientId: 'alice' });
      assert.notEqual(decodeProtectedHeader(after).kid, decodeProtectedHeader(before).kid);
      for (let i = 0; i < servers.length; i++) {
        assert.equal((await call(i, after, '/plants')).status, 200);
        assert.equal((await call(i, before, '/plants')).status, 200);
      }
    });

    it('while the provider is down, tokens signed with known keys keep working', async () => {
      const token = await issuer.token({ scope: 'plants:read', clientId: 'alice' });
      await issuer.stop();
      try {
        for (let i = 0; i < servers.length; i++) assert.equal((await call(i, token, '/plants')).status, 200);
      } finally {
        await issuer.start();
      }
    });

    it('the protected-resource metadata names the provider', async () => {
      const res = await fetch(`${servers[0]!.url}/.well-known/oauth-protected-resource`);
      const meta = (await res.json()) as { authorization_servers: string[]; resource: string };
      assert.deepEqual(meta.authorization_servers, [issuer.issuer]);
      assert.equal(meta.resource, servers[0]!.url);
      const unauth = await fetch(`${servers[0]!.url}/plants`);
      assert.equal(
        unauth.headers.get('www-authenticate'),
        `Bearer realm="plantstore", resource_metadata="${servers[0]!.url}/.well-known/oauth-protected-resource"`,
      );
    });
  });
