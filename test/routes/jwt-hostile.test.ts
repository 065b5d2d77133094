import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { type JWTPayload, SignJWT } from 'jose';
import { errorBody, type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { type SigningKey, startTestIssuer, type TestIssuer } from '../helpers/issuer.js';

const AUDIENCE = 'https://plantstore.test/api';
const INVALID =
  'Bearer realm="plantstore", error="invalid_token", resource_metadata="http://localhost:80/.well-known/oauth-protected-resource"';
const SEED = 20261122;
const RUNS = 2500;

const b64 = (v: string | Uint8Array) => Buffer.from(v).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

/** Every way this test forges a token; each must be refused. */
type Recipe =
  | { kind: 'alg-none' }
  | { kind: 'hs256-with-public-key' }
  | { kind: 'swapped-kid' }
  | { kind: 'unknown-key'; withKid: boolean }
  | { kind: 'expired'; by: number }
  | { kind: 'not-yet-valid'; claim: 'nbf' | 'iat'; by: number }
  | { kind: 'wrong-iss'; iss: string }
  | { kind: 'wrong-aud'; aud: string | string[] }
  | { kind: 'missing-claim'; claim: 'exp' | 'sub' | 'iss' | 'aud' }
  | { kind: 'bad-typ'; typ: string | null }
  | { kind: 'bad-user'; sub: unknown }
  | { kind: 'alg-mismatch'; alg: string }
  | { kind: 'tampered'; at: number }
  | { kind: 'oversized'; size: number }
  | { kind: 'not-base64url'; segments: [string, string, string] }
  | { kind: 'not-json'; header: string; payload: string }
  | { kind: 'crit'; name: string };

const segment = fc.string({
  unit: fc.constantFrom(...'!#$%&*+/=?^`{|}~@:;<>'.split('')),
  minLength: 1,
  maxLength: 40,
});
const recipe: fc.Arbitrary<Recipe> = fc.oneof(
  fc.constant({ kind: 'alg-none' as const }),
  fc.constant({ kind: 'hs256-with-public-key' as const }),
  fc.constant({ kind: 'swapped-kid' as const }),
  fc.record({ kind: fc.constant('unknown-key' as const), withKid: fc.boolean() }),
  fc.record({ kind: fc.constant('expired' as const), by: fc.integer({ min: 31, max: 10_000_000 }) }),
  fc.record({
    kind: fc.constant('not-yet-valid' as const),
    claim: fc.constantFrom('nbf' as const, 'iat' as const),
    by: fc.integer({ min: 31, max: 10_000_000 }),
  }),
  fc.record({ kind: fc.constant('wrong-iss' as const), iss: fc.string() }),
  fc.record({ kind: fc.constant('wrong-aud' as const), aud: fc.oneof(fc.string(), fc.array(fc.string())) }),
  fc.record({
    kind: fc.constant('missing-claim' as const),
    claim: fc.constantFrom('exp', 'sub', 'iss', 'aud'),
  }),
  fc.record({
    kind: fc.constant('bad-typ' as const),
    typ: fc.oneof(
      fc.constantFrom('JWT', 'jwt', null, 'at+jwt+x', 'application/jwt', 'id_token'),
      fc.string(),
    ),
  }),
  fc.record({
    kind: fc.constant('bad-user' as const),
    sub: fc.oneof(
      fc.constant(''),
      fc.integer(),
      fc.boolean(),
      fc.array(fc.string()),
      fc.constant(null),
      // Strings that are not user names (contract 3.1: printable ASCII, no space, 1–200).
      fc.constantFrom('ali ce\u0000', 'a b', '\u0001', 'ünï', 'x'.repeat(201)),
      fc
        .tuple(fc.string(), fc.constantFrom(' ', '\u0000', '\u007f', '\u00e9'), fc.string())
        .map((p) => p.join('')),
    ),
  }),
  fc.record({
    kind: fc.constant('alg-mismatch' as const),
    alg: fc.constantFrom('PS256', 'ES256', 'RS384', 'EdDSA', 'HS512'),
  }),
  fc.record({ kind: fc.constant('tampered' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('oversized' as const), size: fc.integer({ min: 16_500, max: 60_000 }) }),
  fc.record({ kind: fc.constant('not-base64url' as const), segments: fc.tuple(segment, segment, segment) }),
  fc.record({ kind: fc.constant('not-json' as const), header: fc.string(), payload: fc.string() }),
  fc.record({ kind: fc.constant('crit' as const), name: fc.string({ minLength: 1, maxLength: 10 }) }),
);

describe('hostile JWTs, generated: every one a 401, never a 5xx, never logged', () => {
  const engine = ENGINES[0]!;
  let issuer: TestIssuer;
  let h: Harness;
  let rsa: SigningKey;
  let ec: SigningKey;
  let stranger: SigningKey;
  const lines: string[] = [];

  before(async () => {
    issuer = await startTestIssuer(AUDIENCE);
    rsa = issuer.published[0]!;
    ec = await issuer.newKey('ES256');
    issuer.published.push(ec);
    stranger = await issuer.newKey('ES256', 'stranger');
    h = await harness(
      engine,
      { jwtIssuer: issuer.issuer, jwtAudience: AUDIENCE, authFailureLimit: 0, logLevel: 'trace' },
      { logStream: { write: (l: string) => void lines.push(l) } },
    );
  });
  after(async () => {
    await h?.close();
    await issuer?.close();
  });

  const good = (): JWTPayload => ({
    scope: 'plants:read',
    iss: issuer.issuer,
    aud: AUDIENCE,
    sub: 'mallory',
  });
  const raw = (header: object, payload: object, signature = '') =>
    `${b64(JSON.stringify(header))}.${b64(JSON.stringify(payload))}.${signature}`;

  async function forge(r: Recipe): Promise<string> {
    const t = now();
    const claims = { ...good(), iat: t, exp: t + 300 };
    switch (r.kind) {
      case 'alg-none':
        return raw({ alg: 'none', typ: 'at+jwt', kid: rsa.kid }, claims);
      case 'hs256-with-public-key':
        return new SignJWT(claims)
          .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: rsa.kid })
          .sign(new TextEncoder().encode(JSON.stringify(rsa.publicJwk)));
      case 'swapped-kid':
        return issuer.sign(claims, { key: ec, kid: rsa.kid });
      case 'unknown-key':
        return issuer.sign(claims, { key: stranger, kid: r.withKid ? 'stranger' : null });
      case 'expired':
        return issuer.sign({ ...claims, exp: t - r.by }, { key: ec });
      case 'not-yet-valid':
        return issuer.sign({ ...claims, [r.claim]: t + r.by }, { key: ec });
      case 'wrong-iss':
        return issuer.sign({ ...claims, iss: r.iss === issuer.issuer ? `${r.iss}x` : r.iss }, { key: ec });
      case 'wrong-aud': {
        const auds = Array.isArray(r.aud) ? r.aud : [r.aud];
        return issuer.sign({ ...claims, aud: auds.filter((a) => a !== AUDIENCE) }, { key: ec });
      }
      case 'missing-claim':
        return issuer.sign({ ...claims, [r.claim]: undefined }, { key: ec });
      case 'bad-typ':
        return issuer.sign(claims, { key: ec, typ: r.typ });
      case 'bad-user':
        return issuer.sign({ ...claims, sub: r.sub as string }, { key: ec });
      case 'alg-mismatch': {
        const [h64, p64, s64] = (await issuer.sign(claims, { key: rsa })).split('.');
        const header = JSON.parse(Buffer.from(h64!, 'base64url').toString());
        return `${b64(JSON.stringify({ ...header, alg: r.alg }))}.${p64}.${s64}`;
      }
      case 'tampered': {
        const [h64, , s64] = (await issuer.sign(claims, { key: ec })).split('.');
        const payload = { ...claims, sub: `${claims.sub}${r.at % 10}`, scope: 'plants:admin' };
        return `${h64}.${b64(JSON.stringify(payload))}.${s64}`;
      }
      case 'oversized':
        return issuer.sign({ ...claims, pad: 'x'.repeat(r.size) }, { key: ec });
      case 'not-base64url':
        return r.segments.join('.');
      case 'not-json':
        return `${b64(r.header)}.${b64(r.payload)}.${b64('sig')}`;
      case 'crit': {
        // jose will not sign with an extension it does not know, so WebCrypto signs (ES256 is raw r||s).
        const input = raw({ alg: 'ES256', typ: 'at+jwt', kid: ec.kid, crit: [r.name], [r.name]: 1 }, claims);
        const data = new TextEncoder().encode(input.slice(0, -1));
        const sig = await crypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, ec.privateKey, data);
        return `${input}${b64(new Uint8Array(sig))}`;
      }
    }
  }

  it('the well-formed control token is accepted (so a refusal below is about the forgery)', async () => {
    const t = now();
    const token = await issuer.sign({ ...good(), iat: t, exp: t + 300 }, { key: ec });
    const res = await h.app.inject({ url: '/plants', headers: { authorization: `Bearer ${token}` } });
    assert.equal(res.statusCode, 200);
  });

  it(`${RUNS} forged tokens (seed ${SEED}): 401 invalid_token with the contract challenge`, async () => {
    const seen = new Map<string, number>();
    const tokens: string[] = [];
    await fc.assert(
      fc.asyncProperty(recipe, async (r) => {
        const token = await forge(r);
        tokens.push(token);
        seen.set(r.kind, (seen.get(r.kind) ?? 0) + 1);
        const res = await h.app.inject({ url: '/plants', headers: { authorization: `Bearer ${token}` } });
        assert.equal(res.statusCode, 401, `${r.kind}: ${res.body}`);
        assert.equal(res.headers['www-authenticate'], INVALID);
        assert.equal(errorBody(res).code, 'invalid_token');
        assert.ok(!res.body.includes(token));
      }),
      { numRuns: RUNS, seed: SEED },
    );
    assert.equal(seen.size, 17, `every recipe was tried: ${[...seen.keys()].join(', ')}`);
    const log = lines.join('');
    assert.ok(log.length > 0, 'requests were logged at trace level');
    for (const token of tokens) {
      // The signature segment is the secret-looking part; a whole token or its signature never appears.
      const sig = token.split('.')[2] ?? '';
      assert.ok(!log.includes(token) && (sig.length < 16 || !log.includes(sig)), 'a token reached the log');
    }
  });
});
