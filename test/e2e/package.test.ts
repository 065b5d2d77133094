import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

// What `npm pack` would publish (the build that `npm test` ran first is what it packs): the
// service, its typed client and the built console must be in it, since a package installed from
// the registry runs no build of its own.
describe('the npm package', () => {
  it('holds bin/, the built service, client and console, and no sources or tests', {
    timeout: 60_000,
  }, async () => {
    const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: ROOT,
      maxBuffer: 16 * 1024 * 1024,
    });
    const [pack] = JSON.parse(stdout) as { files: { path: string }[] }[];
    const files = new Set(pack!.files.map((f) => f.path));
    for (const f of [
      'bin/plantstore',
      'dist/cli/main.js',
      'dist/client/index.js',
      'dist/client/index.d.ts',
      'dist/console/index.html',
      // plantstore --version reads it at run time; the license and changelog go with it.
      'package.json',
      'LICENSE',
      'CHANGELOG.md',
    ]) {
      assert.ok(files.has(f), `${f} is packed`);
    }
    // Every file the console's index loads is packed, with its pre-compressed copies.
    const index = readFileSync(`${ROOT}/dist/console/index.html`, 'utf8');
    const assets = [...index.matchAll(/(?:src|href)="\/console\/([^"]+)"/g)].map(
      (m) => `dist/console/${m[1]}`,
    );
    assert.ok(assets.length >= 2, 'the index loads a script and a stylesheet');
    for (const a of assets) {
      if (!/\.(js|css)$/.test(a)) continue;
      for (const f of [a, `${a}.br`, `${a}.gz`]) assert.ok(files.has(f), `${f} is packed`);
    }
    const stray = [...files].filter((f) => /^(src|test|bench|console|scripts|\.tmp|node_modules)\//.test(f));
    assert.deepEqual(stray, [], 'no sources, tests or build tools');
  });
});
