// Takes docs/console-light.png and docs/console-dark.png (1280x800): a real `bin/plantstore serve` on
// a temporary SQLite file with a few plants and gardens, signed in in Debian's Chromium, once with
// the system's light preference and once with its dark one — through the console tests' own fixture
// (test/helpers/browser.ts), so the pictures show the console as the tests drive it. Run after
// `npm run build`:
//   npm run screenshots   (PLANTSTORE_TEST_CHROMIUM=/path/to/chromium to use another Chromium)
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CHROMIUM, consoleServer, launch, open, signIn } from '../test/helpers/browser.js';

const root = fileURLToPath(new URL('..', import.meta.url));
if (!existsSync(join(root, 'dist/console/index.html'))) {
  console.error('no dist/console/index.html: run npm run build first');
  process.exit(2);
}
if (!existsSync(CHROMIUM)) {
  console.error(`no Chromium at ${CHROMIUM} (apt-get install chromium, or set PLANTSTORE_TEST_CHROMIUM)`);
  process.exit(2);
}

// A test of node:test's, as the fixture is made for them: a failure is reported, and whatever the
// fixture started is stopped, as after a failing test.
test('docs/console-light.png and docs/console-dark.png', { timeout: 120_000 }, async () => {
  const srv = await consoleServer();
  try {
    const { token } = await srv.token('robin', ['plants:read', 'plants:write', 'tokens:manage'], 'console');
    const call = async (path: string, body: unknown, method = 'POST') => {
      const res = await srv.api(token, path, { method, body: JSON.stringify(body) });
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
      return (await res.json()) as { id: string };
    };
    const balcony = await call('/gardens', { name: 'Balcony' });
    const office = await call('/gardens', { name: 'Office' });
    await call(`/gardens/${balcony.id}/members/sam`, { role: 'editor' }, 'PUT');
    await call(`/gardens/${office.id}/members/alex`, { role: 'viewer' }, 'PUT');
    const plants: [string, string | null, string | undefined][] = [
      ['Monstera deliciosa', 'indoor', undefined],
      ['Boston fern', 'indoor', undefined],
      ['Golden pothos', 'hanging', undefined],
      ['Calathea orbifolia', 'indoor', undefined],
      ['Rosemary', 'herb', balcony.id],
      ['Cherry tomato', 'vegetable', balcony.id],
      ['Lavender', 'herb', balcony.id],
      ['Snake plant', null, office.id],
      ['ZZ plant', null, office.id],
    ];
    for (const [name, tag, garden] of plants) await srv.plant(token, tag ? { name, tag } : { name }, garden);

    const browser = await launch();
    try {
      for (const scheme of ['light', 'dark'] as const) {
        const { context, page } = await open(browser, { colorScheme: scheme });
        await signIn(page, srv.url, token);
        await page.getByText('ZZ plant', { exact: true }).first().waitFor();
        const out = join(root, `docs/console-${scheme}.png`);
        // The pointer is where "Sign in" was clicked; moved off the page, no button shows its hover.
        await page.mouse.move(0, 799);
        await page.screenshot({ path: out });
        console.log(`wrote ${out}`);
        await context.close();
      }
    } finally {
      await browser.close();
    }
  } finally {
    await srv.stop();
  }
});
