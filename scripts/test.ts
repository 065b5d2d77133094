// Runs every test file under test/ with node:test through tsx, after saying plainly which
// suites will run and which are skipped (no PostgreSQL or Redis on this machine). With CI=true
// a missing service fails the run instead.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { postgresUnreachable, redisUnreachable } from '../test/helpers/services.js';

function find(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? find(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : [],
  );
}

const skipped: string[] = [];
for (const [what, why] of [
  ['the postgres suites', await postgresUnreachable()],
  ['the Redis suites', await redisUnreachable()],
] as const) {
  if (!why) {
    console.log(`# ${what} run`);
  } else if (process.env.CI === 'true') {
    console.error(`# CI=true but ${why}: failing`);
    process.exit(1);
  } else {
    console.log(`# SKIPPED: ${what}, because ${why}`);
    skipped.push(what);
  }
}

const files = process.argv.length > 2 ? process.argv.slice(2) : find('test').sort();
const r = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...files], {
  stdio: 'inherit',
});
if (skipped.length) {
  console.log(
    `# reminder: ${skipped.join(' and ')} were SKIPPED; set PLANTSTORE_TEST_PG / PLANTSTORE_TEST_REDIS to run them`,
  );
}
process.exit(r.status ?? 1);
