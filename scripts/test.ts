// Runs every test file under test/ with node:test through tsx, after saying plainly which Node
// runs them and which suites will run or are skipped (no PostgreSQL or Redis on this machine).
// With CI=true a missing service fails the run instead.
// PLANTSTORE_TEST_NODE=/path/to/node runs the suite on that Node (CI's second line): npm puts the
// project's own Node 24 first on PATH for every script, so the runner, `bin/plantstore` children
// and tsx are pointed at the chosen binary explicitly.
//
// Every test is bounded (docs/testing.md): node:test's --test-timeout for each test, and a
// watchdog over the whole run. When the run goes past PLANTSTORE_TEST_LIMIT (default 20m), the
// watchdog prints the files and tests still running, from a progress reporter's log, kills the
// run and exits non-zero: a hang is a failure with a name, not a wait for CI's own limit.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import { parseDuration } from '../src/durations.js';
import { postgresUnreachable, redisUnreachable } from '../test/helpers/services.js';

function find(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? find(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : [],
  );
}

/** A line of scripts/test-progress.mjs's log. */
interface ProgressLine {
  event: 'run' | 'end';
  file?: string;
  name: string;
  line?: number;
  nesting: number;
  at: number;
}

/** The tests a progress log shows as begun and not ended, oldest first. */
function stillRunning(lines: ProgressLine[]): ProgressLine[] {
  const open = new Map<string, ProgressLine>();
  for (const l of lines) {
    const key = `${l.file}\0${l.line}\0${l.nesting}\0${l.name}`;
    if (l.event === 'run') open.set(key, l);
    else open.delete(key);
  }
  return [...open.values()].sort((a, b) => a.at - b.at);
}

const seconds = (ms: number) => (ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms / 1000} s`);

function duration(name: string, fallback: string): number {
  const ms = parseDuration(process.env[name] ?? fallback);
  if (ms === null || ms <= 0) {
    console.error(`# ${name} must be a duration such as 90s or 25m`);
    process.exit(2);
  }
  return ms;
}

const node = process.env.PLANTSTORE_TEST_NODE ? resolve(process.env.PLANTSTORE_TEST_NODE) : process.execPath;
const version = spawnSync(node, ['--version'], { encoding: 'utf8' });
if (version.status !== 0) {
  console.error(`# cannot run ${node}: ${version.error?.message ?? version.stderr}`);
  process.exit(1);
}
console.log(`# tests run on Node.js ${version.stdout.trim()} (${node})`);

// Node 22 applies --test-timeout to each test file as a whole (Node 24 to each test), so there it
// must cover the slowest file, not only the slowest test.
const major = Number(/^v(\d+)/.exec(version.stdout)?.[1]);
const perTest = duration('PLANTSTORE_TEST_TIMEOUT', major >= 24 ? '90s' : '10m');
const limit = duration('PLANTSTORE_TEST_LIMIT', '20m');
console.log(`# each test is bounded at ${seconds(perTest)}, the whole run at ${seconds(limit)}`);

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
const work = mkdtempSync(join(tmpdir(), 'plantstore-test-run-'));
const progressLog = join(work, 'progress.jsonl');
const started = Date.now();
const run = spawn(
  node,
  [
    '--import',
    'tsx',
    '--test',
    '--test-concurrency=2',
    `--test-timeout=${perTest}`,
    // A test that timed out may leave a socket or timer behind; its file still ends.
    '--test-force-exit',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    `--test-reporter=${join(import.meta.dirname, 'test-progress.mjs')}`,
    `--test-reporter-destination=${progressLog}`,
    ...files,
  ],
  {
    stdio: 'inherit',
    // A group of its own, so the watchdog can stop every test file and the servers they started.
    detached: true,
    env: { ...process.env, PATH: `${dirname(node)}${delimiter}${process.env.PATH ?? ''}` },
  },
);
const stop = (signal: NodeJS.Signals) => {
  try {
    process.kill(-(run.pid as number), signal);
  } catch {
    // already gone
  }
};
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => stop(signal));

let overLimit = false;
const watchdog = setTimeout(() => {
  overLimit = true;
  const lines = readFileSync(progressLog, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ProgressLine);
  const open = stillRunning(lines);
  console.error(`\n# WATCHDOG: the run went past its limit of ${seconds(limit)}; still running:`);
  for (const t of open) {
    const where = t.file ? `${relative(process.cwd(), t.file)}:${t.line ?? '?'}` : '?';
    const since = Math.round((Date.now() - t.at) / 1000);
    console.error(`#   ${'  '.repeat(t.nesting)}${t.name}  (${where}, for ${since} s)`);
  }
  if (!open.length) console.error('#   (no test had begun and not ended: a file is stuck outside its tests)');
  stop('SIGKILL');
}, limit);

const status = await new Promise<number>((done) =>
  run.on('exit', (code, signal) => done(code ?? (signal ? 1 : 0))),
);
clearTimeout(watchdog);
rmSync(work, { recursive: true, force: true });
console.log(`# the run took ${Math.round((Date.now() - started) / 1000)} s`);
if (skipped.length) {
  console.log(
    `# reminder: ${skipped.join(' and ')} were SKIPPED; set PLANTSTORE_TEST_PG / PLANTSTORE_TEST_REDIS to run them`,
  );
}
if (overLimit) console.error(`# FAILED: the run was stopped by the watchdog after ${seconds(limit)}`);
process.exit(overLimit ? 1 : status);
