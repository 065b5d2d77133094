// Runs every test file under test/ with node:test through tsx, after saying plainly which Node
// runs them and which suites will run or are skipped (no PostgreSQL or Redis on this machine).
// With CI=true a missing service fails the run instead.
// PLANTSTORE_TEST_NODE=/path/to/node runs the suite on that Node (CI's second line): npm puts the
// project's own Node 24 first on PATH for every script, so the runner, `bin/plantstore` children
// and tsx are pointed at the chosen binary explicitly.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { postgresUnreachable, redisUnreachable } from '../test/helpers/services.js';

function find(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? find(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : [],
  );
}

const node = process.env.PLANTSTORE_TEST_NODE ? resolve(process.env.PLANTSTORE_TEST_NODE) : process.execPath;
const version = spawnSync(node, ['--version'], { encoding: 'utf8' });
if (version.status !== 0) {
  console.error(`# cannot run ${node}: ${version.error?.message ?? version.stderr}`);
  process.exit(1);
}
console.log(`# tests run on Node.js ${version.stdout.trim()} (${node})`);

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
const r = spawnSync(node, ['--import', 'tsx', '--test', '--test-concurrency=2', ...files], {
  stdio: 'inherit',
  env: { ...process.env, PATH: `${dirname(node)}${delimiter}${process.env.PATH ?? ''}` },
});
if (skipped.length) {
  console.log(
    `# reminder: ${skipped.join(' and ')} were SKIPPED; set PLANTSTORE_TEST_PG / PLANTSTORE_TEST_REDIS to run them`,
  );
}
process.exit(r.status ?? 1);
