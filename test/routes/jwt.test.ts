import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { Config } from '../../src/config.js';
import { errorBody, type Harness, harness, locationId } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { startTestIssuer, type TestIssuer } from '../helpers/issuer.js';

const AUDIENCE = 'https://plantstore.test/api';
const METADATA = 'http://localhost:80/.well-known/oauth-protected-resource';
const INVALID = `Bearer realm="plantstore", error="invalid_token", resource_metadata="${METADATA}"`;
const RW = { scope: 'plants:read plants:write' };

function jwtConfig(issuer: TestIssuer, more: Partial<Config> = {}): Partial<Config> {
  return { jwtIssuer: issuer.issuer, jwtAudience: AUDIENCE, authFailureLimit: 0, ...more };
}

const get = (h: Harness, token: string, url = '/plants') =>
  h.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });

function refused(res: LightMyRequestResponse): void {
  assert.equal(res.statusCode, 401, res.body);
  assert.equal(res.headers['www-authenticate'], INVALID);
  assert.equal(errorBody(res).code, 'invalid_token');
}

for (const engine of ENGINES) {
  describe(`JWT access tokens on ${engine.name}`, { skip: engine.skip }, () => {
    let issuer: TestIssuer;
    let h: Harness;
    before(async () => {
      issuer = await startTestIssuer(AUDIENCE);
      h = await harness(engine, jwtConfig(issuer));
    });
    after(async () => {
      await h?.close();
      await issuer?.close();
    });

    it('a JWT user is the same user as a built-in token of that name, on every plant endpoint', async () => {
      const builtin = await h.user();
      const token = await issuer.sign({ sub: builtin.user, ...RW });
      const auth = { authorization: `Bearer ${token}` };
      const created = await h.app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...auth, 'content-type': 'application/json' },
        payload: { name: 'Fern', tag: 'jwt' },
      });
      assert.equal(created.statusCode, 201, created.body);
      const id = locationId(created);
      const seen = await builtin.request({ method: 'GET', url: `/plants/${id}` });
      assert.deepEqual(seen.json(), { name: 'Fern', tag: 'jwt' });
      const listed = await h.app.inject({ method: 'GET', url: '/plants', headers: auth });
      assert.equal(listed.statusCode, 200);
      const deleted = await h.app.inject({ method: 'DELETE', url: `/plants/${id}`, headers: auth });
      assert.equal(deleted.statusCode, 204);
      assert.equal((await builtin.request({ method: 'GET', url: `/plants/${id}` })).statusCode, 404);
    });

    it('another user cannot see a JWT user’s plant', async () => {
      const a = await issuer.sign({ sub: `a-${Math.random()}`, ...RW });
      const b = await issuer.sign({ sub: `b-${Math.random()}`, ...RW });
      const created = await h.app.inject({
        method: 'POST',
        url: '/plants',
        headers: { authorization: `Bearer ${a}`, 'content-type': 'application/json' },
        payload: { name: 'Mine' },
      });
      assert.equal((await get(h, b, `/plants/${locationId(created)}`)).statusCode, 404);
    });

    it('scopes come from `scope` or `scp` (array or string); other scopes are ignored', async () => {
      for (const claims of [
        { scope: 'openid plants:read' },
        { scp: ['plants:read', 'x'] },
        { scp: 'plants:read' },
      ]) {
        assert.equal((await get(h, await issuer.sign(claims))).statusCode, 200, JSON.stringify(claims));
      }
    });

    it('a valid JWT without the scope gets 403 insufficient_scope', async () => {
      const res = await get(h, await issuer.sign({ scope: 'plants:write openid' }));
      assert.equal(res.statusCode, 403);
      assert.equal(
        res.headers['www-authenticate'],
        'Bearer realm="plantstore", error="insufficient_scope", scope="plants:read"',
      );
    });

    it('plants:admin in a JWT sees every user’s plants', async () => {
      const owner = await h.user();
      const id = locationId(await owner.create({ name: 'Owned' }));
      const admin = await issuer.sign({ sub: 'root', scope: 'plants:admin' });
      assert.equal((await get(h, admin, `/plants/${id}`)).statusCode, 200);
    });

    it('refuses an ID token, a JWT-typed or untyped token, and accepts application/at+jwt', async () => {
      refused(await get(h, await issuer.sign({ ...RW, aud: 'some-client', nonce: 'n' }, { typ: 'JWT' })));
      refused(await get(h, await issuer.sign(RW, { typ: 'JWT' })));
      refused(await get(h, await issuer.sign(RW, { typ: null })));
      assert.equal((await get(h, await issuer.sign(RW, { typ: 'application/at+jwt' }))).statusCode, 200);
    });

    it('refuses a wrong iss (even by a trailing slash), a missing or wrong aud, missing exp or user', async () => {
      refused(await get(h, await issuer.sign({ ...RW, iss: `${issuer.issuer}/` })));
      refused(await get(h, await issuer.sign({ ...RW, aud: 'https://other.test' })));
      refused(await get(h, await issuer.sign({ ...RW, aud: undefined })));
      refused(await get(h, await issuer.sign({ ...RW, exp: undefined })));
      refused(await get(h, await issuer.sign({ ...RW, sub: undefined })));
      refused(await get(h, await issuer.sign({ ...RW, sub: '' })));
      assert.equal((await get(h, await issuer.sign({ ...RW, aud: ['x', AUDIENCE] }))).statusCode, 200);
    });

    it('refuses a user claim that is not a user name (a space, a control character, non-ASCII, empty, 201 characters)', async () => {
      for (const sub of [
        'ali ce\u0000',
        'ali ce',
        'alice\u0000',
        'alice\u007f',
        '\talice',
        'álice',
        '🌵',
        '',
        'u'.repeat(201),
      ]) {
        const res = await get(h, await issuer.sign({ ...RW, sub }));
        assert.equal(res.statusCode, 401, JSON.stringify(sub));
        refused(res);
      }
      // The rule's edges: 200 characters, and any printable ASCII but the space.
      for (const sub of [`jwt-${'u'.repeat(196)}`, `jwt!~"'@:/${Math.random()}`]) {
        assert.equal((await get(h, await issuer.sign({ ...RW, sub }))).statusCode, 200, sub);
      }
    });

    it('the challenge of a 401 without a token names the resource metadata', async () => {
      const res = await h.app.inject({ method: 'GET', url: '/plants' });
      assert.equal(res.statusCode, 401);
      assert.equal(
        res.headers['www-authenticate'],
        `Bearer realm="plantstore", resource_metadata="${METADATA}"`,
      );
    });

    it('GET /.well-known/oauth-protected-resource answers RFC 9728 metadata with no token', async () => {
      const res = await h.app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource' });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), {
        resource: 'http://localhost:80',
        authorization_servers: [issuer.issuer],
        // Version 3: tokens:manage is taken from a JWT's scopes too (CONTRACT.md section 3.1).
        scopes_supported: ['plants:read', 'plants:write', 'plants:admin', 'tokens:manage'],
        bearer_methods_supported: ['header'],
      });
    });

    it('/openapi.json describes both kinds of bearer token', async () => {
      const doc = (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      assert.equal(doc.components.securitySchemes.jwtAuth.bearerFormat, 'JWT');
      assert.ok(doc.components.securitySchemes.bearerAuth);
      assert.deepEqual(doc.paths['/plants'].get.security, [{ bearerAuth: [] }, { jwtAuth: [] }]);
    });
  });
}

describe('JWT time checks, with a clock of the test’s own', () => {
  const engine = ENGINES[0]!;
  let issuer: TestIssuer;
  let h: Harness;
  let now = Date.now();
  before(async () => {
    issuer = await startTestIssuer(AUDIENCE);
    h = await harness(engine, jwtConfig(issuer, { jwtClockTolerance: 30_000 }), { clock: () => now });
  });
  after(async () => {
    await h?.close();
    await issuer?.close();
  });
  beforeEach(() => {
    now = Date.now();
  });
  const at = (offsetS: number) => Math.floor(now / 1000) + offsetS;

  it('exp within the tolerance passes; past it, 401', async () => {
    assert.equal((await get(h, await issuer.sign({ ...RW, exp: at(-20) }))).statusCode, 200);
    refused(await get(h, await issuer.sign({ ...RW, exp: at(-40) })));
  });

  it('nbf and iat in the future beyond the tolerance: 401', async () => {
    assert.equal((await get(h, await issuer.sign({ ...RW, nbf: at(20), iat: at(20) }))).statusCode, 200);
    refused(await get(h, await issuer.sign({ ...RW, nbf: at(40) })));
    refused(await get(h, await issuer.sign({ ...RW, iat: at(40) })));
  });

  it('a token accepted before stops working once its exp passes', async () => {
    const token = await issuer.sign({ ...RW, exp: at(60) });
    assert.equal((await get(h, token)).statusCode, 200);
    now += 95_000;
    refused(await get(h, token));
  });
});

describe('the issuer’s keys: discovery, rotation, outages', () => {
  const engine = ENGINES[0]!;
  let issuer: TestIssuer;
  let now = Date.now();
  const open: Harness[] = [];
  const issuers: TestIssuer[] = [];
  const app = async (more: Partial<Config> = {}) => {
    const h = await harness(engine, jwtConfig(issuer, more), { clock: () => now });
    open.push(h);
    return h;
  };
  beforeEach(async () => {
    now = Date.now();
    issuer = await startTestIssuer(AUDIENCE);
    issuers.push(issuer);
  });
  after(async () => {
    for (const h of open) await h.close();
    for (const i of issuers) await i.close();
  });

  it('a new kid makes one refetch; more unknown kids within 30 s make none; after 30 s, one more', async () => {
    const h = await app();
    assert.equal((await get(h, await issuer.sign(RW))).statusCode, 200);
    assert.equal(issuer.jwksHits, 1);
    const rotated = await issuer.newKey('ES256');
    issuer.published.push(rotated);
    assert.equal((await get(h, await issuer.sign(RW, { key: rotated }))).statusCode, 200);
    assert.equal(issuer.jwksHits, 2);
    const unknown = await issuer.newKey();
    for (let i = 0; i < 5; i++) refused(await get(h, await issuer.sign(RW, { key: unknown })));
    assert.equal(issuer.jwksHits, 2);
    issuer.published.push(unknown);
    now += 31_000;
    assert.equal((await get(h, await issuer.sign(RW, { key: unknown }))).statusCode, 200);
    assert.equal(issuer.jwksHits, 3);
  });

  it('while the issuer is down, the last good key set stays in use (warm outage)', async () => {
    const h = await app();
    assert.equal((await get(h, await issuer.sign(RW))).statusCode, 200);
    issuer.mode = 'refuse';
    now += 31_000;
    assert.equal((await get(h, await issuer.sign({ ...RW, jti: 'a' }))).statusCode, 200);
    const unknown = await issuer.newKey();
    refused(await get(h, await issuer.sign(RW, { key: unknown })));
    issuer.mode = 'error';
    now += 31_000;
    refused(await get(h, await issuer.sign(RW, { key: unknown })));
    assert.equal((await get(h, await issuer.sign({ ...RW, jti: 'b' }))).statusCode, 200);
  });

  it('with no key set ever fetched and the issuer down: 503 auth_unavailable with Retry-After, then recovery', async () => {
    const h = await app();
    issuer.mode = 'refuse';
    const res = await get(h, await issuer.sign(RW));
    assert.equal(res.statusCode, 503);
    assert.equal(errorBody(res).code, 'auth_unavailable');
    assert.match(String(res.headers['retry-after']), /^[1-9][0-9]*$/);
    issuer.mode = 'up';
    assert.equal((await get(h, await issuer.sign(RW))).statusCode, 200);
  });

  it('a hung issuer holds a request no longer than the fetch timeout', async () => {
    const h = await app();
    issuer.mode = 'hang';
    const started = Date.now();
    const res = await get(h, await issuer.sign(RW));
    assert.equal(res.statusCode, 503);
    // 5 s is the fetch deadline (discovery and keys together). The bound told apart from a hang
    // (which would run into the test's own 90 s), with a margin wide enough for a loaded machine:
    // at load 12, 8 s was once not enough.
    assert.ok(Date.now() - started < 20_000, `took ${Date.now() - started} ms`);
  });

  it('discovery falls back to oauth-authorization-server metadata; an explicit jwks URL skips discovery', async () => {
    issuer.mode = 'no-openid-metadata';
    assert.equal((await get(await app(), await issuer.sign(RW))).statusCode, 200);
    issuer.mode = 'up';
    const direct = await app({ jwtIssuer: 'https://issuer.invalid', jwtJwksUrl: issuer.jwksUrl });
    assert.equal(
      (await get(direct, await issuer.sign({ ...RW, iss: 'https://issuer.invalid' }))).statusCode,
      200,
    );
  });

  it('a token without kid is checked against every matching key', async () => {
    const h = await app();
    const second = await issuer.newKey();
    issuer.published.push(second);
    assert.equal((await get(h, await issuer.sign(RW, { key: second, kid: null }))).statusCode, 200);
  });

  it('metrics count refusals by kind and reason, and key-set fetches', async () => {
    const h = await app();
    await get(h, await issuer.sign({ ...RW, aud: 'nope' }));
    await get(h, 'pst_nope');
    await h.app.inject({ method: 'GET', url: '/plants' });
    const text = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(text, /plantstore_auth_failures_total\{kind="jwt",reason="audience"\} 1/);
    assert.match(text, /plantstore_auth_failures_total\{kind="builtin",reason="malformed"\} 1/);
    assert.match(text, /plantstore_auth_failures_total\{kind="none",reason="missing"\} 1/);
    assert.match(text, /plantstore_jwt_key_fetches_total\{outcome="ok"\} 1/);
  });

  it('with JWTs off, a JWT is an invalid token and the challenge has no resource_metadata', async () => {
    const h = await harness(engine, { authFailureLimit: 0 });
    open.push(h);
    const res = await get(h, await issuer.sign(RW));
    assert.equal(res.statusCode, 401);
    assert.equal(res.headers['www-authenticate'], 'Bearer realm="plantstore", error="invalid_token"');
    const meta = await h.app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource' });
    assert.equal(meta.statusCode, 404);
  });
});
