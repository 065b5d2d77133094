// Runs test files with node:test through tsx, after saying plainly which Node runs them and which
// suites will run or are skipped (no PostgreSQL or Redis on this machine). With CI=true a missing
// service fails the run instead.
//
// Two tiers (docs/testing.md): `npm test` runs every `*.test.ts` under test/ but the long ones;
// `npm run test:long` (scripts/test.ts --long) runs the `*.long.test.ts` files: the kill -9 loops,
// the restart loops, the browser flows, failover and the other long end-to-end runs. CI runs both.
// Files named on the command line run whatever their tier.
// PLANTSTORE_TEST_NODE=/path/to/node runs the suite on that Node (CI's second line): npm puts the
// project's own Node 24 first on PATH for every script, so the runner, `bin/plantstore` children
// and tsx are pointed at the chosen binary explicitly.
//
// Every test is bounded (docs/testing.md): node:test's --test-timeout for each test, and a
// watchdog over progress, not over the whole run: when no test has begun or ended for
// PLANTSTORE_TEST_STALL (default: the per-test bound and 2 minutes more), it prints the files and
// tests still running, from a progress reporter's log, kills the run and exits non-zero. A run that
// keeps making progress is never stopped for being slow; a hang is a failure with a name.
// A test queued to run that never ended (its file's process exited first: node:test then reports
// the tests it saw pass and exits 0, as --test-force-exit did on Node 24.21) fails the run too,
// named from the same log.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import { parseDuration } from '../src/durations.js';
import { postgresUnreachable, redisUnreachable } from '../test/helpers/services.js';

function find(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? find(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : [],
  );
}

/** The long tier's files: `*.long.test.ts`. */
const isLong = (file: string) => file.endsWith('.long.test.ts');

/** A line of scripts/test-progress.mjs's log. */
interface ProgressLine {
  event: 'queue' | 'run' | 'end';
  file?: string;
  name: string;
  line?: number;
  nesting: number;
  at: number;
}

/** Which test a progress line is of: its file, line, depth and name. */
const testKey = (l: ProgressLine) => `${l.file}\0${l.line}\0${l.nesting}\0${l.name}`;

/** The tests a progress log shows as begun and not ended, oldest first. */
function stillRunning(lines: ProgressLine[]): ProgressLine[] {
  const open = new Map<string, ProgressLine>();
  for (const l of lines) {
    if (l.event === 'run') open.set(testKey(l), l);
    else if (l.event === 'end') open.delete(testKey(l));
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
const stall = duration('PLANTSTORE_TEST_STALL', `${(perTest + 120_000) / 1000}s`);
console.log(
  `# each test is bounded at ${seconds(perTest)}; the run stops if no test begins or ends for ${seconds(stall)}`,
);

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

const args = process.argv.slice(2);
const long = args.includes('--long');
const named = args.filter((a) => a !== '--long');
const files = named.length
  ? named
  : find('test')
      .filter((f) => isLong(f) === long)
      .sort();
console.log(
  `# ${named.length ? 'the files named' : long ? 'the long tier' : 'the quick tier'}: ${files.length} files`,
);
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
    // No --test-force-exit: on Node 24.21 it ended a file's process before the file's later tests
    // had run, and nothing reported it (test/unit/migrations.test.ts: 32, 40 and 56 of 56 in three
    // runs with it, 56 every time without). A file that leaves a socket or timer behind is stopped
    // by the watchdog below, which names it.
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

// The watchdog looks at the progress log's size: it grows by a line each time a test is dequeued
// or completes. No growth for `stall` means nothing has begun or ended for that long.
let stalled = false;
let lastSize = -1;
let lastChange = Date.now();
const watchdog = setInterval(() => {
  let size = 0;
  try {
    size = statSync(progressLog).size;
  } catch {
    // not written yet
  }
  if (size !== lastSize) {
    lastSize = size;
    lastChange = Date.now();
    return;
  }
  if (Date.now() - lastChange < stall) return;
  stalled = true;
  clearInterval(watchdog);
  const lines = readProgress();
  const open = stillRunning(lines);
  console.error(`\n# WATCHDOG: no test began or ended for ${seconds(stall)}; still running:`);
  for (const t of open) {
    const where = t.file ? `${relative(process.cwd(), t.file)}:${t.line ?? '?'}` : '?';
    const since = Math.round((Date.now() - t.at) / 1000);
    console.error(`#   ${'  '.repeat(t.nesting)}${t.name}  (${where}, for ${since} s)`);
  }
  if (!open.length) console.error('#   (no test had begun and not ended: a file is stuck outside its tests)');
  stop('SIGKILL');
}, 5_000);

function readProgress(): ProgressLine[] {
  try {
    return readFileSync(progressLog, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as ProgressLine);
  } catch {
    return [];
  }
}

/** Each file's time from its first test begun to its last ended, slowest first. */
function fileTimes(lines: ProgressLine[]): [string, number][] {
  const span = new Map<string, [number, number]>();
  for (const l of lines) {
    // A test declared in a module that a test file imports is reported with the module's path.
    if (!l.file?.endsWith('.test.ts')) continue;
    const s = span.get(l.file);
    span.set(l.file, s ? [Math.min(s[0], l.at), Math.max(s[1], l.at)] : [l.at, l.at]);
  }
  return [...span].map(([f, [a, b]]): [string, number] => [f, b - a]).sort((x, y) => y[1] - x[1]);
}

/** The tests queued to run that never ended (a test of the same key queued twice ends twice). */
function neverEnded(lines: ProgressLine[]): ProgressLine[] {
  const open = new Map<string, ProgressLine[]>();
  for (const l of lines) {
    if (l.event === 'run') continue;
    const queued = open.get(testKey(l)) ?? [];
    if (l.event === 'queue') queued.push(l);
    else queued.shift();
    open.set(testKey(l), queued);
  }
  return [...open.values()].flat();
}

const status = await new Promise<number>((done) =>
  run.on('exit', (code, signal) => done(code ?? (signal ? 1 : 0))),
);
clearInterval(watchdog);
const progress = readProgress();
const dropped = stalled ? [] : neverEnded(progress);
const times = fileTimes(progress);
const slowest = times.slice(0, 8);
// PLANTSTORE_TEST_TIMES=FILE writes every file's time there, slowest first (docs/testing.md's tiers).
if (process.env.PLANTSTORE_TEST_TIMES) {
  writeFileSync(
    process.env.PLANTSTORE_TEST_TIMES,
    times.map(([f, ms]) => `${(ms / 1000).toFixed(1)}\t${relative(process.cwd(), f)}\n`).join(''),
  );
}
rmSync(work, { recursive: true, force: true });
console.log(`# the run took ${Math.round((Date.now() - started) / 1000)} s; the slowest files:`);
for (const [f, ms] of slowest) console.log(`#   ${Math.round(ms / 1000)} s  ${relative(process.cwd(), f)}`);
if (skipped.length) {
  console.log(
    `# reminder: ${skipped.join(' and ')} were SKIPPED; set PLANTSTORE_TEST_PG / PLANTSTORE_TEST_REDIS to run them`,
  );
}
if (stalled)
  console.error(`# FAILED: the run was stopped by the watchdog: no progress for ${seconds(stall)}`);
if (dropped.length) {
  console.error(
    `# FAILED: ${dropped.length} tests were queued and never ended (their file's process exited first?):`,
  );
  for (const t of dropped.slice(0, 20)) {
    const where = t.file ? `${relative(process.cwd(), t.file)}:${t.line ?? '?'}` : '?';
    console.error(`#   ${'  '.repeat(t.nesting)}${t.name}  (${where})`);
  }
}
process.exit(stalled || dropped.length ? 1 : status);
