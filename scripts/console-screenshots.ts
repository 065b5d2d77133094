// Takes docs/console-light.png and docs/console-dark.png (1280x800): a real `bin/plantstore serve` on
// a temporary SQLite file with a few plants and gardens, signed in in Debian's Chromium, once with
// the system's light preference and once with its dark one. Run after `npm run build`:
//   npm run screenshots   (PLANTSTORE_TEST_CHROMIUM=/path/to/chromium to use another Chromium)
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = fileURLToPath(new URL('..', import.meta.url));
const bin = join(root, 'bin/plantstore');
const chromiumPath = process.env.PLANTSTORE_TEST_CHROMIUM ?? '/usr/bin/chromium';
if (!existsSync(join(root, 'dist/console/index.html'))) {
  console.error('no dist/console/index.html: run npm run build first');
  process.exit(2);
}
if (!existsSync(chromiumPath)) {
  console.error(`no Chromium at ${chromiumPath} (apt-get install chromium, or set PLANTSTORE_TEST_CHROMIUM)`);
  process.exit(2);
}

const dir = mkdtempSync(join(tmpdir(), 'plantstore-shots-'));
const env = { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, LOG_LEVEL: 'info' };
const token = execFileSync(
  bin,
  [
    'token',
    'create',
    '--user',
    'robin',
    '--name',
    'console',
    '--scopes',
    'plants:read,plants:write,tokens:manage',
  ],
  { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
).trim();

const server = spawn(bin, ['serve', '--port', '0'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise<string>((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('serve did not listen within 20 s')), 20_000);
  let buf = '';
  server.stdout.on('data', (d: Buffer) => {
    buf += d;
    const m = /Server listening at (http:\/\/127\.0\.0\.1:[0-9]+)/.exec(buf);
    if (m) {
      clearTimeout(timer);
      resolve(m[1]!);
    }
  });
  server.once('exit', (code) => reject(new Error(`serve exited ${code}`)));
});

async function call(path: string, body: unknown, method = 'POST'): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.status === 204 ? {} : ((await res.json()) as Record<string, unknown>);
}

try {
  const balcony = await call('/gardens', { name: 'Balcony' });
  const office = await call('/gardens', { name: 'Office' });
  await call(`/gardens/${balcony.id}/members/sam`, { role: 'editor' }, 'PUT');
  await call(`/gardens/${office.id}/members/alex`, { role: 'viewer' }, 'PUT');
  const plants: [string, string | null, unknown][] = [
    ['Monstera deliciosa', 'indoor', null],
    ['Boston fern', 'indoor', null],
    ['Golden pothos', 'hanging', null],
    ['Calathea orbifolia', 'indoor', null],
    ['Rosemary', 'herb', balcony.id],
    ['Cherry tomato', 'vegetable', balcony.id],
    ['Lavender', 'herb', balcony.id],
    ['Snake plant', null, office.id],
    ['ZZ plant', null, office.id],
  ];
  for (const [name, tag, garden] of plants)
    await call(garden ? `/gardens/${garden}/plants` : '/plants', tag ? { name, tag } : { name });

  const browser = await chromium.launch({
    executablePath: chromiumPath,
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
  try {
    for (const scheme of ['light', 'dark'] as const) {
      const context = await browser.newContext({
        viewport: { width: 1280, height: 800 },
        colorScheme: scheme,
      });
      const page = await context.newPage();
      await page.goto(`${url}/console/`);
      await page.getByLabel('Access token').fill(token);
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await page.getByRole('button', { name: 'Sign out' }).waitFor();
      await page.getByText('ZZ plant', { exact: true }).first().waitFor();
      const out = join(root, `docs/console-${scheme}.png`);
      await page.screenshot({ path: out });
      console.log(`wrote ${out}`);
      await context.close();
    }
  } finally {
    await browser.close();
  }
} finally {
  server.kill('SIGTERM');
  await new Promise((done) => server.once('exit', done));
  rmSync(dir, { recursive: true, force: true });
}
