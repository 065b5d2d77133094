import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import {
  assertClean,
  axeViolations,
  type ConsoleServer,
  consoleServer,
  launch,
  nav,
  open,
  signIn,
  skipBrowser,
} from '../helpers/browser.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

// Contract section 11 at a phone's width (390 × 844) in Debian's Chromium: on every view each
// button, link and field is inside the screen (or inside a box that scrolls, as a wide table's
// row is), none cuts its own text off, the page never scrolls sideways, and axe-core (WCAG 2.2 AA)
// finds no violation in the layout a phone gets. Each view's screenshot
// is written to /tmp/console-phone-<view>.png to be looked at.
describe('the web console in Chromium at a phone’s width', { skip: skipBrowser, timeout: 180_000 }, () => {
  let srv: ConsoleServer;
  let browser: Browser;
  let receiver: Receiver;
  before(async () => {
    srv = await consoleServer([], { WEBHOOK_ALLOW_PRIVATE: 'true' });
    browser = await launch();
    receiver = await startReceiver();
  });
  after(async () => {
    await browser?.close();
    await srv?.stop();
    await receiver?.close();
  });

  /** Every control the person could not use fully at this width, described; [] when all are usable. */
  const unusable = (page: Page) =>
    page.evaluate(() => {
      const width = document.documentElement.clientWidth;
      const found: string[] = [];
      if (document.documentElement.scrollWidth > width)
        found.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} > ${width}`);
      for (const el of document.querySelectorAll('button, a, input, select, textarea, summary')) {
        if (el.closest('.visually-hidden, .skip')) continue;
        const r = el.getBoundingClientRect();
        if (r.width <= 1 || r.height <= 1 || getComputedStyle(el).visibility === 'hidden') continue;
        const name = `${el.tagName.toLowerCase()} “${(el.textContent || el.getAttribute('aria-label') || (el as HTMLInputElement).labels?.[0]?.textContent || '').trim().slice(0, 40)}”`;
        // The nearest box that scrolls sideways (a table's), if any. (No named function in here:
        // tsx would wrap it in a helper the page does not have.)
        let box: Element | null = null;
        for (let p = el.parentElement; p && !box; p = p.parentElement) {
          const o = getComputedStyle(p).overflowX;
          if (o === 'auto' || o === 'scroll') box = p;
        }
        // Inside a box that scrolls: the box is on the screen, and scrolling it reaches the control.
        const frame = box ? box.getBoundingClientRect() : { left: 0, right: width };
        if (frame.left < -0.5 || frame.right > width + 0.5)
          found.push(`${name}: its scrolling box is off the screen (${frame.left}–${frame.right})`);
        if (!box && (r.left < -0.5 || r.right > width + 0.5))
          found.push(`${name}: ${Math.round(r.left)}–${Math.round(r.right)} is outside 0–${width}`);
        // Its own text is not cut off.
        if (el.tagName !== 'INPUT' && el.tagName !== 'SELECT' && el.scrollWidth > el.clientWidth + 1)
          found.push(`${name}: its text overflows it (${el.scrollWidth} > ${el.clientWidth})`);
        // Not hidden under something clipping it (an ancestor with overflow hidden narrower than it).
        for (let p = el.parentElement; p && p !== box; p = p.parentElement) {
          const s = getComputedStyle(p);
          if (s.overflowX === 'hidden' || s.overflowX === 'clip') {
            const q = p.getBoundingClientRect();
            if (r.left < q.left - 0.5 || r.right > q.right + 0.5)
              found.push(`${name}: clipped by its container`);
            break;
          }
        }
      }
      return found;
    });

  it('every view: no control clipped or off the screen, no sideways scroll, the header compact', async () => {
    const u = await srv.user('phone', ['plants:read', 'plants:write', 'tokens:manage']);
    const garden = await srv.api(u.token, '/gardens', {
      method: 'POST',
      body: JSON.stringify({ name: 'Balcony with a rather long name for a phone' }),
    });
    const gid = ((await garden.json()) as { id: string }).id;
    await srv.api(u.token, `/gardens/${gid}/members/someone-with-a-long-user-name`, {
      method: 'PUT',
      body: JSON.stringify({ role: 'editor' }),
    });
    for (const name of ['Monstera deliciosa', 'Ficus lyrata with a long descriptive name', 'Fern'])
      await srv.plant(u.token, { name, tag: 'indoor' });
    const url = `${receiver.url}/a/rather/long/path/for-webhooks/that-does-not-fit-on-a-phone?token=abcdef`;
    const hook = await srv.api(u.token, '/webhooks', { method: 'POST', body: JSON.stringify({ url }) });
    assert.equal(hook.status, 201);

    const { context, page, watch } = await open(browser, {
      viewport: { width: 390, height: 844 },
      isMobile: true,
      hasTouch: true,
      deviceScaleFactor: 1,
    });
    const found: string[] = [];
    const check = async (view: string) => {
      found.push(...(await unusable(page)).map((f) => `${view}: ${f}`));
      // The rows shown as cards keep their table's semantics: axe finds nothing at this width either.
      found.push(...(await axeViolations(page, `${view} at 390 px`)));
      await page.screenshot({ path: `/tmp/console-phone-${view}.png`, fullPage: true });
    };
    await page.goto(`${srv.url}/console/`);
    await page.getByLabel('Access token').waitFor();
    await check('sign-in');
    await signIn(page, srv.url, u.token);
    await page.getByRole('cell', { name: 'Fern', exact: true }).waitFor();
    await check('plants');
    // The header and navigation take at most a fifth of the screen.
    const top = await page.getByRole('navigation').evaluate((n) => n.getBoundingClientRect().bottom);
    assert.ok(top <= 844 / 5 + 20, `the header and navigation end at ${top} px`);

    await page.getByRole('button', { name: 'New plant' }).click();
    await page.getByRole('button', { name: 'Create', exact: true }).waitFor();
    await check('plants-new');
    await page.getByRole('button', { name: 'History Fern', exact: true }).click();
    await page.getByRole('dialog').getByRole('row').filter({ hasText: 'Created' }).waitFor();
    await check('plants-history');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    await page.getByRole('button', { name: 'Delete Fern', exact: true }).click();
    await page.getByRole('dialog').waitFor();
    await check('plants-delete');
    await page.getByRole('dialog').getByRole('button', { name: 'Delete', exact: true }).click();
    await page.getByRole('button', { name: 'Undo', exact: true }).waitFor();
    await check('plants-undo');

    await nav(page, 'Trash');
    await page.getByRole('button', { name: 'Delete forever Fern', exact: true }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete forever', exact: true }).waitFor();
    await check('trash-dialog');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    await check('trash');

    await nav(page, 'Gardens');
    await page.getByRole('button', { name: /^Open Balcony/ }).click();
    await page.getByRole('combobox', { name: 'Role of someone-with-a-long-user-name' }).waitFor();
    await page.getByRole('cell', { name: 'Member added', exact: true }).first().waitFor();
    await check('gardens');

    const opened = page.waitForResponse((r) => new URL(r.url()).pathname === '/events');
    await nav(page, 'Live');
    await opened;
    await srv.plant(u.token, { name: 'A plant made while watching' }, gid);
    await page.getByRole('cell', { name: 'A plant made while watching', exact: true }).waitFor();
    await check('live');

    await nav(page, 'Webhooks');
    await page.getByRole('button', { name: `Deliveries of ${url}` }).click();
    await page.getByRole('heading', { name: `Deliveries of ${url}` }).waitFor();
    // The URL is on one line (cut with an ellipsis, whole in its title), never broken mid-word.
    const cell = page.getByRole('table').first().locator('.url').first();
    assert.equal(await cell.getAttribute('title'), url);
    assert.equal(await cell.evaluate((e) => getComputedStyle(e).whiteSpace), 'nowrap');
    await check('webhooks');

    await nav(page, 'Tokens');
    await page.getByText('phone console test').first().waitFor();
    assert.equal(
      await page
        .locator('code.id')
        .first()
        .evaluate((e) => getComputedStyle(e).whiteSpace),
      'nowrap',
      'a token id is never broken',
    );
    await check('tokens');

    assert.deepEqual(found, [], 'every control is usable at 390 px, and axe-core finds no violation');
    assertClean(watch, [srv.url]);
    await context.close();
  });
});
