import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { decodeJwt, exportJWK, generateKeyPair } from 'jose';
import type { Browser } from 'playwright-core';
import {
  assertClean,
  axeViolations,
  type ConsoleServer,
  consoleCsp,
  consoleServer,
  launch,
  open,
  signedIn,
  skipBrowser,
} from '../helpers/browser.js';

// OpenID sign-in (contract 11) against a REAL OpenID provider (panva's oidc-provider) with its own
// login and consent pages: a public client (no secret, PKCE required), the authorization code flow
// in Chromium, and the access token it issues (an RFC 9068 JWT for plantstore's audience) accepted
// by `bin/plantstore serve --jwt-issuer … --console-client-id …`.
const CLIENT_ID = 'plantstore-console';
const AUDIENCE = 'https://plantstore.test/api';
const SCOPES = ['openid', 'plants:read', 'plants:write', 'tokens:manage'];

type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;
type ProviderClass = new (issuer: string, config: Record<string, unknown>) => { callback(): NodeHandler };

/** oidc-provider's storage, in memory (its own default says so loudly at every start). */
class MemoryAdapter {
  static readonly rows = new Map<string, Record<string, unknown>>();
  constructor(private readonly model: string) {}
  async upsert(id: string, payload: Record<string, unknown>) {
    MemoryAdapter.rows.set(`${this.model}:${id}`, payload);
  }
  async find(id: string) {
    return MemoryAdapter.rows.get(`${this.model}:${id}`);
  }
  async findByUid(uid: string) {
    for (const [key, row] of MemoryAdapter.rows)
      if (key.startsWith(`${this.model}:`) && row.uid === uid) return row;
    return undefined;
  }
  async findByUserCode() {
    return undefined;
  }
  async consume(id: string) {
    const row = MemoryAdapter.rows.get(`${this.model}:${id}`);
    if (row) row.consumed = Math.floor(Date.now() / 1000);
  }
  async destroy(id: string) {
    MemoryAdapter.rows.delete(`${this.model}:${id}`);
  }
  async revokeByGrantId(grantId: string) {
    for (const [key, row] of MemoryAdapter.rows) if (row.grantId === grantId) MemoryAdapter.rows.delete(key);
  }
}

/** oidc-provider with devInteractions (its own login and consent forms) and one public client. */
async function provider(issuer: string, redirectUri: string): Promise<NodeHandler> {
  // A non-literal specifier keeps tsc from demanding (missing) declarations for the package.
  const specifier: string = 'oidc-provider';
  const { default: Provider } = (await import(specifier)) as { default: ProviderClass };
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const key = { ...(await exportJWK(privateKey)), kid: 'console-test', alg: 'RS256', use: 'sig' };
  const consoleOrigin = new URL(redirectUri).origin;
  const p = new Provider(issuer, {
    adapter: MemoryAdapter,
    jwks: { keys: [key] },
    // Whoever signs in at the dev login page is that account.
    findAccount: (_ctx: unknown, sub: string) => ({ accountId: sub, claims: () => ({ sub }) }),
    // The console's code exchange is a cross-origin fetch from its page: only its origin may.
    clientBasedCORS: (_ctx: unknown, origin: string) => origin === consoleOrigin,
    ttl: {
      AccessToken: 600,
      AuthorizationCode: 60,
      Grant: 600,
      IdToken: 600,
      Interaction: 600,
      Session: 600,
    },
    clients: [
      {
        client_id: CLIENT_ID,
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: [redirectUri],
      },
    ],
    scopes: SCOPES,
    cookies: { keys: ['console-test-cookie-key'] },
    features: {
      devInteractions: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // Whether or not the console names the resource, the token is for plantstore's audience.
        defaultResource: () => AUDIENCE,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, indicator: string) => {
          if (indicator !== AUDIENCE) throw new Error(`unknown resource ${indicator}`);
          return {
            scope: SCOPES.filter((s) => s !== 'openid').join(' '),
            audience: AUDIENCE,
            accessTokenTTL: 600,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  });
  return p.callback();
}

describe('the web console signs in through a real OpenID provider (code + PKCE S256 + state)', {
  skip: skipBrowser,
  timeout: 120_000,
}, () => {
  let idp: Server;
  let issuer: string;
  let srv: ConsoleServer;
  let browser: Browser;
  before(async () => {
    // The provider's port first (the service needs the issuer), its client after the service's
    // port is known (the client's redirect URI names it).
    let handler: NodeHandler = (_req, res) => res.writeHead(503).end();
    idp = createServer((req, res) => handler(req, res));
    await new Promise<void>((done) => idp.listen(0, '127.0.0.1', done));
    issuer = `http://127.0.0.1:${(idp.address() as AddressInfo).port}`;
    srv = await consoleServer([
      '--jwt-issuer',
      issuer,
      '--jwt-audience',
      AUDIENCE,
      '--console-client-id',
      CLIENT_ID,
      '--console-scope',
      SCOPES.join(' '),
    ]);
    handler = await provider(issuer, `${srv.url}/console/`);
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await srv?.stop();
    idp?.closeAllConnections();
    await new Promise((done) => idp?.close(done));
  });

  it('the CSP lets the console reach the issuer and nothing else', async () => {
    const res = await fetch(`${srv.url}/console/`);
    assert.equal(res.headers.get('content-security-policy'), consoleCsp(`'self' ${issuer}`));
  });

  it('"Sign in with your identity provider": the provider’s login and consent, then back signed in as that user', async () => {
    const { context, page, watch } = await open(browser);
    // Which document asked for each request, as it was then.
    const askedBy = new Map<unknown, string>();
    page.on('request', (r) => askedBy.set(r, r.frame().url()));
    await page.goto(`${srv.url}/console/`);
    await page.getByRole('button', { name: 'Sign in with your identity provider' }).waitFor();
    assert.deepEqual(await axeViolations(page, 'sign-in with OpenID on'), []);
    const authorize = page.waitForRequest((r) => r.url().startsWith(`${issuer}/auth`));
    await page.getByRole('button', { name: 'Sign in with your identity provider' }).click();
    const params = new URL((await authorize).url()).searchParams;
    assert.equal(params.get('response_type'), 'code');
    assert.equal(params.get('client_id'), CLIENT_ID);
    assert.equal(params.get('redirect_uri'), `${srv.url}/console/`);
    assert.equal(params.get('code_challenge_method'), 'S256');
    assert.match(params.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/);
    assert.ok((params.get('state') ?? '').length >= 16, `a state of some entropy: ${params.get('state')}`);

    // The provider's own pages (devInteractions): any login, then consent.
    const user = `oidc-person-${process.pid}`;
    await page.locator('input[name="login"]').fill(user);
    const password = page.locator('input[name="password"]');
    if ((await password.count()) > 0) await password.fill('any');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.getByRole('button', { name: 'Continue' }).click();

    await page.waitForURL((u) => u.href.startsWith(`${srv.url}/console/`));
    await signedIn(page);
    await page.getByText(user).first().waitFor();
    // The code and state do not stay in the address bar.
    await page.waitForURL((u) => !u.searchParams.has('code') && !u.searchParams.has('state'));

    // Its token is a JWT from the provider, sent in the header: the plants view loads with it.
    const me = watch.requests.find((r) => new URL(r.url()).pathname === '/me' && r.url().startsWith(srv.url));
    const auth = (await me?.allHeaders())?.authorization ?? '';
    assert.match(auth, /^Bearer [^.]+\.[^.]+\.[^.]+$/);
    const token = auth.slice('Bearer '.length);
    const claims = decodeJwt(token);
    assert.deepEqual([claims.iss, claims.sub, claims.aud], [issuer, user, AUDIENCE]);
    assert.ok(!watch.requests.some((r) => r.url().includes(token)), 'the token is in no URL');
    assert.deepEqual(
      await page.evaluate(() => Object.keys(sessionStorage)),
      [],
      'the PKCE verifier and state are gone, and without "Remember in this tab" so is the token',
    );
    const stored = await page.evaluate(() => JSON.stringify([Object.entries(localStorage), document.cookie]));
    assert.ok(!stored.includes(token), 'never in localStorage or a cookie');

    // The provider's own pages load what they like (its dev login page asks for a web font): only
    // what the console's documents requested must stay on the service's origin and the issuer's.
    const fromConsole = {
      ...watch,
      requests: watch.requests.filter((r) => !askedBy.get(r)?.startsWith(issuer)),
    };
    assertClean(fromConsole, [srv.url, issuer]);
    await context.close();
  });
});
