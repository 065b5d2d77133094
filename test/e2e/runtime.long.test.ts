// The long tier's restarts (runtime.test.ts starts and stops 3 times).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { restarts } from './process.js';

const dir = mkdtempSync(join(tmpdir(), 'plantstore-restarts-'));
after(() => rmSync(dir, { recursive: true, force: true }));

it('starts, serves and stops cleanly 20 times in a row', { timeout: 5 * 60_000 }, async () => {
  await restarts(join(dir, 'restarts.db'), 20);
});
