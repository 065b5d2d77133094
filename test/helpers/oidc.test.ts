import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { type Issuer, startIssuer } from './oidc.js';

describe('helpers/oidc: a real oidc-provider', () => {
  let idp: Issuer;
  before(async () => {
    idp = await startIssuer();
  });
  after(async () => {
    await idp?.close();
  });

  // A fresh key set each time: createRemoteJWKSet caches keys and would hide what the issuer publishes now.
  const verify = (token: string) =>
    jwtVerify(token, createRemoteJWKSet(new URL(idp.jwksUri)), {
      typ: 'at+jwt',
      issuer: idp.issuer,
      audience: idp.audience,
    });

  test('discovery names the issuer and a jwks_uri on it', async () => {
    assert.match(idp.issuer, /^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${idp.issuer}/.well-known/openid-configuration`);
    assert.equal(res.status, 200);
    const meta = (await res.json()) as { issuer: string; jwks_uri: string; grant_types_supported: string[] };
    assert.equal(meta.issuer, idp.issuer);
    assert.equal(meta.jwks_uri, idp.jwksUri);
    assert.ok(meta.jwks_uri.startsWith(`${idp.issuer}/`));
    assert.ok(meta.grant_types_supported.includes('client_credentials'));
  });

  test('client_credentials token is an at+jwt for the audience, sub = client id, scope as asked', async () => {
    const token = await idp.token({ scope: 'plants:read' });
    const { payload, protectedHeader } = await verify(token);
    assert.equal(protectedHeader.typ, 'at+jwt');
    assert.equal(protectedHeader.alg, 'RS256');
    assert.equal(protectedHeader.kid, idp.currentKid);
    assert.equal(payload.iss, idp.issuer);
    assert.equal(payload.aud, idp.audience);
    assert.equal(payload.sub, 'alice');
    assert.equal(payload.client_id, 'alice');
    assert.equal(payload.scope, 'plants:read');
    assert.equal(typeof payload.iat, 'number');
    assert.equal(payload.exp, payload.iat! + 300);
  });

  test('tokens for another client name that client; several scopes stay space separated', async () => {
    const { payload } = await verify(await idp.token({ clientId: 'bob', scope: 'plants:read plants:write' }));
    assert.equal(payload.sub, 'bob');
    assert.equal(payload.scope, 'plants:read plants:write');
  });

  test('a scope outside the allowed set is not granted; an unknown client is refused', async () => {
    const { payload } = await verify(await idp.token({ scope: 'plants:read plants:delete' }));
    assert.equal(payload.scope, 'plants:read');
    await assert.rejects(idp.token({ clientId: 'mallory' }), /401 invalid_client/);
  });

  test('rotateKeys: new tokens carry a new kid and still verify through discovery', async () => {
    const before = await idp.token({ scope: 'plants:read' });
    const oldKid = decodeProtectedHeader(before).kid;
    await idp.rotateKeys();
    const afterRotation = await idp.token({ scope: 'plants:read' });
    const newKid = decodeProtectedHeader(afterRotation).kid;
    assert.notEqual(newKid, oldKid);
    assert.equal(newKid, idp.currentKid);
    await verify(afterRotation);
    // keepOld (the default) keeps the old key published, so earlier tokens still verify...
    await verify(before);
    // ...and without it the old key is gone from the jwks_uri.
    await idp.rotateKeys({ keepOld: false });
    const { keys } = (await (await fetch(idp.jwksUri)).json()) as { keys: { kid: string }[] };
    assert.deepEqual(
      keys.map((k) => k.kid),
      [idp.currentKid],
    );
    await assert.rejects(verify(before), { code: 'ERR_JWKS_NO_MATCHING_KEY' });
    await verify(await idp.token());
  });

  test('stop() refuses connections; start() answers again on the same issuer URL', async () => {
    const discovery = `${idp.issuer}/.well-known/openid-configuration`;
    await idp.stop();
    // stop() returns once this process's kept-alive sockets to it have closed, so fetch dials anew.
    await assert.rejects(fetch(discovery), (err: Error & { cause?: { code?: string } }) => {
      assert.equal(err.cause?.code, 'ECONNREFUSED');
      return true;
    });
    await idp.start();
    const res = await fetch(discovery);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { issuer: string }).issuer, idp.issuer);
    await verify(await idp.token({ scope: 'plants:admin' }));
  });
});

for (const alg of ['ES256', 'PS256', 'EdDSA'] as const) {
  test(`helpers/oidc: options for audience, alg (${alg}), scopes and ttl`, async () => {
    await checkOptions(alg);
  });
}

async function checkOptions(alg: 'ES256' | 'PS256' | 'EdDSA') {
  const idp = await startIssuer({
    audience: 'https://other.test/api',
    alg,
    scopes: ['a', 'b'],
    accessTokenTtl: 60,
  });
  try {
    const token = await idp.token({ scope: 'b', clientId: 'bob' });
    const { payload, protectedHeader } = await jwtVerify(token, createRemoteJWKSet(new URL(idp.jwksUri)), {
      typ: 'at+jwt',
      issuer: idp.issuer,
      audience: 'https://other.test/api',
    });
    assert.equal(protectedHeader.alg, alg);
    assert.equal(payload.scope, 'b');
    assert.equal(payload.sub, 'bob');
    assert.equal(payload.exp! - payload.iat!, 60);
  } finally {
    await idp.close();
  }
}
