/**
 * Builds the SQLite extension the store's connections load (src/store/sqlite/stable-plans.c) into
 * dist/store/sqlite/, with the machine's C compiler (`$CC`, else `cc`) and the sqlite3ext.h of the
 * SQLite better-sqlite3 ships. `npm run build` runs it. Without a compiler the build goes on and
 * says so: the service runs as well without the extension, its searches a little dearer
 * (docs/search.md). With `CI=true` (or `--require`) a missing compiler fails the build instead.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { EXTENSION_FILE } from '../src/store/sqlite/plan-once.js';

const ROOT = join(import.meta.dirname, '..');
const SOURCE = join(ROOT, 'src/store/sqlite/stable-plans.c');
const require = process.argv.includes('--require') || process.env.CI === 'true';

function skip(why: string): never {
  if (require) {
    console.error(`build-sqlite-extension: ${why}`);
    process.exit(1);
  }
  console.warn(`build-sqlite-extension: not built (${why}); the service runs without it`);
  process.exit(0);
}

rmSync(EXTENSION_FILE, { force: true });
if (process.platform === 'win32') skip('not built on Windows');
const headers = join(
  dirname(createRequire(import.meta.url).resolve('better-sqlite3/package.json')),
  'deps/sqlite3',
);
if (!existsSync(join(headers, 'sqlite3ext.h'))) skip(`no sqlite3ext.h in ${headers}`);
// `$CC` may carry words of its own (`ccache cc`, `gcc -m64`): the first is the program.
const [cc = 'cc', ...ccArgs] = (process.env.CC ?? '').split(/\s+/).filter(Boolean);
mkdirSync(dirname(EXTENSION_FILE), { recursive: true });
const shared = process.platform === 'darwin' ? ['-dynamiclib', '-undefined', 'dynamic_lookup'] : ['-shared'];
const run = spawnSync(
  cc,
  [...ccArgs, '-O2', '-fPIC', ...shared, '-I', headers, SOURCE, '-o', EXTENSION_FILE],
  {
    encoding: 'utf8',
  },
);
if (run.error) skip(`${cc}: ${run.error.message}`);
if (run.status !== 0) skip(`${cc} failed:\n${run.stderr}`);
console.log(`build-sqlite-extension: ${EXTENSION_FILE.slice(ROOT.length + 1)}`);
