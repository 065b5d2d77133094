import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import {
  assertClean,
  type ConsoleServer,
  confirm,
  consoleServer,
  holdAnswers,
  launch,
  open,
  plantForm,
  plantNames,
  signedIn,
  signIn,
  skipBrowser,
} from '../helpers/browser.js';
import { until } from '../helpers/wait.js';

// Contract section 11's Plants view in Debian's Chromium against a real `bin/plantstore serve` (fresh
// SQLite): create, delete with the page's own dialog, pages, filters, a conflicting change, and
// names that would be markup if the page ever rendered them as HTML.
describe('the web console in Chromium: plants', {
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

  it('a plant made through the page (into a chosen garden) and deleted, with a confirmation dialog of the page', async () => {
    const u = await srv.user('plants');
    const made = await srv.api(u.token, '/gardens', {
      method: 'POST',
      body: JSON.stringify({ name: 'Porch' }),
    });
    const porch = ((await made.json()) as { id: string }).id;
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await page.getByRole('button', { name: 'New plant' }).click();
    const form = plantForm(page);
    await form.getByLabel('Name', { exact: true }).fill('Page monstera');
    await form.getByLabel('Tag', { exact: true }).fill('indoor');
    await form.getByLabel('Garden', { exact: true }).selectOption({ label: 'Porch' });
    await form.getByRole('button', { name: 'Create', exact: true }).click();
    const del = page.getByRole('button', { name: 'Delete Page monstera', exact: true });
    await del.waitFor();
    const inPorch = await srv.api(u.token, `/gardens/${porch}/plants`);
    assert.deepEqual(await inPorch.json(), [{ name: 'Page monstera', tag: 'indoor' }]);

    // A page's dialog, not the browser's confirm(): Cancel keeps the plant.
    await del.click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Cancel', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.deepEqual(await plantNames(srv, u.token), ['Page monstera']);
    await del.click();
    await confirm(page, 'Delete');
    await del.waitFor({ state: 'detached' });
    assert.deepEqual(await plantNames(srv, u.token), []);
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('nothing moves when the list ends loading: "New plant" is where it was while "Loading…" showed', async () => {
    // A press and its release must land on the same button for a click: a button that moved
    // between them (the list arriving) would take none, and its form would not open.
    const u = await srv.user('still');
    await srv.plant(u.token, { name: 'Still fern' });
    const { context, page, watch } = await open(browser);
    const release = await holdAnswers(page, '/plants');
    await signIn(page, srv.url, u.token);
    const button = page.getByRole('button', { name: 'New plant' });
    await page.getByRole('status').filter({ hasText: 'Loading…' }).waitFor();
    const loading = await button.boundingBox();
    await release();
    await page.getByRole('cell', { name: 'Still fern', exact: true }).waitFor();
    await page.getByRole('status').filter({ hasText: 'Loading…' }).waitFor({ state: 'detached' });
    assert.ok(loading);
    assert.deepEqual(await button.boundingBox(), loading);
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('the plants view pages through the Link header, every plant on one page and none twice', async () => {
    const u = await srv.user('pages');
    const { context, page, watch } = await open(browser);
    const firstList = page.waitForRequest((r) => new URL(r.url()).pathname === '/plants');
    await signIn(page, srv.url, u.token, { remember: true });
    const limit = Number(new URL((await firstList).url()).searchParams.get('limit') ?? 100);
    const count = 2 * limit + 3;
    const name = (i: number) => `Paged plant ${String(i).padStart(4, '0')}`;
    for (let i = 1; i <= count; i += 20) {
      await Promise.all(
        Array.from({ length: Math.min(20, count - i + 1) }, (_, k) =>
          srv.plant(u.token, { name: name(i + k) }),
        ),
      );
    }
    await page.reload();
    await signedIn(page);
    for (let first = 1; first <= count; first += limit) {
      const last = Math.min(first + limit - 1, count);
      await page.getByText(name(first), { exact: true }).waitFor();
      await page.getByText(name(last), { exact: true }).waitFor();
      const next = page.getByRole('button', { name: /^(next|next page|more|load more|show more)$/i });
      if (last === count) {
        assert.ok(
          (await next.count()) === 0 || (await next.isDisabled()),
          'no next page after the last plant',
        );
        break;
      }
      assert.equal(await page.getByText(name(last + 1), { exact: true }).count(), 0, 'a page ends at limit');
      await next.click();
    }
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('the plants view filters by tag and by garden, and pages within a filter', async () => {
    const u = await srv.user('filter');
    const made = await srv.api(u.token, '/gardens', {
      method: 'POST',
      body: JSON.stringify({ name: 'Shelf' }),
    });
    const shelf = ((await made.json()) as { id: string }).id;
    const name = (i: number) => `Sunny ${String(i).padStart(2, '0')}`;
    await srv.plant(u.token, { name: 'Shady one' });
    for (let i = 1; i <= 25; i++) await srv.plant(u.token, { name: name(i), tag: 'sunny' });
    await srv.plant(u.token, { name: 'Shelf fern', tag: 'sunny' }, shelf);
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await page.getByRole('cell', { name: 'Shady one', exact: true }).waitFor();

    const lists: URL[] = [];
    page.on('request', (r) => {
      const url = new URL(r.url());
      if (url.pathname === '/plants') lists.push(url);
    });
    await page.getByLabel('Filter by tag').fill('sunny');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.getByRole('cell', { name: 'Shady one', exact: true }).waitFor({ state: 'detached' });
    await page.getByRole('cell', { name: name(20), exact: true }).waitFor();
    assert.equal(await page.getByRole('cell', { name: name(21), exact: true }).count(), 0, 'a page of 20');
    await page.getByRole('button', { name: /^next/i }).click();
    await page.getByRole('cell', { name: 'Shelf fern', exact: true }).waitFor();
    await page.getByRole('cell', { name: name(25), exact: true }).waitFor();
    assert.equal(await page.getByRole('cell', { name: name(20), exact: true }).count(), 0);
    assert.ok(
      lists.length >= 2 && lists.every((l) => l.searchParams.get('tag') === 'sunny'),
      lists.join(' '),
    );
    assert.ok(
      lists.some((l) => l.searchParams.has('cursor')),
      'the second page follows the Link',
    );

    await page.getByLabel('Filter by tag').fill('');
    await page.getByLabel('Filter by garden').selectOption({ label: 'Shelf' });
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.getByRole('cell', { name: name(21), exact: true }).waitFor({ state: 'detached' });
    await page.getByRole('cell', { name: 'Shelf fern', exact: true }).waitFor();
    assert.equal(await page.getByRole('cell', { name: /^Sunny/ }).count(), 0);
    assert.equal(lists.at(-1)?.searchParams.get('garden'), shelf);
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('a change refused with 412 shows the current values and lets the person apply it again', async () => {
    const u = await srv.user('conflict');
    const id = await srv.plant(u.token, { name: 'Conflict fern', tag: 'before' });
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await page.getByRole('button', { name: /^(Edit|Change) Conflict fern$/ }).click();
    const form = page
      .getByRole('form', { name: /(edit|change)/i })
      .or(page.getByRole('dialog', { name: /(edit|change)/i }));
    await form.getByLabel('Name', { exact: true }).fill('Page fern');

    // Someone else changes it meanwhile.
    const read = await srv.api(u.token, `/plants/${id}`);
    const patched = await srv.api(u.token, `/plants/${id}`, {
      method: 'PATCH',
      headers: { 'if-match': read.headers.get('etag')!, 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ name: 'API fern', tag: 'api' }),
    });
    assert.equal(patched.status, 200);

    const refused = page.waitForResponse((r) => r.request().method() === 'PATCH');
    await form.getByRole('button', { name: /^(save|change|apply)/i }).click();
    assert.equal((await refused).status(), 412);
    // The current values are shown...
    await page.getByText('API fern').first().waitFor();
    await page.getByText('api', { exact: true }).first().waitFor();
    // ...and the change can be applied again.
    const applied = page.waitForResponse((r) => r.request().method() === 'PATCH');
    await page.getByRole('button', { name: /again|anyway|overwrite|re-?apply/i }).click();
    assert.equal((await applied).status(), 200);
    await until('the change applied', async () => {
      const now = (await (await srv.api(u.token, `/plants/${id}`)).json()) as { name: string };
      return now.name === 'Page fern' || undefined;
    });
    await page.getByRole('button', { name: 'Delete Page fern' }).waitFor();
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('the list says where the person is, a plant just created is shown (marked, at the top), a blank name is refused with a sentence', async () => {
    const u = await srv.user('position');
    const name = (i: number) => `Earlier ${String(i).padStart(2, '0')}`;
    for (let i = 1; i <= 25; i++) await srv.plant(u.token, { name: name(i) });
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await page.getByText('Page 1 · plants 1–20', { exact: true }).waitFor();
    await page.getByRole('button', { name: /^next/i }).click();
    await page.getByText('Page 2 · plants 21–25', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Previous', exact: true }).click();
    await page.getByText('Page 1 · plants 1–20', { exact: true }).waitFor();

    // A blank name: the service's 400 as a sentence, not "(/name: must not be blank)".
    await page.getByRole('button', { name: 'New plant' }).click();
    const form = plantForm(page);
    await form.getByLabel('Name', { exact: true }).fill('   ');
    await form.getByRole('button', { name: 'Create', exact: true }).click();
    assert.equal(await form.getByRole('alert').innerText(), 'Name must not be blank.');

    // Created, it belongs on page 2 (id order); it is shown here, at the top of page 1, marked.
    await form.getByLabel('Name', { exact: true }).fill('Brand new monstera');
    await form.getByRole('button', { name: 'Create', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Created “Brand new monstera”' }).waitFor();
    const first = page.getByRole('table').locator('tbody tr').first();
    assert.match(await first.innerText(), /^Brand new monstera new\b/);
    await page.getByRole('button', { name: /^next/i }).click();
    await page.getByText('Page 2 · plants 21–26', { exact: true }).waitFor();
    const cells = page.getByRole('cell', { name: /^Brand new monstera( new)?$/ });
    assert.deepEqual(
      await cells.allInnerTexts(),
      ['Brand new monstera'],
      'once, in its place, no longer marked',
    );
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('a name holding U+202E is isolated: in its row, its buttons’ names and the delete dialog', async () => {
    const u = await srv.user('bidi');
    const hostile = 'abc\u202Edef';
    await srv.plant(u.token, { name: hostile, tag: 'x\u202Ey' });
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    const del = page.getByRole('button', { name: `Delete ${hostile}`, exact: true });
    await del.waitFor();
    // Every element holding the name isolates it (a <bdi>, or unicode-bidi: isolate).
    const isolated = async (scope: import('playwright-core').Locator) =>
      scope.evaluate((root, text) => {
        const holders = [...root.querySelectorAll('*')].filter((e) =>
          [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent?.includes(text)),
        );
        return holders.map((e) => `${e.tagName}:${getComputedStyle(e).unicodeBidi}`);
      }, '\u202E');
    const row = page.getByRole('row').filter({ has: del });
    for (const held of await isolated(row)) assert.match(held, /^BDI:isolate/, `in the row: ${held}`);
    await del.click();
    const dialog = page.getByRole('dialog');
    const held = await isolated(dialog);
    assert.ok(held.length > 0);
    for (const h of held) assert.match(h, /^BDI:isolate/, `in the dialog: ${h}`);
    // The text after the name reads in order: the question's end stays after it.
    assert.match(await dialog.innerText(), /”\? It goes to its garden's trash/);
    await page.screenshot({ path: '/tmp/console-bidi.png' });
    await dialog.getByRole('button', { name: 'Cancel', exact: true }).click();
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('hostile plant names and tags are shown as literal text, and nothing runs', async () => {
    const u = await srv.user('hostile');
    const hostile = [
      '<img src=x onerror=alert(1)>',
      '<script>alert(2)</script>',
      '"><svg onload=alert(3)>',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a template a careless page would fill in
      '<b>bold</b> & &amp; {{7*7}} ${7*7}',
    ];
    for (const [i, name] of hostile.entries())
      await srv.plant(u.token, { name, tag: i === 0 ? '<i onmouseover=alert(4)>t</i>' : undefined });
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    for (const name of hostile) {
      await page.getByText(name, { exact: true }).first().waitFor();
      await page.getByRole('button', { name: `Delete ${name}`, exact: true }).waitFor();
    }
    await page.getByText('<i onmouseover=alert(4)>t</i>', { exact: true }).first().waitFor();
    const injected = await page.evaluate(
      () =>
        document.querySelectorAll('img[src="x"], svg[onload], i[onmouseover], script:not([src])').length +
        [...document.querySelectorAll('b')].filter((b) => b.textContent === 'bold').length,
    );
    assert.equal(injected, 0, 'no element was made from a plant’s name');
    assertClean(watch, [srv.url]);
    await context.close();
  });
});
