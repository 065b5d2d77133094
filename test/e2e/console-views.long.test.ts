import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser, Locator, Request } from 'playwright-core';
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
  tabTo,
} from '../helpers/browser.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';

// Contract section 11's Gardens and Live views, and the keyboard through the views, in Debian's
// Chromium against a real `bin/plantstore serve` (fresh SQLite, webhooks allowed to reach this
// machine's receiver).
describe('the web console in Chromium: gardens, live, the keyboard', {
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

  it('gardens: create, rename, add a member, change its role, remove it, delete the garden', async () => {
    const u = await srv.user('gardener');
    const friend = `friend-${process.pid}`;
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await nav(page, 'Gardens');
    const create = page.getByRole('form', { name: 'New garden' });
    await create.getByRole('textbox').fill('Balcony');
    await create.getByRole('button', { name: /^Create/ }).click();
    await page.getByRole('button', { name: 'Open Balcony' }).waitFor();
    const gardens = async () =>
      (await (await srv.api(u.token, '/gardens')).json()) as { id: string; name: string }[];
    const gid = (await gardens()).find((g) => g.name === 'Balcony')?.id;
    assert.ok(gid);
    const members = async () =>
      ((await (await srv.api(u.token, `/gardens/${gid}/members`)).json()) as { user: string; role: string }[])
        .filter((m) => m.user === friend)
        .map((m) => m.role);

    // Creating opens it; rename it.
    const panel = page.getByRole('region', { name: 'Balcony' });
    await panel.getByLabel('Garden name').fill('Roof garden');
    await panel.getByRole('button', { name: 'Rename', exact: true }).click();
    await page.getByRole('button', { name: 'Open Roof garden' }).waitFor();
    assert.ok((await gardens()).some((g) => g.id === gid && g.name === 'Roof garden'));

    await page.getByLabel('User', { exact: true }).fill(friend);
    await page.getByLabel('Role', { exact: true }).selectOption('editor');
    await page.getByRole('button', { name: 'Add member' }).click();
    await page.getByRole('combobox', { name: `Role of ${friend}` }).waitFor();
    assert.deepEqual(await members(), ['editor']);

    await page.getByRole('combobox', { name: `Role of ${friend}` }).selectOption('viewer');
    await page.getByRole('button', { name: `Save role of ${friend}` }).click();
    await eventually('the role changed', async () => (await members()).join() === 'viewer');

    await page.getByRole('button', { name: `Remove ${friend}` }).click();
    await confirm(page, 'Remove');
    await page.getByRole('button', { name: `Remove ${friend}` }).waitFor({ state: 'detached' });
    assert.deepEqual(await members(), []);

    await page.getByRole('button', { name: 'Delete garden' }).click();
    await confirm(page, 'Delete');
    await page.getByRole('button', { name: 'Open Roof garden' }).waitFor({ state: 'detached' });
    assert.ok(!(await gardens()).some((g) => g.id === gid));
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('gardens: "Add member" for someone already an editor shows their role and asks; Cancel changes nothing', async () => {
    const u = await srv.user('asker');
    const made = await srv.api(u.token, '/gardens', {
      method: 'POST',
      body: JSON.stringify({ name: 'Greenhouse' }),
    });
    const gid = ((await made.json()) as { id: string }).id;
    const bob = `bob-${process.pid}`;
    const put = await srv.api(u.token, `/gardens/${gid}/members/${bob}`, {
      method: 'PUT',
      body: JSON.stringify({ role: 'editor' }),
    });
    assert.equal(put.status, 201);
    const role = async () =>
      (
        (await (await srv.api(u.token, `/gardens/${gid}/members`)).json()) as { user: string; role: string }[]
      ).find((m) => m.user === bob)?.role;
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    await nav(page, 'Gardens');
    await page.getByRole('button', { name: 'Open Greenhouse' }).click();
    const add = async () => {
      await page.getByLabel('User', { exact: true }).fill(bob);
      await page.getByLabel('Role', { exact: true }).selectOption('viewer');
      await page.getByRole('button', { name: 'Add member' }).click();
    };
    await add();
    const dialog = page.getByRole('dialog', { name: 'Change role' });
    await dialog.waitFor();
    assert.equal(
      (await dialog.locator('p').first().innerText()).trim(),
      `${bob} is already an editor of “Greenhouse”. Change their role to viewer?`,
    );
    await dialog.getByRole('button', { name: 'Cancel', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await role(), 'editor', 'Cancel changes nothing');
    await add();
    await confirm(page, 'Change role');
    await eventually('the role changed', async () => (await role()) === 'viewer');
    await page
      .getByRole('status')
      .filter({ hasText: `${bob} is now a viewer.` })
      .waitFor();

    // A garden with a plant cannot be deleted: what to do, said once.
    await srv.plant(u.token, { name: 'Tomato' }, gid);
    await page.getByRole('button', { name: 'Delete garden' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete', exact: true }).click();
    assert.equal(
      await page.getByRole('dialog').getByRole('alert').innerText(),
      'This garden still has plants. Move them to another garden or delete them, then delete the garden.',
    );
    await page.keyboard.press('Escape');
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('gardens: a member leaves a garden shared with it', async () => {
    const owner = await srv.user('bench-owner');
    const member = await srv.user('bench-member');
    const made = await srv.api(owner.token, '/gardens', {
      method: 'POST',
      body: JSON.stringify({ name: 'Shared bench' }),
    });
    const gid = ((await made.json()) as { id: string }).id;
    const put = await srv.api(owner.token, `/gardens/${gid}/members/${encodeURIComponent(member.user)}`, {
      method: 'PUT',
      body: JSON.stringify({ role: 'viewer' }),
    });
    assert.equal(put.status, 201);
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, member.token);
    await nav(page, 'Gardens');
    await page.getByRole('button', { name: 'Open Shared bench' }).click();
    await page.getByRole('button', { name: 'Leave garden' }).click();
    await confirm(page, 'Leave');
    await page.getByRole('button', { name: 'Open Shared bench' }).waitFor({ state: 'detached' });
    const left = (await (await srv.api(member.token, '/gardens')).json()) as { id: string }[];
    assert.ok(!left.some((g) => g.id === gid));
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('by keyboard alone: the views by their links, a garden and its member, a webhook endpoint', async () => {
    const u = await srv.user('keys');
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    const press = async (target: Locator, key = 'Enter') => {
      await tabTo(page, target);
      await page.keyboard.press(key);
    };
    await press(page.getByRole('link', { name: 'Gardens', exact: true }));
    await tabTo(page, page.getByRole('textbox', { name: "New garden's name" }));
    await page.keyboard.type('Keyboard bed');
    await press(page.getByRole('button', { name: /^Create/ }));
    await tabTo(page, page.getByLabel('User', { exact: true }));
    await page.keyboard.type('keyboard-friend');
    await press(page.getByRole('button', { name: 'Add member' }));
    await page.getByRole('combobox', { name: 'Role of keyboard-friend' }).waitFor();
    const gardens = (await (await srv.api(u.token, '/gardens')).json()) as { id: string; name: string }[];
    const gid = gardens.find((g) => g.name === 'Keyboard bed')?.id;
    const members = (await (await srv.api(u.token, `/gardens/${gid}/members`)).json()) as { user: string }[];
    assert.ok(members.some((m) => m.user === 'keyboard-friend'));

    await press(page.getByRole('link', { name: 'Webhooks', exact: true }));
    await press(page.getByRole('button', { name: 'New endpoint' }));
    await tabTo(page, page.getByLabel('URL', { exact: true }));
    await page.keyboard.type(receiver.url);
    await press(page.getByRole('button', { name: 'Create', exact: true }));
    await page.getByRole('button', { name: `Deliveries of ${receiver.url}` }).waitFor();
    assert.match(await shown(page), /whsec_/);
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
    // Its garden by name (the caller's home garden), not only by id.
    const home = (
      (await (await srv.api(u.token, '/gardens')).json()) as { name: string; home: boolean }[]
    ).find((g) => g.home)!;
    const row = page.getByRole('row').filter({ hasText: name });
    assert.match(await row.getByRole('cell').last().innerText(), new RegExp(`^${home.name} `));
    // Announced: a live region (aria-live, or a role that implies one) carries it.
    const live = page
      .locator('[aria-live="polite"], [aria-live="assertive"], [role="log"], [role="status"], [role="alert"]')
      .filter({ hasText: name });
    await live.first().waitFor({ state: 'attached' });
    assert.equal(
      await page
        .locator('b')
        .filter({ hasText: String(process.pid) })
        .count(),
      0,
      'shown as text',
    );
    assertNotInUrls(watch, u.token);
    assertClean(watch, [srv.url]);
    await context.close();
  });

  it('live: after a lost connection the stream resumes with Last-Event-ID and misses nothing', async () => {
    const u = await srv.user('resume');
    const { context, page, watch } = await open(browser);
    await signIn(page, srv.url, u.token);
    const isEvents = (url: URL) => url.pathname === '/events';
    const first = page.waitForResponse((r) => isEvents(new URL(r.url())));
    await nav(page, 'Live');
    assert.equal((await first).status(), 200);
    await srv.plant(u.token, { name: 'Before the cut' });
    await page.getByRole('cell', { name: 'Before the cut', exact: true }).waitFor();

    // The console's next connection is held until a plant was made while it was away: only a
    // resumed stream (Last-Event-ID) shows that one, a new stream starts after it.
    let release!: () => void;
    const away = new Promise<void>((resolve) => {
      release = resolve;
    });
    const again: Request[] = [];
    await page.route(isEvents, async (route) => {
      again.push(route.request());
      await away;
      await route.continue();
    });
    await srv.restart();
    await until('the console connects again', () => again.length > 0 || undefined, 20_000);
    await srv.plant(u.token, { name: 'While away' });
    release();
    await page.getByRole('cell', { name: 'While away', exact: true }).waitFor();
    const resumed = await again[0]!.allHeaders();
    assert.match(resumed['last-event-id'] ?? '', /^evt_/);
    assert.equal(resumed.authorization, `Bearer ${u.token}`);
    assert.equal(
      await page.getByRole('cell', { name: 'Before the cut', exact: true }).count(),
      1,
      'none twice',
    );
    await page.unrouteAll({ behavior: 'ignoreErrors' });
    assertNotInUrls(watch, u.token);
    assertClean(watch, [srv.url]);
    await context.close();
  });
});
