import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import {
  assertClean,
  assertNotInUrls,
  type ConsoleServer,
  confirm,
  consoleServer,
  eventually,
  launch,
  nav,
  open,
  shown,
  signIn,
  skipBrowser,
} from '../helpers/browser.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';

// Contract section 11's Webhooks and Tokens views in Debian's Chromium against a real
// `bin/plantstore serve` (fresh SQLite, webhooks allowed to reach this machine's receiver), and
// hostile names in every view.
describe('the web console in Chromium: webhooks, tokens, hostile names', {
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
      async () => /whsec_[A-Za-z0-9+/=]+/.exec(await shown(page))?.[0],
    );
    await page.getByRole('button', { name: /copy/i }).first().waitFor();
    const [endpoint] = (await (await srv.api(u.token, '/webhooks')).json()) as { id: string; url: string }[];
    assert.equal(endpoint?.url, receiver.url);

    // Shown once: not after going away and back.
    await nav(page, 'Plants');
    await nav(page, 'Webhooks');
    await page.getByRole('button', { name: `Deliveries of ${receiver.url}` }).waitFor();
    assert.doesNotMatch(await shown(page), /whsec_/);
    await page
      .getByRole('row')
      .filter({ hasText: receiver.url })
      .getByText('enabled', { exact: true })
      .waitFor();

    // The secret shown is the endpoint's: a delivery verifies with it.
    const before = receiver.received.length;
    await srv.plant(u.token, { name: 'Hooked fern' });
    const [delivery] = (await receiver.waitFor(before + 1, 10_000)).slice(before);
    new Webhook(secret).verify(delivery!.body, delivery!.headers as Record<string, string>);
    await until('the attempt recorded', async () => {
      const res = await srv.api(u.token, `/webhooks/${endpoint!.id}/deliveries`);
      return ((await res.json()) as unknown[]).length > 0 || undefined;
    });
    await page.getByRole('button', { name: `Deliveries of ${receiver.url}` }).click();
    const attempt = page
      .getByRole('table', { name: 'Delivery attempts, newest first' })
      .getByRole('row')
      .filter({ hasText: 'plant.created' });
    await attempt.waitFor();
    await attempt.getByRole('cell', { name: '200', exact: true }).waitFor();
    await attempt.getByText('succeeded').waitFor();
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('webhooks: rotate shows the new secret once, recover re-sends a failed delivery, delete', async () => {
    const u = await srv.user('rotate');
    const made = await srv.api(u.token, '/webhooks', {
      method: 'POST',
      body: JSON.stringify({ url: receiver.url, description: 'rotation' }),
    });
    const { id, secret: old } = (await made.json()) as { id: string; secret: string };
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await nav(page, 'Webhooks');
    await page.getByRole('button', { name: `Rotate secret of ${receiver.url}` }).click();
    await confirm(page, 'Rotate');
    const fresh = await page
      .getByRole('textbox', { name: `New signing secret for ${receiver.url}` })
      .inputValue();
    assert.match(fresh, /^whsec_/);
    assert.notEqual(fresh, old);
    await nav(page, 'Plants');
    await nav(page, 'Webhooks');
    await page.getByRole('button', { name: `Deliveries of ${receiver.url}` }).waitFor();
    assert.doesNotMatch(await shown(page), /whsec_/, 'the new secret is shown once');

    // The next delivery fails twice (the first try and the one retry of this serve's schedule)...
    receiver.answers.push({ status: 500 }, { status: 500 });
    const before = receiver.received.length;
    await srv.plant(u.token, { name: 'Recovered fern' });
    const tries = (await receiver.waitFor(before + 2, 15_000)).slice(before);
    // ...signed with both secrets for 24 h after the rotation.
    for (const secret of [fresh, old])
      new Webhook(secret).verify(tries[0]!.body, tries[0]!.headers as Record<string, string>);
    await until('the delivery marked failed', async () => {
      const res = await srv.api(u.token, `/webhooks/${id}/deliveries`);
      return ((await res.json()) as { outcome: string }[]).some((a) => a.outcome === 'failed') || undefined;
    });

    // The attempts: response code, outcome, and when the next try is (none after the last).
    await page.getByRole('button', { name: `Deliveries of ${receiver.url}` }).click();
    const rows = page.getByRole('table', { name: 'Delivery attempts, newest first' }).getByRole('row');
    const retrying = rows.filter({ hasText: 'retrying' });
    await retrying.getByRole('cell', { name: '500', exact: true }).waitFor();
    assert.notEqual(await retrying.getByRole('cell').last().innerText(), '—', 'the next retry’s time');
    await rows.filter({ hasText: 'failed' }).getByRole('cell', { name: '500', exact: true }).waitFor();

    // Recover since an hour ago: the failed one is sent again.
    const hourAgo = new Date(Date.now() - 3_600_000);
    const local = new Date(hourAgo.getTime() - hourAgo.getTimezoneOffset() * 60_000)
      .toISOString()
      .slice(0, 16);
    await page.getByLabel('Re-send what was not acknowledged since').fill(local);
    await page.getByRole('button', { name: 'Recover', exact: true }).click();
    await page.getByText('1 event queued to be sent again.').waitFor();
    const [again] = (await receiver.waitFor(before + 3, 15_000)).slice(before + 2);
    assert.equal(again!.headers['webhook-id'], tries[0]!.headers['webhook-id']);

    // A 410 disables the endpoint at once: its status and the reason are shown.
    receiver.answers.push({ status: 410 });
    await srv.plant(u.token, { name: 'Gone fern' });
    await until('the endpoint disabled', async () => {
      const res = await srv.api(u.token, `/webhooks/${id}`);
      return ((await res.json()) as { status: string }).status === 'disabled' || undefined;
    });
    await nav(page, 'Plants');
    await nav(page, 'Webhooks');
    const row = page.getByRole('row').filter({ hasText: receiver.url });
    await row.getByText('disabled', { exact: true }).waitFor();
    await row.getByText(/answered 410 Gone/).waitFor();

    await page.getByRole('button', { name: `Delete ${receiver.url}` }).click();
    await confirm(page, 'Delete');
    await page.getByRole('button', { name: `Delete ${receiver.url}` }).waitFor({ state: 'detached' });
    assert.deepEqual(await (await srv.api(u.token, '/webhooks')).json(), []);
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('hostile garden, member, endpoint and token names are shown as text in every view, and nothing runs', async () => {
    const u = await srv.user('hostile-views', ['plants:read', 'plants:write', 'tokens:manage']);
    const garden = '<img src=x onerror=alert("garden")>';
    const member = '<svg/onload=alert("member")>';
    const description = '<script>alert("hook")</script>';
    const token = '<img src=y onerror=alert("token")>';
    const made = await srv.api(u.token, '/gardens', {
      method: 'POST',
      body: JSON.stringify({ name: garden }),
    });
    assert.equal(made.status, 201);
    const gid = ((await made.json()) as { id: string }).id;
    const put = await srv.api(u.token, `/gardens/${gid}/members/${encodeURIComponent(member)}`, {
      method: 'PUT',
      body: JSON.stringify({ role: 'viewer' }),
    });
    assert.equal(put.status, 201, await put.text());
    const hook = await srv.api(u.token, '/webhooks', {
      method: 'POST',
      body: JSON.stringify({ url: receiver.url, description }),
    });
    assert.equal(hook.status, 201);
    const tok = await srv.api(u.token, '/tokens', { method: 'POST', body: JSON.stringify({ name: token }) });
    assert.equal(tok.status, 201);

    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await nav(page, 'Gardens');
    await page.getByRole('button', { name: `Open ${garden}` }).click();
    await page.getByRole('cell', { name: member, exact: true }).waitFor();
    await nav(page, 'Webhooks');
    await page.getByText(description).first().waitFor();
    await nav(page, 'Tokens');
    await page.getByRole('button', { name: `Revoke ${token}` }).waitFor();
    await page.getByRole('cell', { name: token, exact: true }).waitFor();
    const injected = await page.evaluate(
      () => document.querySelectorAll('img[src="x"], img[src="y"], svg[onload], script:not([src])').length,
    );
    assert.equal(injected, 0, 'no element was made from a name');
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
    // The caller's own token is listed (newest first), never with its secret.
    await page.getByText(`${manager.user.split('-')[0]} console test (this one)`).waitFor();
    const form = page.getByRole('form', { name: 'New token' });
    await form.getByLabel('Token name').fill('Deploy bot');
    await form.getByRole('button', { name: /^Create/ }).click();
    const secret = await until(
      'the token shown',
      async () => /pst_[A-Za-z0-9_-]{40,}/.exec(await shown(page))?.[0],
    );
    const me = await srv.api(secret, '/me');
    assert.equal(me.status, 200);
    assert.equal(((await me.json()) as { user: string }).user, manager.user);

    await nav(page, 'Plants');
    await nav(page, 'Tokens');
    await page.getByRole('button', { name: 'Revoke Deploy bot' }).waitFor();
    assert.doesNotMatch(await shown(page), /pst_[A-Za-z0-9_-]{40,}/, 'shown once');

    await page.getByRole('button', { name: 'Revoke Deploy bot' }).click();
    await confirm(page, 'Revoke');
    await page.getByRole('button', { name: 'Revoke Deploy bot' }).waitFor({ state: 'detached' });
    await page.getByRole('row').filter({ hasText: 'Deploy bot' }).getByText('revoked').waitFor();
    await eventually('the token stops working', async () => (await srv.api(secret, '/me')).status === 401);
    assertNotInUrls(watch, manager.token);
    assertNotInUrls(watch, plain.token);
    assertClean(watch, [srv.url]);
    await context.close();
  });
});
