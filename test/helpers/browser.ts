// What the console's browser tests share: Debian's Chromium through playwright-core, a serve of the
// service with a token maker, and a watch on every page that records what contract 11 forbids (a
// request off the origin, a CSP violation, a browser dialog, an error thrown by the page).
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, BrowserContextOptions, Locator, Page, Request } from 'playwright-core';
import { chromium } from 'playwright-core';
import { cli, type Server, serve } from '../e2e/process.js';
import { until } from './wait.js';

export const CHROMIUM = process.env.PLANTSTORE_TEST_CHROMIUM ?? '/usr/bin/chromium';

/** Without Chromium (a laptop without Debian's package) the suites say so and skip; in CI they must run. */
export const skipBrowser: string | false = existsSync(CHROMIUM)
  ? false
  : process.env.CI === 'true'
    ? false
    : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set PLANTSTORE_TEST_CHROMIUM)`;

/** Headless Chromium with the flags this machine's closed network needs (no background connections). */
export function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** The CSP of section 11, for a serve without OpenID sign-in (`connect` adds the issuer). */
export function consoleCsp(connect = "'self'"): string {
  return (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
    `connect-src ${connect}; base-uri 'none'; form-action 'self'; frame-ancestors 'none'`
  );
}

export interface User {
  user: string;
  token: string;
  tokenId: string;
}

export interface ConsoleServer {
  server: Server;
  url: string;
  env: Record<string, string>;
  /** A new user (unique name from `prefix`) with a built-in token of these scopes, made over POST /tokens. */
  user(prefix: string, scopes?: string[]): Promise<User>;
  /** A built-in token of these scopes for exactly this user, named `name`, made over POST /tokens. */
  token(user: string, scopes: string[], name: string): Promise<User>;
  /** fetch against the service with this bearer token (JSON content type unless the body is absent). */
  api(token: string, path: string, init?: RequestInit): Promise<Response>;
  /** POST /plants (or into a garden), 201 asserted; the new plant's id. */
  plant(token: string, body: Record<string, unknown>, garden?: string): Promise<number>;
  /** Stops the serve and starts another on the same port and file: open connections are cut. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

let users = 0;

/** `bin/plantstore serve` on a fresh SQLite file; an admin token (made by the CLI) makes every user's token. */
export async function consoleServer(
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<ConsoleServer> {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-console-'));
  const fullEnv = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, AUTH_FAILURE_LIMIT: '0', ...env };
  const made = await cli(
    [
      'token',
      'create',
      '--user',
      'console-admin',
      '--scopes',
      'plants:read,plants:write,plants:admin,tokens:manage',
    ],
    fullEnv,
  );
  assert.equal(made.code, 0, made.stderr);
  const admin = made.stdout.trim();
  let server = await serve(args, fullEnv);
  const url = server.url;
  const api = (token: string, path: string, init: RequestInit = {}) =>
    fetch(`${url}${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${token}`,
        ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...((init.headers as Record<string, string>) ?? {}),
      },
    });
  const token = async (user: string, scopes: string[], name: string): Promise<User> => {
    const res = await api(admin, '/tokens', { method: 'POST', body: JSON.stringify({ user, scopes, name }) });
    assert.equal(res.status, 201, await res.clone().text());
    const body = (await res.json()) as { id: string; token: string };
    return { user, token: body.token, tokenId: body.id };
  };
  return {
    get server() {
      return server;
    },
    url,
    env: fullEnv,
    api,
    user: (prefix, scopes = ['plants:read', 'plants:write']) =>
      token(`${prefix}-${process.pid}-${++users}`, scopes, `${prefix} console test`),
    token,
    async plant(token, body, garden) {
      const res = await api(token, garden ? `/gardens/${garden}/plants` : '/plants', {
        method: 'POST',
        body: JSON.stringify(body),
      });
      assert.equal(res.status, 201, await res.clone().text());
      return Number(/\/plants\/([0-9]+)$/.exec(res.headers.get('location') ?? '')?.[1]);
    },
    async restart() {
      await server.stop();
      server = await serve([...args, '--port', new URL(url).port], fullEnv);
    },
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Everything a page did that section 11 forbids or that a test wants to look at afterwards. */
export interface Watch {
  requests: Request[];
  /** Browser dialogs (alert, confirm, prompt): the console never opens one. */
  dialogs: string[];
  /** CSP violations, from the page's securitypolicyviolation events and Chromium's console reports. */
  violations: string[];
  /** Errors thrown and not caught by the page. */
  errors: string[];
}

export interface Opened {
  context: BrowserContext;
  page: Page;
  watch: Watch;
}

// Reports every securitypolicyviolation of every document (also after reloads) on the console.
const REPORT_CSP = `document.addEventListener('securitypolicyviolation', (e) => {
  console.warn('[csp-violation] ' + e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' + e.lineNumber);
}, true);`;

/** A new context and page, watched from its first request. */
export async function open(browser: Browser, options: BrowserContextOptions = {}): Promise<Opened> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, ...options });
  // A control that is not there fails its test in 15 s, not Playwright's default 30 s.
  context.setDefaultTimeout(15_000);
  const page = await context.newPage();
  const watch: Watch = { requests: [], dialogs: [], violations: [], errors: [] };
  await context.addInitScript({ content: REPORT_CSP });
  page.on('request', (r) => watch.requests.push(r));
  page.on('dialog', (d) => {
    watch.dialogs.push(`${d.type()}: ${d.message()}`);
    d.dismiss().catch(() => {});
  });
  page.on('console', (m) => {
    const text = m.text();
    if (text.startsWith('[csp-violation]') || /Content Security Policy/i.test(text))
      watch.violations.push(text);
  });
  page.on('pageerror', (e) => watch.errors.push(String(e)));
  return { context, page, watch };
}

/**
 * Asserts what every console test holds at its end: every request went to `origins` (the service's,
 * and the issuer's when OpenID sign-in is used), no CSP violation, no browser dialog, no page error.
 */
export function assertClean(watch: Watch, origins: string[]): void {
  const foreign = watch.requests
    .map((r) => r.url())
    .filter((u) => !u.startsWith('data:') && !origins.includes(new URL(u).origin));
  assert.deepEqual(foreign, [], 'every request goes to the service’s own origin');
  assert.deepEqual(watch.violations, [], 'no Content-Security-Policy violation');
  assert.deepEqual(watch.dialogs, [], 'no browser dialog (alert, confirm, prompt)');
  assert.deepEqual(watch.errors, [], 'no error thrown by the page');
}

/** Asserts that no request the page made carries `secret` in its URL (plain or percent-encoded). */
export function assertNotInUrls(watch: Watch, secret: string): void {
  const leaked = watch.requests
    .map((r) => r.url())
    .filter((u) => u.includes(secret) || u.includes(encodeURIComponent(secret)));
  assert.deepEqual(leaked, [], 'the token never appears in a URL');
}

/** Whether the element is the focused one. */
export function focused(locator: Locator): Promise<boolean> {
  return locator.evaluate((el) => el === document.activeElement);
}

/** Asserts that the focused element shows it (WCAG 2.4.7): it matches :focus-visible and draws a ring. */
export async function assertFocusVisible(locator: Locator): Promise<void> {
  const ring = await locator.evaluate((el) => {
    const style = getComputedStyle(el);
    return {
      focusVisible: el.matches(':focus-visible'),
      outline: `${style.outlineStyle} ${style.outlineWidth}`,
      shadow: style.boxShadow,
    };
  });
  const [outlineStyle, outlineWidth] = ring.outline.split(' ');
  const drawn =
    (outlineStyle !== 'none' && Number.parseFloat(outlineWidth ?? '0') > 0) || ring.shadow !== 'none';
  assert.ok(ring.focusVisible && drawn, `${locator} shows that it has the focus: ${JSON.stringify(ring)}`);
}

/**
 * Presses Tab (at most `max` times) until `locator` has the focus: the keyboard path to a control,
 * which must then show its focus.
 */
export async function tabTo(page: Page, locator: Locator, max = 60): Promise<void> {
  await locator.waitFor();
  for (let i = 0; i < max; i++) {
    if (await focused(locator)) return assertFocusVisible(locator);
    await page.keyboard.press('Tab');
  }
  throw new Error(`${locator} not reached within ${max} presses of Tab`);
}

/** Opens /console/ and signs in with the token, typed into "Access token"; resolves once signed in. */
export async function signIn(
  page: Page,
  url: string,
  token: string,
  { remember = false }: { remember?: boolean } = {},
): Promise<void> {
  await page.goto(`${url}/console/`);
  await page.getByLabel('Access token').fill(token);
  if (remember) await page.getByRole('checkbox', { name: 'Remember in this tab' }).check();
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await signedIn(page);
}

/** Resolves once the page shows a signed-in console ("Sign out" is there). */
export async function signedIn(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** The plants' names as GET /plants shows them to this token (up to 1,000). */
export async function plantNames(srv: ConsoleServer, token: string): Promise<string[]> {
  const res = await srv.api(token, '/plants?limit=1000');
  assert.equal(res.status, 200);
  return ((await res.json()) as { name: string }[]).map((p) => p.name);
}

/** The form "New plant" opens: the fields "Name", "Tag" (and "Garden") and the button "Create". */
export const plantForm = (page: Page): Locator =>
  page.getByRole('form', { name: /new plant/i }).or(page.getByRole('dialog', { name: /new plant/i }));

/** Clicks the named button of the page's confirmation dialog, and waits for the dialog to close. */
export async function confirm(page: Page, button: string): Promise<void> {
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('button', { name: button, exact: true }).click();
  await dialog.waitFor({ state: 'hidden' });
}

/** Goes to a view through its navigation link. */
export async function nav(page: Page, name: 'Plants' | 'Trash' | 'Gardens' | 'Live' | 'Webhooks' | 'Tokens') {
  await page.getByRole('link', { name, exact: true }).click();
}

/** What the page shows a person: its text and the values of its fields (a secret is shown in a field). */
export function shown(page: Page): Promise<string> {
  return page.evaluate(
    () =>
      `${document.body.innerText}\n${[...document.querySelectorAll('input, textarea')]
        .map((e) => (e as HTMLInputElement).value)
        .join('\n')}`,
  );
}

/** Waits until `probe` holds (polled), naming `what` when it never does. */
export function eventually(what: string, probe: () => Promise<boolean>, ms = 10_000): Promise<true> {
  return until(what, async () => (await probe()) || undefined, ms);
}

const require = createRequire(import.meta.url);
let axeSource: string | undefined;

export const AXE_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'];

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: unknown[]; failureSummary?: string }[];
}

/**
 * Runs axe-core (WCAG 2.2 AA and below) on the page as it is now; its violations, each described on
 * a few lines naming `what` was checked. axe's source is evaluated through the DevTools protocol,
 * which the page's CSP (script-src 'self') does not govern, so the page keeps its real policy while
 * it is checked.
 */
export async function axeViolations(page: Page, what: string): Promise<string[]> {
  axeSource ??= readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(axeSource);
  const violations = await page.evaluate(async (tags) => {
    // biome-ignore lint/suspicious/noExplicitAny: axe-core, put on window by its own source above
    const axe = (window as any).axe;
    const result = await axe.run(document, {
      runOnly: { type: 'tag', values: tags },
      resultTypes: ['violations'],
    });
    return result.violations as unknown[];
  }, AXE_TAGS);
  return (violations as AxeViolation[]).map(
    (v) =>
      `${what}: ${v.id} (${v.impact}): ${v.help}\n` +
      v.nodes
        .map((n) => `    ${JSON.stringify(n.target)} ${(n.failureSummary ?? '').replace(/\s+/g, ' ')}`)
        .join('\n'),
  );
}

/**
 * Holds the page's requests to `pathname` (a view's first read, to see the view while it loads)
 * until the returned `release` is called, which lets them through and stops holding.
 */
export async function holdAnswers(page: Page, pathname: string): Promise<() => Promise<void>> {
  let release!: () => void;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const matches = (url: URL) => url.pathname === pathname;
  // Each held request's handler, so that release lets every one through before it stops holding.
  const handled: Promise<void>[] = [];
  await page.route(matches, (route) => {
    const through = held.then(() => route.continue());
    handled.push(through);
    return through;
  });
  return async () => {
    release();
    await Promise.all(handled);
    await page.unroute(matches);
  };
}
