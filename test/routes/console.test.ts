import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { get as httpGet, type IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { LightMyRequestResponse } from 'fastify';
import { ConfigError, loadConfig } from '../../src/config.js';
import { CONSOLE_ROOT } from '../../src/routes/console.js';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

// The web console as the service serves it (CONTRACT.md section 11): its headers, caching,
// pre-compressed files, the redirect, its settings and its size. The console itself is exercised
// in a browser by test/e2e/console*.test.ts.

const sqlite = ENGINES.find((e) => e.name === 'sqlite')!;
const ISSUER = 'https://id.example.com/realms/acme';
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
const BUDGET = 100 * 1024;

function assertSecurityHeaders(res: LightMyRequestResponse, csp = CSP): void {
  assert.equal(res.headers['content-security-policy'], csp, `CSP of ${res.raw.req.url}`);
  assert.equal(res.headers['x-content-type-options'], 'nosniff');
  assert.equal(res.headers['referrer-policy'], 'no-referrer');
}

/** The scripts, module preloads and stylesheets that index.html loads, as URL paths. */
function loadedAssets(html: string): { js: string[]; css: string[] } {
  const js = [...html.matchAll(/<script\b[^>]*\bsrc="([^"]+)"/g)].map((m) => m[1]!);
  const preloads = [...html.matchAll(/<link\b[^>]*rel="modulepreload"[^>]*href="([^"]+)"/g)].map(
    (m) => m[1]!,
  );
  const css = [...html.matchAll(/<link\b[^>]*rel="stylesheet"[^>]*href="([^"]+)"/g)].map((m) => m[1]!);
  return { js: [...js, ...preloads], css };
}

describe('web console', { skip: sqlite.skip }, () => {
  let h: Harness;
  before(async () => {
    assert.ok(
      existsSync(join(CONSOLE_ROOT, 'index.html')),
      `the console is not built at ${CONSOLE_ROOT}: run npm run build first`,
    );
    h = await harness(sqlite);
  });
  after(() => h?.close());

  it('GET / redirects to /console/, and /console to /console/', async () => {
    const root = await h.app.inject('/');
    assert.equal(root.statusCode, 302);
    assert.equal(root.headers.location, '/console/');
    const bare = await h.app.inject('/console');
    assert.equal(bare.statusCode, 301);
    assert.equal(bare.headers.location, '/console/');
  });

  it('index.html: the security headers, never cached without revalidation, no inline script or style', async () => {
    const res = await h.app.inject('/console/');
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/html/);
    assertSecurityHeaders(res);
    assert.match(String(res.headers['cache-control']), /\bno-(cache|store)\b/);
    assert.doesNotMatch(String(res.headers['cache-control']), /immutable|max-age=[1-9]/);
    // Everything from this origin; no script body, style element or style attribute in the page.
    for (const m of res.body.matchAll(/(?:src|href)="([^"]+)"/g)) {
      assert.ok(!/^(https?:)?\/\//.test(m[1]!), `external resource ${m[1]}`);
    }
    assert.doesNotMatch(res.body, /<script\b[^>]*>[^<\s]/);
    assert.doesNotMatch(res.body, /<style\b|\sstyle=/);
    assert.equal((await h.app.inject('/console/index.html')).statusCode, 200);
  });

  it('the hashed scripts and stylesheets are immutable, with the same headers', async () => {
    const { js, css } = loadedAssets((await h.app.inject('/console/')).body);
    assert.ok(js.length >= 1 && css.length >= 1, 'index.html loads a script and a stylesheet');
    for (const url of [...js, ...css]) {
      assert.match(url, /^\/console\/assets\/[\w.-]+-[\w-]{8,}\.(js|css)$/, `${url} has a content hash`);
      const res = await h.app.inject(url);
      assert.equal(res.statusCode, 200, url);
      assertSecurityHeaders(res);
      assert.equal(res.headers['cache-control'], 'public, max-age=31536000, immutable');
      assert.match(
        String(res.headers['content-type']),
        url.endsWith('.js') ? /^(text|application)\/javascript/ : /^text\/css/,
      );
    }
  });

  it('sends the brotli or gzip copy made at build time when the browser takes it', async () => {
    const { js } = loadedAssets((await h.app.inject('/console/')).body);
    for (const url of ['/console/', js[0]!]) {
      const plain = await h.app.inject({ url, headers: { 'accept-encoding': 'identity' } });
      assert.equal(plain.headers['content-encoding'], undefined);
      assert.match(String(plain.headers.vary), /accept-encoding/i);

      const br = await h.app.inject({ url, headers: { 'accept-encoding': 'br, gzip' } });
      assert.equal(br.statusCode, 200);
      assert.equal(br.headers['content-encoding'], 'br');
      assert.match(String(br.headers.vary), /accept-encoding/i);
      assertSecurityHeaders(br);
      assert.equal(brotliDecompressSync(br.rawPayload).toString(), plain.body);
      assert.ok(br.rawPayload.length < plain.rawPayload.length);

      const gz = await h.app.inject({ url, headers: { 'accept-encoding': 'gzip' } });
      assert.equal(gz.headers['content-encoding'], 'gzip');
      assert.equal(gunzipSync(gz.rawPayload).toString(), plain.body);
      assert.equal(gz.headers['cache-control'], plain.headers['cache-control']);
    }
  });

  it('the JavaScript and CSS it loads to sign in and show plants are at most 100 KB gzip', async () => {
    const { js, css } = loadedAssets((await h.app.inject('/console/')).body);
    let total = 0;
    for (const url of [...js, ...css]) {
      const res = await h.app.inject({ url, headers: { 'accept-encoding': 'gzip' } });
      assert.equal(res.headers['content-encoding'], 'gzip');
      total += res.rawPayload.length;
    }
    // The views are in the entry chunk (nothing more loads to show plants); OpenID sign-in is a
    // separate chunk, loaded only by someone who uses it.
    const entry = readFileSync(join(CONSOLE_ROOT, js[0]!.replace(/^\/console\//, '')), 'utf8');
    assert.match(entry, /New plant/);
    assert.ok(total <= BUDGET, `${total} bytes gzip > ${BUDGET}`);
  });

  it('/console/config.json: token sign-in only when no client id is configured', async () => {
    const res = await h.app.inject('/console/config.json');
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assertSecurityHeaders(res);
    assert.deepEqual(res.json(), { oidc: null, trash: true });
  });

  it('an unknown file under /console/ is the usual 404, still with the headers', async () => {
    const res = await h.app.inject('/console/assets/nothing-12345678.js');
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().code, 'not_found');
    assertSecurityHeaders(res);
  });

  it('a path that climbs out of the console is the usual 404 not_found, with the headers, and reveals nothing', async () => {
    // Sent as they are written: inject (as curl without --path-as-is) would resolve the dot segments
    // of the first ones before the service saw them.
    const base = new URL(await h.app.listen({ port: 0, host: '127.0.0.1' }));
    const get = (path: string) =>
      new Promise<{ status: number; headers: IncomingHttpHeaders; body: string }>((resolve, reject) => {
        httpGet({ host: base.hostname, port: base.port, path }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            body += chunk;
          });
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
        }).on('error', reject);
      });
    for (const path of [
      '/console/../../package.json',
      '/console/%2e%2e/%2e%2e/package.json',
      '/console/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd',
      '/console/assets/%2e%2e/%2e%2e/%2e%2e/package.json',
      '/console/..%2f..%2fpackage.json',
      '/console/..%2F..%2F..%2Fpackage.json',
      '/console/%2e%2e%2f%2e%2e%2fpackage.json',
      '/console/assets/..%2f..%2f..%2fpackage.json',
      '/console/..%5c..%5cpackage.json',
      '/console/assets/%2e%2e',
    ]) {
      const res = await get(path);
      assert.equal(res.status, 404, `${path}: ${res.status} ${res.body}`);
      assert.equal(JSON.parse(res.body).code, 'not_found', path);
      assert.match(String(res.headers['content-type']), /^application\/json/, path);
      assert.doesNotMatch(res.body, /"plantstore"|root:/, path);
      assert.equal(res.headers['content-security-policy'], CSP, path);
      assert.equal(res.headers['x-content-type-options'], 'nosniff', path);
    }
  });

  it('the OpenAPI document does not list the console', async () => {
    const doc = (await h.app.inject('/openapi.json')).json() as { paths: Record<string, unknown> };
    for (const path of Object.keys(doc.paths)) {
      assert.ok(path !== '/' && !path.startsWith('/console'), `${path} is in the API description`);
    }
  });
});

describe('web console with OpenID sign-in', { skip: sqlite.skip }, () => {
  let h: Harness;
  before(async () => {
    h = await harness(sqlite, {
      jwtIssuer: ISSUER,
      jwtAudience: 'plantstore',
      consoleClientId: 'plantstore-console',
    });
  });
  after(() => h?.close());

  it('config.json names the issuer, the public client, the scopes and the audience', async () => {
    const res = await h.app.inject('/console/config.json');
    assert.deepEqual(res.json(), {
      oidc: {
        issuer: ISSUER,
        clientId: 'plantstore-console',
        scope: 'openid plants:read plants:write',
        audience: 'plantstore',
      },
      trash: true,
    });
  });

  it("the CSP lets the console reach the issuer's origin, and nothing else new", async () => {
    const csp = CSP.replace("connect-src 'self'", "connect-src 'self' https://id.example.com");
    for (const url of ['/console/', '/console/config.json']) {
      assertSecurityHeaders(await h.app.inject(url), csp);
    }
  });
});

describe('web console turned off', { skip: sqlite.skip }, () => {
  it('--no-console: GET /, /console/ and its files are 404', async () => {
    const h = await harness(sqlite, { console: false });
    try {
      for (const url of ['/', '/console', '/console/', '/console/config.json', '/console/index.html']) {
        const res = await h.app.inject(url);
        assert.equal(res.statusCode, 404, url);
        assert.equal(res.headers['content-security-policy'], undefined);
      }
    } finally {
      await h.close();
    }
  });
});

describe('console settings', () => {
  it('on by default; CONSOLE=false or the flag false turns it off', () => {
    assert.equal(loadConfig({}).console, true);
    assert.equal(loadConfig({ CONSOLE: 'false' }).console, false);
    assert.equal(loadConfig({}, { console: 'false' }).console, false);
    assert.equal(loadConfig({ CONSOLE: 'false' }, { console: 'true' }).console, true);
  });

  it('a client id needs the JWT issuer; the scopes are a space-separated list', () => {
    assert.throws(
      () => loadConfig({ CONSOLE_CLIENT_ID: 'plantstore-console' }),
      (err: Error) => err instanceof ConfigError && /--console-client-id .*--jwt-issuer/.test(err.message),
    );
    const c = loadConfig({
      JWT_ISSUER: ISSUER,
      JWT_AUDIENCE: 'plantstore',
      CONSOLE_CLIENT_ID: 'plantstore-console',
      CONSOLE_SCOPE: ' openid  api://plantstore/plants:read ',
    });
    assert.equal(c.consoleClientId, 'plantstore-console');
    assert.equal(c.consoleScope, 'openid api://plantstore/plants:read');
    assert.throws(() => loadConfig({ CONSOLE_SCOPE: 'openid "x"' }), ConfigError);
  });
});
