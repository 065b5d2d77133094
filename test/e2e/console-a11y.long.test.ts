import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import {
  assertClean,
  axeViolations,
  type ConsoleServer,
  consoleServer,
  holdAnswers,
  launch,
  nav,
  open,
  signIn,
  skipBrowser,
  type User,
} from '../helpers/browser.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';

// axe-core at WCAG 2.2 AA (tags wcag2a, wcag2aa, wcag21a, wcag21aa, wcag22aa) on every view of the
// console, in the light theme, the dark theme the system asks for, and the dark theme the "Dark mode"
// switch turns on. The page keeps its real CSP while it is checked (see assertAccessible).
describe('the web console has no axe-core violation at WCAG 2.2 AA, light and dark', {
  skip: skipBrowser,
  timeout: 300_000,
}, () => {
  let srv: ConsoleServer;
  let browser: Browser;
  let receiver: Receiver;
  let u: User;
  before(async () => {
    srv = await consoleServer([], { WEBHOOK_ALLOW_PRIVATE: 'true' });
    browser = await launch();
    receiver = await startReceiver();
    u = await srv.user('a11y', ['plants:read', 'plants:write', 'tokens:manage']);
    // Something in every view: plants (with and without a tag), a shared garden, an endpoint.
    for (const [i, name] of ['Monstera', 'Fern', 'Pothos', 'Calathea'].entries())
      await srv.plant(u.token, { name, tag: i % 2 ? 'indoor' : undefined });
    const garden = await srv.api(u.token, '/gardens', {
      method: 'POST',
      body: JSON.stringify({ name: 'Balcony' }),
    });
    assert.equal(garden.status, 201);
    const { id } = (await garden.json()) as { id: string };
    const shared = await srv.api(u.token, `/gardens/${id}/members/${encodeURIComponent('a11y-friend')}`, {
      method: 'PUT',
      body: JSON.stringify({ role: 'editor' }),
    });
    assert.equal(shared.status, 201);
    const hook = await srv.api(u.token, '/webhooks', {
      method: 'POST',
      body: JSON.stringify({ url: receiver.url }),
    });
    assert.equal(hook.status, 201);
  });
  after(async () => {
    await browser?.close();
    await srv?.stop();
    await receiver?.close();
  });

  const darkSwitch = (page: Page) =>
    page.getByRole('switch', { name: 'Dark mode' }).or(page.getByRole('checkbox', { name: 'Dark mode' }));

  /** Relative luminance of the colour that fills the page (body's background, else html's, else white). */
  async function backdrop(page: Page): Promise<number> {
    const colours = await page.evaluate(() =>
      [document.body, document.documentElement].map((e) => getComputedStyle(e).backgroundColor),
    );
    const fill = colours.find((c) => !/^rgba\(.*,\s*0\)$|^transparent$/.test(c)) ?? 'rgb(255, 255, 255)';
    const [r, g, b] = fill.match(/[0-9.]+/g)!.map(Number) as [number, number, number];
    const lin = (c: number) => (c / 255 <= 0.03928 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4);
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  }

  const themes = [
    { name: 'light', colorScheme: 'light', toggle: false, dark: false },
    { name: 'dark (the system’s preference)', colorScheme: 'dark', toggle: false, dark: true },
    { name: 'dark (the "Dark mode" switch)', colorScheme: 'light', toggle: true, dark: true },
  ] as const;

  for (const theme of themes)
    it(`every view in the ${theme.name} theme`, async () => {
      const { context, page, watch } = await open(browser, { colorScheme: theme.colorScheme });
      const doomed = `Doomed ${theme.name}`;
      await srv.plant(u.token, { name: doomed });
      // Every view is checked, and every violation of every view reported together at the end.
      const found: string[] = [];
      const check = async (what: string) =>
        found.push(...(await axeViolations(page, `${what} (${theme.name})`)));
      await page.goto(`${srv.url}/console/`);
      await page.getByLabel('Access token').waitFor();
      if (theme.toggle) await darkSwitch(page).first().check();
      assert.equal(
        await darkSwitch(page).first().isChecked(),
        theme.dark,
        'the switch shows the theme in use',
      );
      // The switch shows its state as it is clicked; the page's colours follow once the theme is
      // applied, a moment later: wait for them (bounded), then say what was seen.
      let lum = 0;
      await until(
        `the page's backdrop to be ${theme.name}`,
        async () => {
          lum = await backdrop(page);
          return theme.dark ? lum < 0.2 : lum > 0.5;
        },
        5_000,
      ).catch(() => {});
      assert.ok(
        theme.dark ? lum < 0.2 : lum > 0.5,
        `the page's backdrop (luminance ${lum.toFixed(2)}) is ${theme.name}`,
      );
      await check('sign-in');
      await page.getByLabel('Access token').fill('pst_not-a-token-of-this-service');
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await page.getByRole('alert').waitFor();
      await check('sign-in refused');

      await signIn(page, srv.url, u.token);
      assert.equal(
        await darkSwitch(page).first().isChecked(),
        theme.dark,
        'the theme stays after signing in',
      );
      await page.getByText('Monstera', { exact: true }).first().waitFor();
      await page.getByRole('link', { name: 'Export for Excel (;)' }).waitFor();
      await check('Plants (with both exports)');

      await page.getByRole('button', { name: 'New plant' }).click();
      await page.getByRole('button', { name: 'Create', exact: true }).waitFor();
      await check('the new-plant form');
      await page.keyboard.press('Escape');

      await nav(page, 'Plants');
      await page.getByRole('button', { name: 'Delete Fern', exact: true }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Delete', exact: true }).waitFor();
      await check('the delete dialog');
      await page.keyboard.press('Escape');
      await page.getByRole('dialog').waitFor({ state: 'hidden' });
      await page.getByRole('button', { name: 'Change Fern', exact: true }).click();
      await page.getByRole('dialog').getByLabel('Name', { exact: true }).waitFor();
      await check('the change dialog');
      await page.keyboard.press('Escape');
      await page.getByRole('dialog').waitFor({ state: 'hidden' });
      await page.getByRole('button', { name: 'History Fern', exact: true }).click();
      await page.getByRole('dialog').getByRole('row').filter({ hasText: 'Created' }).waitFor();
      await check('the history dialog');
      await page.keyboard.press('Escape');
      await page.getByRole('dialog').waitFor({ state: 'hidden' });
      // A delete: "Moved to trash" with "Undo"; then the Trash view and its "Delete forever" dialog.
      await page.getByRole('button', { name: `Delete ${doomed}`, exact: true }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Delete', exact: true }).click();
      await page.getByRole('button', { name: 'Undo', exact: true }).waitFor();
      await check('the undo notice');
      await nav(page, 'Trash');
      await page.getByRole('button', { name: `Restore ${doomed}`, exact: true }).waitFor();
      await check('Trash');
      await page.getByRole('button', { name: `Delete forever ${doomed}`, exact: true }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Delete forever', exact: true }).waitFor();
      await check('the delete-forever dialog');
      await page.keyboard.press('Escape');
      await page.getByRole('dialog').waitFor({ state: 'hidden' });

      await nav(page, 'Gardens');
      await page.getByText('Balcony', { exact: true }).first().waitFor();
      await check('Gardens');
      await page.getByRole('button', { name: 'Open Balcony' }).click();
      await page.getByRole('combobox', { name: 'Role of a11y-friend' }).waitFor();
      await page
        .getByRole('table', { name: 'Activity of Balcony, newest first' })
        .getByRole('row')
        .filter({ hasText: 'a11y-friend as editor' })
        .waitFor();
      await check('a garden, its members and its activity');
      // "Add member" for someone already a member asks before changing their role.
      await page.getByLabel('User', { exact: true }).fill('a11y-friend');
      await page.getByLabel('Role', { exact: true }).selectOption('viewer');
      await page.getByRole('button', { name: 'Add member' }).click();
      await page.getByRole('dialog', { name: 'Change role' }).waitFor();
      await check('the change-role dialog');
      await page.keyboard.press('Escape');
      await page.getByRole('dialog').waitFor({ state: 'hidden' });

      const opened = page.waitForResponse((r) => new URL(r.url()).pathname === '/events');
      await nav(page, 'Live');
      await opened;
      await srv.plant(u.token, { name: `Live ${theme.name}` });
      await page.getByText(`Live ${theme.name}`).first().waitFor();
      await check('Live');

      // A view while its first read is on its way: "Loading…", the region busy.
      const release = await holdAnswers(page, '/webhooks');
      await nav(page, 'Webhooks');
      await page.getByRole('status').filter({ hasText: 'Loading…' }).waitFor();
      assert.equal(await page.getByRole('region', { name: 'Webhooks' }).getAttribute('aria-busy'), 'true');
      await check('a view loading');
      await release();
      await page.getByText(receiver.url).first().waitFor();
      assert.equal(await page.getByRole('region', { name: 'Webhooks' }).getAttribute('aria-busy'), null);
      await check('Webhooks');
      await page.getByRole('button', { name: 'New endpoint' }).click();
      await page.getByLabel('URL', { exact: true }).waitFor();
      await check('the new-endpoint form');
      await page.getByRole('button', { name: `Deliveries of ${receiver.url}` }).click();
      await page.getByRole('heading', { name: `Deliveries of ${receiver.url}` }).waitFor();
      await check('an endpoint’s deliveries');

      await nav(page, 'Tokens');
      await page.getByText('a11y console test').first().waitFor();
      await check('Tokens');

      assert.deepEqual(found, [], 'axe-core finds no violation at WCAG 2.2 AA');
      assertClean(watch, [srv.url]);
      await context.close();
    });
});
