import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import {
  assertClean,
  type ConsoleServer,
  confirm,
  consoleServer,
  focused,
  launch,
  nav,
  open,
  plantNames,
  signIn,
  skipBrowser,
} from '../helpers/browser.js';
import { until } from '../helpers/wait.js';

// Contract section 13.5 in Debian's Chromium against a real `bin/plantstore serve` (fresh SQLite):
// "Moved to trash" with "Undo" after a delete, the Trash view (Restore, and Delete forever with the
// page's dialog), a plant's "History <name>" and a garden's activity.
describe('the web console in Chromium: trash, undo, history and activity', {
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

  /** A new garden of `token`'s user; its id. */
  const garden = async (token: string, name: string) => {
    const res = await srv.api(token, '/gardens', { method: 'POST', body: JSON.stringify({ name }) });
    assert.equal(res.status, 201);
    return ((await res.json()) as { id: string }).id;
  };

  it('History of a renamed plant: who, when, its former and new name, older events a page at a time', async () => {
    const u = await srv.user('history');
    const id = await srv.plant(u.token, { name: 'Fern', tag: 'indoor' });
    const rename = (name: string) =>
      srv.api(u.token, `/plants/${id}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/merge-patch+json', 'if-match': '*' },
        body: JSON.stringify({ name }),
      });
    // 21 changes and the create: more than one page of 20.
    for (let i = 1; i <= 20; i++) assert.equal((await rename(`Fern ${i}`)).status, 200);
    assert.equal((await rename('Boston fern')).status, 200);

    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    const opener = page.getByRole('button', { name: 'History Boston fern', exact: true });
    await opener.click();
    const dialog = page.getByRole('dialog', { name: 'History of “Boston fern”' });
    const latest = dialog.getByRole('row').filter({ hasText: 'Boston fern' });
    await latest.waitFor();
    assert.match(await latest.innerText(), /Changed/);
    assert.match(await latest.innerText(), /Name from “Fern 20” to “Boston fern”/);
    assert.equal(await latest.getByRole('cell', { name: u.user, exact: true }).count(), 1, 'who');
    assert.equal(await dialog.getByRole('row').filter({ hasText: 'Created' }).count(), 0, 'one page');
    await dialog.getByRole('button', { name: 'Older events' }).click();
    const created = dialog.getByRole('row').filter({ hasText: 'Created' });
    await created.waitFor();
    assert.match(await created.innerText(), /Tag “indoor”/);
    assert.equal(await dialog.getByRole('button', { name: 'Older events' }).count(), 0, 'the last page');
    await page.screenshot({ path: '/tmp/console-history.png' });
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    assert.ok(await focused(opener), 'the focus is back on the button that opened it');
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('a garden’s activity: who added whom with which role, who changed a role, who deleted what', async () => {
    const u = await srv.user('activity');
    const gid = await garden(u.token, 'Allotment');
    const share = (role: string) =>
      srv.api(u.token, `/gardens/${gid}/members/bob-${process.pid}`, {
        method: 'PUT',
        body: JSON.stringify({ role }),
      });
    assert.equal((await share('viewer')).status, 201);
    assert.equal((await share('editor')).status, 200);
    const id = await srv.plant(u.token, { name: 'Leek' }, gid);
    assert.equal((await srv.api(u.token, `/plants/${id}`, { method: 'DELETE' })).status, 204);

    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await nav(page, 'Gardens');
    await page.getByRole('button', { name: 'Open Allotment', exact: true }).click();
    const activity = page.getByRole('table', { name: 'Activity of Allotment, newest first' });
    const added = activity.getByRole('row').filter({ hasText: `bob-${process.pid} as viewer` });
    await added.waitFor();
    assert.match(await added.innerText(), /Member added/);
    assert.equal(await added.getByRole('cell', { name: u.user, exact: true }).count(), 1, 'who added');
    const changed = activity.getByRole('row').filter({ hasText: 'Role changed' });
    assert.match(await changed.innerText(), new RegExp(`bob-${process.pid} from viewer to editor`));
    const deleted = activity.getByRole('row').filter({ hasText: 'Deleted' });
    assert.match(await deleted.innerText(), /“Leek”/);

    // A member added here shows in the activity at once.
    await page.getByLabel('User', { exact: true }).fill(`carol-${process.pid}`);
    await page.getByLabel('Role', { exact: true }).selectOption('owner');
    await page.getByRole('button', { name: 'Add member' }).click();
    await activity
      .getByRole('row')
      .filter({ hasText: `carol-${process.pid} as owner` })
      .waitFor();
    await page.screenshot({ path: '/tmp/console-activity.png', fullPage: true });
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('Live shows membership events (user, role, former role), restores and purges, and announces them', async () => {
    const u = await srv.user('live-members');
    const gid = await garden(u.token, 'Orchard');
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    const stream = page.waitForResponse((r) => new URL(r.url()).pathname === '/events');
    await nav(page, 'Live');
    await until('the events stream answered', async () => (await stream).status() === 200 || undefined);
    const who = `dana-${process.pid}`;
    const share = (role: string) =>
      srv.api(u.token, `/gardens/${gid}/members/${who}`, { method: 'PUT', body: JSON.stringify({ role }) });
    assert.equal((await share('viewer')).status, 201);
    const added = page.getByRole('row').filter({ hasText: 'member.added' });
    await added.waitFor();
    assert.equal(await added.getByRole('cell', { name: who, exact: true }).count(), 1);
    assert.equal(await added.getByRole('cell', { name: 'viewer', exact: true }).count(), 1);
    assert.match(await added.getByRole('cell').last().innerText(), /^Orchard /);
    await page
      .getByRole('status')
      .filter({ hasText: `Member added: ${who}, viewer` })
      .waitFor({ state: 'attached' });
    assert.equal((await share('editor')).status, 200);
    const changed = page.getByRole('row').filter({ hasText: 'member.changed' });
    await changed.getByRole('cell', { name: 'editor, was viewer', exact: true }).waitFor();
    // A plant restored from the trash, and one erased for good (its event has its id alone).
    const id = await srv.plant(u.token, { name: 'Quince' }, gid);
    assert.equal((await srv.api(u.token, `/plants/${id}`, { method: 'DELETE' })).status, 204);
    assert.equal((await srv.api(u.token, `/trash/${id}/restore`, { method: 'POST' })).status, 200);
    const restored = page.getByRole('row').filter({ hasText: 'plant.restored' });
    await restored.getByRole('cell', { name: 'Quince', exact: true }).waitFor();
    await page
      .getByRole('status')
      .filter({ hasText: 'Plant restored: “Quince”' })
      .waitFor({ state: 'attached' });
    assert.equal((await srv.api(u.token, `/plants/${id}`, { method: 'DELETE' })).status, 204);
    assert.equal((await srv.api(u.token, `/trash/${id}`, { method: 'DELETE' })).status, 204);
    const purged = page.getByRole('row').filter({ hasText: 'plant.purged' });
    await purged.getByRole('cell', { name: `Plant ${id}`, exact: true }).waitFor();
    assert.match(await purged.getByRole('cell').last().innerText(), /^Orchard /);
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('Delete, "Moved to trash", Undo: the plant is back in the list, in its garden', async () => {
    const u = await srv.user('undo');
    await srv.plant(u.token, { name: 'Calathea', tag: 'shade' });
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await page.getByRole('button', { name: 'Delete Calathea', exact: true }).click();
    await confirm(page, 'Delete');
    await page.getByRole('status').filter({ hasText: 'Moved to trash' }).waitFor();
    const undo = page.getByRole('button', { name: 'Undo', exact: true });
    await undo.waitFor();
    assert.ok(await focused(undo), 'the focus is on "Undo" (the Delete button went with its row)');
    assert.deepEqual(await plantNames(srv, u.token), []);
    const restore = page.waitForRequest((r) => /\/trash\/\d+\/restore$/.test(new URL(r.url()).pathname));
    await undo.click();
    assert.ok((await (await restore).allHeaders())['idempotency-key'], 'the restore has an Idempotency-Key');
    await page.getByRole('status').filter({ hasText: 'Restored “Calathea”' }).waitFor();
    await page.getByRole('button', { name: 'Delete Calathea', exact: true }).waitFor();
    assert.equal(await undo.count(), 0, '"Undo" is gone');
    assert.deepEqual(await plantNames(srv, u.token), ['Calathea']);
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('Trash: its entries (garden, who, when, until when), Restore, a clash with a plant made since, Delete forever', async () => {
    const u = await srv.user('trash');
    const gid = await garden(u.token, 'Greenhouse');
    const ids: Record<string, number> = {};
    for (const name of ['Aloe', 'Basil', 'Chive']) {
      ids[name] = await srv.plant(u.token, { name }, gid);
      assert.equal((await srv.api(u.token, `/plants/${ids[name]}`, { method: 'DELETE' })).status, 204);
    }
    // Chive's id is taken by a plant made since: it cannot come back.
    assert.equal(await srv.plant(u.token, { id: ids.Chive, name: 'Usurper' }), ids.Chive);

    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await nav(page, 'Trash');
    const table = page.getByRole('table', { name: 'Deleted plants, newest deletion first' });
    const aloe = table.getByRole('row').filter({ hasText: 'Aloe' });
    await aloe.waitFor();
    // The garden's cell shows its id until the gardens' list has come, then its name.
    const gardenCell = aloe.getByRole('cell', { name: 'Greenhouse', exact: true });
    await gardenCell.waitFor();
    assert.equal(await gardenCell.count(), 1, 'its garden');
    assert.equal(await aloe.getByRole('cell', { name: u.user, exact: true }).count(), 1, 'who deleted it');
    assert.deepEqual(
      await table
        .getByRole('row')
        .evaluateAll((rows) => rows.slice(1).map((r) => r.querySelector('td')?.textContent)),
      ['Chive', 'Basil', 'Aloe'],
      'newest deletion first',
    );

    await page.screenshot({ path: '/tmp/console-trash.png', fullPage: true });
    await page.getByRole('button', { name: 'Restore Chive', exact: true }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: `its id ${ids.Chive} was taken by a plant made since` })
      .waitFor();

    await page.getByRole('button', { name: 'Restore Aloe', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Restored “Aloe” to “Greenhouse”' }).waitFor();
    await aloe.waitFor({ state: 'detached' });
    assert.deepEqual((await plantNames(srv, u.token)).sort(), ['Aloe', 'Usurper']);

    await page.getByRole('button', { name: 'Delete forever Basil', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete forever' });
    assert.match(await dialog.innerText(), /Delete “Basil” forever\?/);
    await confirm(page, 'Delete forever');
    await page.getByRole('status').filter({ hasText: 'Deleted “Basil” forever' }).waitFor();
    const left = (await (await srv.api(u.token, '/trash')).json()) as { name: string }[];
    assert.deepEqual(
      left.map((t) => t.name),
      ['Chive'],
    );
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('with the trash off (TRASH_RETENTION=0), the console says a delete is final and offers no Undo', async () => {
    const off = await consoleServer([], { TRASH_RETENTION: '0' });
    try {
      const u = await off.user('final');
      await off.plant(u.token, { name: 'Gone' });
      const { context, page, watch } = await open(browser);
      await signIn(page, off.url, u.token);
      assert.deepEqual(await (await fetch(`${off.url}/console/config.json`)).json(), {
        oidc: null,
        trash: false,
      });
      await page.getByRole('button', { name: 'Delete Gone', exact: true }).click();
      const dialog = page.getByRole('dialog', { name: 'Delete plant' });
      assert.match(await dialog.innerText(), /Delete “Gone” for good\? This service keeps no trash/);
      await confirm(page, 'Delete');
      await page
        .getByRole('status')
        .filter({ hasText: 'Deleted “Gone” for good (this service keeps no trash).' })
        .waitFor();
      assert.equal(await page.getByRole('button', { name: 'Undo', exact: true }).count(), 0);
      assertClean(watch, [off.url]);
      await context.close();
    } finally {
      await off.stop();
    }
  });
});
