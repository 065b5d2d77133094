import assert from 'node:assert/strict';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { Browser, Page } from 'playwright-core';
import {
  assertClean,
  assertNotInUrls,
  type ConsoleServer,
  consoleCsp,
  consoleServer,
  eventually,
  launch,
  open,
  plantForm,
  plantNames,
  signedIn,
  signIn,
  skipBrowser,
  tabTo,
} from '../helpers/browser.js';

// Contract section 11 in Debian's Chromium against a real `bin/plantstore serve` (fresh SQLite):
// the console's headers, framing, signing in and keeping the token, and its size. Every control is
// found by the name section 11 gives it, the way a person with a screen reader finds it.
describe('the web console in Chromium: headers, framing, signing in, the token, size', {
  skip: skipBrowser,
  timeout: 240_000,
}, () => {
  let srv: ConsoleServer;
  let browser: Browser;
  before(async () => {
    srv = await consoleServer();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await srv?.stop();
  });

  it('/console/ carries section 11’s CSP, nosniff and no-referrer; index.html is not cached, hashed files are immutable', async () => {
    const res = await fetch(`${srv.url}/console/`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.equal(res.headers.get('content-security-policy'), consoleCsp());
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
    assert.match(res.headers.get('cache-control') ?? '', /no-store|no-cache/, 'index.html is not cached');
    const html = await res.text();
    // No inline script or style: the CSP would refuse them.
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/i, 'no inline script');
    assert.doesNotMatch(html, /<style[\s>]|\sstyle=/i, 'no inline style');
    const assets = [...html.matchAll(/(?:src|href)="([^"]+\.(?:js|css))"/g)].map(
      (m) => new URL(m[1]!, `${srv.url}/console/`).href,
    );
    assert.ok(
      assets.some((a) => a.endsWith('.js')),
      `index.html loads a script: ${html}`,
    );
    let hashed = 0;
    for (const asset of assets) {
      const a = await fetch(asset);
      assert.equal(a.status, 200, asset);
      assert.equal(a.headers.get('x-content-type-options'), 'nosniff', asset);
      assert.match(a.headers.get('content-type') ?? '', asset.endsWith('.js') ? /javascript/ : /text\/css/);
      // Vite's names: name-<hash>.js, the hash 8 characters of base64url.
      if (/-[A-Za-z0-9_-]{8,}\.(js|css)$/.test(new URL(asset).pathname)) {
        hashed++;
        const cc = a.headers.get('cache-control') ?? '';
        assert.match(cc, /\bimmutable\b/, `${asset}: ${cc}`);
        assert.ok(Number(/max-age=([0-9]+)/.exec(cc)?.[1]) >= 86_400 * 30, `${asset}: ${cc}`);
      }
    }
    assert.ok(hashed > 0, `files named with a content hash among ${assets.join(' ')}`);
  });

  it('GET / redirects to /console/, and with --no-console both are 404', async () => {
    const res = await fetch(`${srv.url}/`, { redirect: 'manual' });
    assert.ok([301, 302, 303, 307, 308].includes(res.status), `status ${res.status}`);
    assert.equal(new URL(res.headers.get('location') ?? '', `${srv.url}/`).href, `${srv.url}/console/`);
    const off = await consoleServer(['--no-console']);
    try {
      for (const path of ['/', '/console/']) {
        const r = await fetch(`${off.url}${path}`, { redirect: 'manual' });
        assert.equal(r.status, 404, path);
      }
    } finally {
      await off.stop();
    }
  });

  it('a page of another origin that frames /console/ gets nothing rendered (frame-ancestors none)', async () => {
    // Another origin: another host name and port. /healthz, which sets no frame-ancestors, is the
    // control that shows this page can frame the service at all.
    const framer = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(
        `<!doctype html><title>framer</title>` +
          `<iframe name="console" src="${srv.url}/console/"></iframe>` +
          `<iframe name="control" src="${srv.url}/healthz"></iframe>`,
      );
    });
    await new Promise<void>((done) => framer.listen(0, '127.0.0.1', done));
    const framerUrl = `http://localhost:${(framer.address() as AddressInfo).port}/`;
    const { context, page } = await open(browser);
    const refused: string[] = [];
    page.on('console', (m) => {
      if (/frame-ancestors/.test(m.text())) refused.push(m.text());
    });
    try {
      await page.goto(framerUrl, { waitUntil: 'load' });
      const control = page.frame({ name: 'control' })!;
      await eventually('the control frame renders /healthz', async () =>
        /\S/.test(await control.locator('body').innerText()),
      );
      await eventually('Chromium reports the frame-ancestors refusal', async () => refused.length > 0);
      const framed = page.frame({ name: 'console' })!;
      assert.notEqual(framed.url(), `${srv.url}/console/`, 'the framed console did not load');
      assert.equal(await framed.getByLabel('Access token').count(), 0, 'nothing of the console is shown');
      // Chromium shows its own error page in the frame's place, none of the console's document.
      assert.doesNotMatch(await framed.content(), /plantstore console|Access token/);
    } finally {
      await context.close();
      framer.closeAllConnections();
      await new Promise((done) => framer.close(done));
    }
  });

  it('the checks see what they look for: a CSP violation and an injected script are caught (a check of the checks)', async () => {
    const { context, page, watch } = await open(browser);
    await page.goto(`${srv.url}/console/`);
    await page.getByLabel('Access token').waitFor();
    assertClean(watch, [srv.url]);
    await page.evaluate(() => {
      const img = document.createElement('img');
      img.src = 'http://localhost:1/pixel.png';
      document.body.append(img);
      const script = document.createElement('script');
      script.textContent = 'window.injected = true';
      document.head.append(script);
    });
    await eventually('both violations reported', async () => watch.violations.length >= 2);
    assert.equal(await page.evaluate(() => 'injected' in window), false, 'the inline script did not run');
    assert.throws(() => assertClean(watch, [srv.url]), /Content-Security-Policy|own origin/);
    await context.close();
  });

  it('a person signs in and creates a plant with the keyboard alone', async () => {
    const u = await srv.user('keyboard');
    const { context, page, watch } = await open(browser);
    await page.goto(`${srv.url}/console/`);
    await page.getByLabel('Access token').waitFor();
    // OpenID sign-in is off here (no --console-client-id): its button is not offered.
    assert.equal(await page.getByRole('button', { name: 'Sign in with your identity provider' }).count(), 0);
    await tabTo(page, page.getByLabel('Access token'));
    await page.keyboard.type(u.token);
    await tabTo(page, page.getByRole('button', { name: 'Sign in', exact: true }));
    await page.keyboard.press('Enter');
    await signedIn(page);

    await tabTo(page, page.getByRole('button', { name: 'New plant' }));
    await page.keyboard.press('Enter');
    const form = plantForm(page);
    await tabTo(page, form.getByLabel('Name', { exact: true }));
    await page.keyboard.type('Keyboard fern');
    await tabTo(page, form.getByLabel('Tag', { exact: true }));
    await page.keyboard.type('by-keys');
    await tabTo(page, form.getByRole('button', { name: 'Create', exact: true }));
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: 'Delete Keyboard fern' }).waitFor();
    const res = await srv.api(u.token, '/plants?tag=by-keys');
    assert.deepEqual(await res.json(), [{ name: 'Keyboard fern', tag: 'by-keys' }]);

    // And deletes it, confirming in the page's dialog, by keyboard too.
    await tabTo(page, page.getByRole('button', { name: 'Delete Keyboard fern' }));
    await page.keyboard.press('Enter');
    await tabTo(page, page.getByRole('dialog').getByRole('button', { name: 'Delete', exact: true }));
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: 'Delete Keyboard fern' }).waitFor({ state: 'detached' });
    assert.deepEqual(await plantNames(srv, u.token), []);
    assertNotInUrls(watch, u.token);
    assertClean(watch, [srv.url]);
    await context.close();
  });

  /** What the page keeps: every storage entry and cookie. */
  async function kept(page: Page) {
    return {
      session: await page.evaluate(() => Object.entries(sessionStorage)),
      local: await page.evaluate(() => Object.entries(localStorage)),
      cookies: await page.context().cookies(),
      documentCookie: await page.evaluate(() => document.cookie),
    };
  }

  it('the token stays in memory; "Remember in this tab" keeps it in sessionStorage only; "Sign out" forgets it', async () => {
    const u = await srv.user('storage');
    const { context, page, watch } = await open(browser);

    // Without the box: nothing is stored, and a reload signs out.
    await signIn(page, srv.url, u.token);
    let now = await kept(page);
    assert.ok(!JSON.stringify(now).includes(u.token), `the token is stored nowhere: ${JSON.stringify(now)}`);
    assert.deepEqual(now.cookies, []);
    await page.reload();
    await page.getByLabel('Access token').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Sign out' }).count(), 0);

    // With it: sessionStorage alone holds it, and a reload stays signed in.
    await signIn(page, srv.url, u.token, { remember: true });
    now = await kept(page);
    assert.ok(
      now.session.some(([, v]) => v.includes(u.token)),
      `sessionStorage holds it: ${JSON.stringify(now)}`,
    );
    assert.ok(!JSON.stringify(now.local).includes(u.token), 'never in localStorage');
    assert.deepEqual(now.cookies, [], 'never in a cookie');
    await page.reload();
    await signedIn(page);

    // "Sign out": nothing left but the theme preference, and a reload stays signed out.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Access token').waitFor();
    now = await kept(page);
    assert.deepEqual(now.session, [], 'sessionStorage is empty after "Sign out"');
    assert.deepEqual(
      now.local.filter(([k]) => !/theme/i.test(k)),
      [],
      'localStorage holds nothing but the theme',
    );
    assert.deepEqual(now.cookies, []);
    assert.equal(now.documentCookie, '');
    await page.reload();
    await page.getByLabel('Access token').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Sign out' }).count(), 0);

    assertNotInUrls(watch, u.token);
    assert.ok(!page.url().includes(u.token));
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('the JavaScript and CSS loaded to sign in and show the plants are at most 100 KB gzip', async (t) => {
    const u = await srv.user('size');
    await srv.plant(u.token, { name: 'Weighed fern' });
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await page.getByText('Weighed fern', { exact: true }).waitFor();
    const files = [
      ...new Set(
        watch.requests
          .filter((r) => r.resourceType() === 'script' || r.resourceType() === 'stylesheet')
          .map((r) => r.url()),
      ),
    ];
    assert.ok(files.length > 0);
    let total = 0;
    const sizes: string[] = [];
    for (const file of files) {
      const bytes = await gzipped(file);
      sizes.push(`${new URL(file).pathname} ${bytes}`);
      total += bytes;
    }
    t.diagnostic(`JS + CSS to sign in and show the plants: ${total} bytes gzip (${sizes.join(', ')})`);
    assert.ok(total <= 100_000, `JS + CSS ${total} bytes gzip > 100 KB: ${sizes.join(', ')}`);
    assertClean(watch, [srv.url]);
    await context.close();
  });
});

/** The bytes of `url` as sent with Accept-Encoding: gzip, or gzipped here when the service sends it plain. */
function gzipped(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    httpRequest(url, { headers: { 'accept-encoding': 'gzip' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve(res.headers['content-encoding'] === 'gzip' ? body.length : gzipSync(body).length);
      });
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}
