import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import {
  assertClean,
  type ConsoleServer,
  consoleServer,
  launch,
  open,
  plantNames,
  signIn,
  skipBrowser,
} from '../helpers/browser.js';

// Contract section 11 (version 4) in Debian's Chromium: "Search plants" as the person types,
// "Import CSV" with each refused row shown and nothing created, then a good file, and "Export CSV"
// of what the filters show.
describe('the web console in Chromium: search, import and export', {
  skip: skipBrowser,
  timeout: 120_000,
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

  it('imports files as spreadsheets save them: Windows-1252 refused with how to save it, nothing created; German Excel’s ; with a BOM created with its names intact', async () => {
    const u = await srv.user('sheets');
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await page.getByText('No plants here yet.').waitFor();
    const pick = async (name: string, buffer: Buffer) => {
      const chooser = page.waitForEvent('filechooser');
      await page.getByRole('button', { name: 'Import CSV' }).click();
      await (await chooser).setFiles({ name, mimeType: 'text/csv', buffer });
    };
    // Excel's "CSV (Comma delimited)" on Windows: Windows-1252, ö = 0xF6, ä = 0xE4.
    await pick('excel.csv', Buffer.from('name,tag\r\nGr\xf6\xdfe F\xe4cherpalme,indoor\r\n', 'latin1'));
    const alert = page.getByRole('alert').filter({ hasText: 'Nothing was created from excel.csv.' });
    await alert.waitFor();
    const said = await alert.innerText();
    assert.match(said, /UTF-8/);
    assert.match(said, /CSV UTF-8/, 'says how to save it');
    assert.doesNotMatch(said, /\uFFFD/);
    assert.deepEqual(await plantNames(srv, u.token), [], 'nothing was created');

    // German Excel's "CSV UTF-8": a BOM, ';' between cells.
    const german = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from('name;tag\r\nGröße Fächerpalme;drinnen\r\nMonstera, groß;\r\n'),
    ]);
    await pick('deutsch.csv', german);
    await page.getByRole('status').filter({ hasText: 'Created 2 plants from deutsch.csv.' }).waitFor();
    await page.getByRole('cell', { name: 'Größe Fächerpalme', exact: true }).waitFor();
    assert.equal(await alert.count(), 0, 'the refusal is gone');
    assert.deepEqual((await plantNames(srv, u.token)).sort(), ['Größe Fächerpalme', 'Monstera, groß']);
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('searches as the person types, imports a CSV (refused rows shown, then a good one) and exports the search', async () => {
    const u = await srv.user('search');
    for (const name of ['Monstera deliciosa', 'Café rose', 'Boston fern']) await srv.plant(u.token, { name });
    const { context, page, watch } = await open(browser, { acceptDownloads: true });
    await signIn(page, srv.url, u.token);
    const rows = page.getByRole('table').getByRole('row');
    await rows.filter({ hasText: 'Boston fern' }).waitFor();

    await page.getByRole('searchbox', { name: 'Search plants' }).pressSequentially('MON del', { delay: 30 });
    await rows.filter({ hasText: 'Boston fern' }).waitFor({ state: 'detached' });
    assert.deepEqual(await page.getByRole('table').locator('tbody td:first-child').allTextContents(), [
      'Monstera deliciosa',
    ]);
    await page.getByRole('searchbox', { name: 'Search plants' }).fill('cafe');
    await rows.filter({ hasText: 'Café rose' }).waitFor();

    // A file with two bad rows: each named with its reason, nothing created.
    const pick = async (name: string, text: string) => {
      const chooser = page.waitForEvent('filechooser');
      await page.getByRole('button', { name: 'Import CSV' }).click();
      await (await chooser).setFiles({ name, mimeType: 'text/csv', buffer: Buffer.from(text) });
    };
    await pick('bad.csv', 'name,tag\r\nCafé crème,\r\n,x\r\nOk,  \r\n');
    const alert = page.getByRole('alert').filter({ hasText: 'Nothing was created from bad.csv' });
    await alert.waitFor();
    assert.deepEqual(await alert.getByRole('listitem').allTextContents(), [
      'Row 2, name: must not be empty',
      'Row 3, tag: must not be blank',
    ]);
    assert.equal((await plantNames(srv, u.token)).length, 3, 'nothing was created');

    await pick('good.csv', 'name,tag\r\nCafé crème,pink\r\n=Cafe au lait,\r\n');
    await page.getByRole('status').filter({ hasText: 'Created 2 plants from good.csv.' }).waitFor();
    await rows.filter({ hasText: 'Café crème' }).waitFor();

    // Export CSV: what the search shows, formula-safe, the service's bytes as they are (its BOM
    // included); "Export for Excel (;)" the same with ';' between cells.
    const exported = async (link: string, query: string) => {
      const downloading = page.waitForEvent('download');
      await page.getByRole('link', { name: link, exact: true }).click();
      const got = readFileSync(await (await downloading).path());
      const sent = await srv.api(u.token, `/plants/export?format=csv&q=cafe${query}`);
      assert.deepEqual(got, Buffer.from(await sent.arrayBuffer()), `${link}: the bytes the service sent`);
      assert.deepEqual([...got.subarray(0, 3)], [0xef, 0xbb, 0xbf], `${link}: the BOM Excel needs`);
      return got.toString('utf8').slice(1).split('\r\n');
    };
    const csv = await exported('Export CSV', '');
    assert.equal(csv[0], 'id,name,tag,garden');
    assert.deepEqual(
      csv.slice(1, -1).map((l) => l.split(',')[1]),
      ['Café rose', 'Café crème', "'=Cafe au lait"],
    );
    const semi = await exported('Export for Excel (;)', '&delimiter=%3B');
    assert.equal(semi[0], 'id;name;tag;garden');
    assert.deepEqual(
      semi.slice(1, -1).map((l) => l.split(';')[1]),
      ['Café rose', 'Café crème', "'=Cafe au lait"],
    );
    assertClean(watch, [srv.url]);
    await context.close();
  });
});
