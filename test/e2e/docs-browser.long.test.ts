import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium } from 'playwright-core';
import { cli, type Server, serve } from './process.js';

const CHROMIUM = process.env.PLANTSTORE_TEST_CHROMIUM ?? '/usr/bin/chromium';
// Screenshots land here (gitignored), one folder per run of this file.
const OUT = fileURLToPath(new URL('../../test-output/docs', import.meta.url));
// Without Chromium (a laptop without Debian's package) the suite says so and skips; in CI it must run.
const skip = existsSync(CHROMIUM)
  ? false
  : process.env.CI === 'true'
    ? false
    : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set PLANTSTORE_TEST_CHROMIUM)`;

describe('in Chromium: /docs as a person meets it, and the client in a browser', { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-docs-'));
  const env = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}` };
  let server: Server;
  let browser: Browser;
  let token: string;
  before(async () => {
    mkdirSync(OUT, { recursive: true });
    server = await serve([], env);
    token = (await cli(['token', 'create', '--user', 'docs-reader'], env)).stdout.trim();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends nothing off the machine, offers no hosted or AI feature, and carries plantstore’s title and icon', async () => {
    const page = await browser.newPage();
    const origins = new Set<string>();
    page.on('request', (r) => origins.add(new URL(r.url()).origin));
    await page.goto(`${server.url}/docs`);
    await page
      .getByRole('button', { name: /Test Request.*post \/plants/ })
      .first()
      .waitFor();
    await page.waitForLoadState('networkidle');
    await page.screenshot({ path: join(OUT, 'reference.png'), fullPage: false });
    assert.equal(await page.title(), 'plantstore API reference');
    assert.equal(await page.locator('link[rel~="icon"]').first().getAttribute('href'), '/favicon.svg');
    const icon = await page.request.get(`${server.url}/favicon.ico`);
    assert.deepEqual([icon.status(), icon.headers()['content-type']], [200, 'image/svg+xml']);
    // The document's server is this service, so every snippet works when pasted.
    assert.match(await page.locator('body').innerText(), new RegExp(server.url.replace(/\./g, '\\.')));
    const text = await page.locator('body').innerText();
    for (const feature of [
      /Ask AI/i,
      /Generate MCP/i,
      /\bDeploy\b/,
      /\bShare\b/,
      /Developer Tools/i,
      /Open API Client/,
    ]) {
      assert.doesNotMatch(text, feature);
    }
    const links = await page.$$eval('a[href]', (as) => as.map((a) => (a as HTMLAnchorElement).href));
    assert.ok(
      !links.some((h) => /client\.scalar\.com|registry\.scalar\.com|dashboard\.scalar\.com/.test(h)),
      links.join(' '),
    );
    assert.deepEqual([...origins], [server.url], 'every request went to this service');
    await page.close();
  });

  it('a person who enters a token and sends the create example gets 201, and the plant exists', async () => {
    const page = await browser.newPage();
    const origins = new Set<string>();
    page.on('request', (r) => origins.add(new URL(r.url()).origin));
    await page.goto(`${server.url}/docs`);
    await page.getByPlaceholder('Token').first().fill(token);
    await page
      .getByRole('button', { name: /Test Request.*post \/plants/ })
      .first()
      .click();
    const answered = page.waitForResponse(
      (r) => r.url() === `${server.url}/plants` && r.request().method() === 'POST',
    );
    await page.getByRole('button', { name: /Send/ }).first().click();
    const res = await answered;
    assert.equal(res.status(), 201, await res.text());
    assert.deepEqual(await res.json(), { name: 'Monstera', tag: 'indoor' });
    await page.getByText('201 Created').first().waitFor();
    await page.screenshot({ path: join(OUT, 'create-201.png') });
    const id = /\/plants\/(\d+)$/.exec((await res.headerValue('location')) ?? '')?.[1];
    const listed = await cli(['plants', 'get', id!], { PLANTSTORE_URL: server.url, PLANTSTORE_TOKEN: token });
    assert.equal(listed.stdout, `${id}\tMonstera\tindoor\n`);
    assert.deepEqual([...origins], [server.url]);
    await page.close();
  });

  it('the typed client runs in the browser: create, list every page, read, verify a signature', async () => {
    const page = await browser.newPage();
    const origins = new Set<string>();
    page.on('request', (r) => origins.add(new URL(r.url()).origin));
    // A page of the service's own origin, so that the client's requests are same-origin.
    await page.goto(`${server.url}/healthz`);
    // The built module as shipped (dist/client/index.js: no imports at run time).
    const code = readFileSync(fileURLToPath(new URL('../../dist/client/index.js', import.meta.url)), 'utf8');
    assert.doesNotMatch(code, /^import /m, 'the client has no run-time imports');
    await page.addScriptTag({
      type: 'module',
      content: `${code}\nwindow.plantstoreClient = { PlantStore, signWebhook, verifyWebhook };`,
    });
    await page.waitForFunction(() => 'plantstoreClient' in window);
    const out = await page.evaluate(
      async ({ url, token }) => {
        // biome-ignore lint/suspicious/noExplicitAny: the module's exports, set on window above
        const { PlantStore, signWebhook, verifyWebhook } = (window as any).plantstoreClient;
        const store = new PlantStore({ url, token });
        const made = [];
        for (let i = 0; i < 5; i++)
          made.push(await store.create({ name: `Browser fern ${i}`, tag: 'browser' }));
        const listed = [];
        for await (const p of store.list({ limit: 2, tag: 'browser' })) listed.push(p.id);
        const one = await store.get(made[2].id);
        const changed = await store.update(made[2].id, { name: 'Browser fern 2b' }, { ifMatch: one.etag });
        const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
        const now = Math.floor(Date.now() / 1000);
        const body = JSON.stringify({
          type: 'plant.created',
          timestamp: new Date().toISOString(),
          data: { id: 1, name: 'x' },
        });
        const headers = {
          'webhook-id': 'evt_1',
          'webhook-timestamp': String(now),
          'webhook-signature': await signWebhook(secret, 'evt_1', now, body),
        };
        const verified = await verifyWebhook(secret, headers, body);
        return { made: made.map((p) => p.id), listed, one, changed, verified: verified.id };
      },
      { url: server.url, token },
    );
    assert.deepEqual(out.listed, out.made);
    assert.deepEqual(out.one, { name: 'Browser fern 2', tag: 'browser', etag: out.one.etag });
    assert.match(out.one.etag, /^"[1-9][0-9]*"$/, 'the ETag header is readable in a browser');
    assert.deepEqual({ ...out.changed, etag: '' }, { name: 'Browser fern 2b', tag: 'browser', etag: '' });
    assert.notEqual(out.changed.etag, out.one.etag);
    assert.equal(out.verified, 'evt_1');
    assert.deepEqual([...origins], [server.url]);
    await page.close();
  });
});
