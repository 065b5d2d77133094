import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
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

describe('/docs as a person meets it, in Chromium (CONTRACT.md section 9)', { skip }, () => {
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
});
