import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import {
  assertClean,
  assertNotInUrls,
  type ConsoleServer,
  consoleServer,
  eventually,
  launch,
  nav,
  open,
  signIn,
  skipBrowser,
} from '../helpers/browser.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';

// Contract section 11's Gardens, Live, Webhooks and Tokens views in Debian's Chromium against a real
// `bin/plantstore serve` (fresh SQLite, webhooks allowed to reach this machine's receiver).
describe('the web console in Chromium: gardens, live, webhooks, tokens', {
  skip: skipBrowser,
  timeout: 240_000,
}, () => {
  let srv: ConsoleServer;
  let browser: Browser;
  let receiver: Receiver;
  before(async () => {
    srv = await consoleServer([], { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '1s' });
    browser = await launch();
    receiver = await startReceiver();
  });
  after(async () => {
    await browser?.close();
    await srv?.stop();
    await receiver?.close();
  });

  /** The page's text, for what is shown once (secrets). */
  const text = (page: Page) => page.locator('body').innerText();

  it('gardens: create one, add a member, change the member’s role, remove the member', async () => {
    const u = await srv.user('gardener');
    const friend = `friend-${process.pid}`;
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await nav(page, 'Gardens');
    await page.getByRole('button', { name: 'New garden' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Balcony');
    await page.getByRole('button', { name: 'Create', exact: true }).click();
    await page.getByText('Balcony', { exact: true }).first().waitFor();
    const gardens = (await (await srv.api(u.token, '/gardens')).json()) as { id: string; name: string }[];
    const gid = gardens.find((g) => g.name === 'Balcony')?.id;
    assert.ok(gid, JSON.stringify(gardens));
    const members = async () =>
      ((await (await srv.api(u.token, `/gardens/${gid}/members`)).json()) as { user: string; role: string }[])
        .filter((m) => m.user === friend)
        .map((m) => m.role);

    await page
      .getByRole('link', { name: 'Balcony', exact: true })
      .or(page.getByRole('button', { name: /Balcony/ }))
      .first()
      .click();
    await page.getByLabel('User', { exact: true }).fill(friend);
    await page.getByLabel('Role', { exact: true }).selectOption('editor');
    await page.getByRole('button', { name: /^Add/ }).click();
    await eventually('the member added', async () => (await members()).join() === 'editor');

    await page.getByLabel(`Role of ${friend}`).selectOption('viewer');
    await eventually('the role changed', async () => (await members()).join() === 'viewer');

    await page.getByRole('button', { name: `Remove ${friend}` }).click();
    const dialog = page.getByRole('dialog');
    if (await dialog.isVisible()) await dialog.getByRole('button', { name: 'Remove', exact: true }).click();
    await eventually('the member removed', async () => (await members()).length === 0);
    await page.getByRole('button', { name: `Remove ${friend}` }).waitFor({ state: 'detached' });
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('live: an event made through the API appears and is announced; the stream sends the token in its header only', async () => {
    const u = await srv.user('live');
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    const stream = page.waitForRequest((r) => new URL(r.url()).pathname === '/events');
    await nav(page, 'Live');
    const events = await stream;
    const headers = await events.allHeaders();
    assert.equal(headers.authorization, `Bearer ${u.token}`);
    assert.match(headers.accept ?? '', /text\/event-stream/);
    assert.equal(new URL(events.url()).search, '', 'nothing in the query string');

    const name = `Live fern <b>${process.pid}</b>`;
    // The stream is open once the events request was answered; what is made after it is shown.
    await until('the events stream answered', async () => (await events.response())?.status() === 200);
    await srv.plant(u.token, { name, tag: 'live' });
    await page.getByText(name).first().waitFor();
    // Announced: a live region (aria-live, or a role that implies one) carries it.
    const live = page
      .locator('[aria-live="polite"], [aria-live="assertive"], [role="log"], [role="status"], [role="alert"]')
      .filter({ hasText: name });
    await live.first().waitFor({ state: 'attached' });
    assertNotInUrls(watch, u.token);
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('webhooks: a new endpoint’s secret is shown once; the attempts of a delivery to a real receiver are listed', async () => {
    const u = await srv.user('hooks');
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await nav(page, 'Webhooks');
    await page.getByRole('button', { name: 'New endpoint' }).click();
    await page.getByLabel('URL', { exact: true }).fill(receiver.url);
    await page.getByRole('button', { name: 'Create', exact: true }).click();
    const secret = await until(
      'the secret shown',
      async () => /whsec_[A-Za-z0-9+/=]+/.exec(await text(page))?.[0],
    );
    await page.getByRole('button', { name: /copy/i }).first().waitFor();
    const [endpoint] = (await (await srv.api(u.token, '/webhooks')).json()) as { id: string; url: string }[];
    assert.equal(endpoint?.url, receiver.url);

    // Shown once: not after going away and back.
    await nav(page, 'Plants');
    await nav(page, 'Webhooks');
    await page.getByText(receiver.url).first().waitFor();
    assert.doesNotMatch(await text(page), /whsec_/);

    // The secret shown is the endpoint's: a delivery verifies with it.
    const before = receiver.received.length;
    await srv.plant(u.token, { name: 'Hooked fern' });
    const [delivery] = (await receiver.waitFor(before + 1, 10_000)).slice(before);
    new Webhook(secret).verify(delivery!.body, delivery!.headers as Record<string, string>);
    await until('the attempt recorded', async () => {
      const res = await srv.api(u.token, `/webhooks/${endpoint!.id}/deliveries`);
      return ((await res.json()) as unknown[]).length > 0 || undefined;
    });
    await nav(page, 'Plants');
    await nav(page, 'Webhooks');
    await page
      .getByRole('button', { name: /deliveries|attempts/i })
      .or(page.getByRole('link', { name: /deliveries|attempts/i }))
      .first()
      .click();
    await page.getByText('plant.created').first().waitFor();
    await page.getByText('200', { exact: true }).first().waitFor();
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('tokens: the link only for tokens:manage; a new token’s secret shown once; revoke', async () => {
    const plain = await srv.user('no-manage');
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, plain.token);
    await page.getByRole('link', { name: 'Plants', exact: true }).waitFor();
    assert.equal(await page.getByRole('link', { name: 'Tokens', exact: true }).count(), 0);
    await page.getByRole('button', { name: 'Sign out' }).click();

    const manager = await srv.user('manager', ['plants:read', 'plants:write', 'tokens:manage']);
    await signIn(page, srv.url, manager.token);
    await nav(page, 'Tokens');
    await page.getByRole('button', { name: 'New token' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Deploy bot');
    await page.getByRole('button', { name: 'Create', exact: true }).click();
    const secret = await until(
      'the token shown',
      async () => /pst_[A-Za-z0-9_-]{40,}/.exec(await text(page))?.[0],
    );
    const me = await srv.api(secret, '/me');
    assert.equal(me.status, 200);
    assert.equal(((await me.json()) as { user: string }).user, manager.user);

    await nav(page, 'Plants');
    await nav(page, 'Tokens');
    await page.getByText('Deploy bot').first().waitFor();
    assert.doesNotMatch(await text(page), /pst_[A-Za-z0-9_-]{40,}/, 'shown once');

    await page.getByRole('button', { name: 'Revoke Deploy bot' }).click();
    const dialog = page.getByRole('dialog');
    if (await dialog.isVisible()) await dialog.getByRole('button', { name: 'Revoke', exact: true }).click();
    await eventually('the token stops working', async () => (await srv.api(secret, '/me')).status === 401);
    await page
      .getByText(/revoked/i)
      .first()
      .waitFor();
    assertNotInUrls(watch, manager.token);
    assertNotInUrls(watch, plain.token);
    assertClean(watch, [srv.url]);
    await context.close();
  });
});
