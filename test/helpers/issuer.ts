import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';

/**
 * A small issuer of our own on 127.0.0.1 for the JWT tests that need to forge what a real
 * provider never would (wrong keys, claims, types) and to misbehave on cue (down, hung, moved).
 * The e2e tests use a real OpenID provider instead (helpers/oidc.ts).
 */
export interface SigningKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export type IssuerMode = 'up' | 'refuse' | 'hang' | 'error' | 'no-openid-metadata';

export interface TestIssuer {
  issuer: string;
  jwksUrl: string;
  /** Keys published in the key set; sign() uses the first unless told otherwise. */
  published: SigningKey[];
  mode: IssuerMode;
  /** Requests for the key set so far. */
  jwksHits: number;
  newKey(alg?: string, kid?: string): Promise<SigningKey>;
  sign(
    claims: JWTPayload,
    opts?: { key?: SigningKey; typ?: string | null; kid?: string | null },
  ): Promise<string>;
  close(): Promise<void>;
}

let counter = 0;

export async function startTestIssuer(audience: string): Promise<TestIssuer> {
  const hung = new Set<import('node:http').ServerResponse>();
  const state: TestIssuer = {
    issuer: '',
    jwksUrl: '',
    published: [],
    mode: 'up',
    jwksHits: 0,
    async newKey(alg = 'RS256', kid = `k${++counter}`) {
      const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
      const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
      return { kid, alg, privateKey, publicJwk };
    },
    async sign(claims, opts = {}) {
      const key = opts.key ?? state.published[0]!;
      const header: Record<string, unknown> = { alg: key.alg };
      if (opts.kid !== null) header.kid = opts.kid ?? key.kid;
      if (opts.typ !== null) header.typ = opts.typ ?? 'at+jwt';
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({
        iss: state.issuer,
        aud: audience,
        sub: 'alice',
        iat: now,
        exp: now + 300,
        ...claims,
      })
        .setProtectedHeader(header as { alg: string })
        .sign(key.privateKey);
    },
    async close() {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
  const server: Server = createServer((req, res) => {
    if (state.mode === 'refuse') return req.socket.destroy();
    if (state.mode === 'hang') {
      hung.add(res);
      return;
    }
    if (state.mode === 'error') {
      res.writeHead(500).end('oops');
      return;
    }
    const json = (body: unknown) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.url === '/.well-known/openid-configuration' && state.mode !== 'no-openid-metadata') {
      return json({ issuer: state.issuer, jwks_uri: state.jwksUrl });
    }
    if (req.url === '/.well-known/oauth-authorization-server') {
      return json({ issuer: state.issuer, jwks_uri: state.jwksUrl });
    }
    if (req.url === '/jwks') {
      state.jwksHits++;
      return json({ keys: state.published.map((k) => k.publicJwk) });
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  state.issuer = `http://127.0.0.1:${port}`;
  state.jwksUrl = `${state.issuer}/jwks`;
  state.published.push(await state.newKey());
  return state;
}
