/**
 * plantstore benchmark: starts `bin/plantstore serve` on a seeded store and drives it with
 * wrk (or autocannon) from a separate process. Rounds are interleaved across targets and medians reported.
 *
 *   npm run bench                          SQLite (docs/benchmarks.md), then PostgreSQL with 1 and 2
 *                                          instances when it is reachable (docs/scale-out.md)
 *   npm run bench -- --scale               only the PostgreSQL part
 *   npm run bench -- --no-postgres         only the SQLite part
 *   npm run bench -- --mixed               only the mixed workload (bench/mixed.ts), which otherwise
 *                                          follows the rest; --no-mixed leaves it out
 *   npm run bench -- --only gardens        only the garden scenarios (contract 3.2): first and random
 *                                          deep pages for a caller in 1 garden and one in 20, against
 *                                          the ceiling (SQLite), then the mixed workload without and
 *                                          with sharing (SQLite; --no-mixed leaves it out)
 *   npm run bench -- --events-scale        only the events-at-scale scenarios (bench/events-scale.ts):
 *                                          thousands of open streams with creates at a steady rate,
 *                                          and webhook throughput; the other options are that script's
 *                                          (--streams 1000,10000 --engine sqlite|postgres --only … --write)
 *   npm run bench -- --failover            only the loss of the PostgreSQL primary (bench/failover.ts)
 *   npm run bench -- --store-move          only export and import of a whole store between engines
 *                                          (bench/store-move.ts; its options are that script's)
 *   npm run bench -- --pg-statements       only PostgreSQL's statements and round trips per request
 *                                          (bench/pg-statements.ts; counted on the wire)
 *   npm run bench -- --history-pages 100000 sqlite
 *                                          only a page of one plant's history and of a garden's
 *                                          activity with N events kept (bench/history-pages.ts:
 *                                          N, engine, seconds), with their cost on disk
 *   npm run bench -- --trash-purge 100000 sqlite
 *                                          only creates beside the service's purge of N expired
 *                                          trash entries (bench/trash-purge.ts: N, engine)
 *   npm run bench -- --changes sqlite 1000000 1000000
 *                                          only the change feed served: the first sync, an empty delta and a
 *                                          delta of 100 at 20 connections (bench/changes.ts: engine, plants,
 *                                          events, seconds)
 *   npm run bench -- --size 100000,1000000,10000000
 *                                          only how each operation's cost grows with the size of the
 *                                          store (bench/size.ts): N plants over 10,000 users and
 *                                          20,000 gardens, built through POST /plants/batch, then
 *                                          first and deep pages, read, create, delete, search, a
 *                                          caller in 20 gardens, export, peak RSS, size on disk
 *                                          (--engine sqlite|postgres --rounds … --keep --write)
 *   npm run bench -- --flame               only the flame graphs of a list page, a read and a create
 *                                          (bench/flame.ts; --engine sqlite|postgres)
 *   npm run bench -- --search-bulk         only search, batch and export on 1,000,000 plants
 *                                          (bench/search-bulk.ts); the other options are that
 *                                          script's (--engine sqlite|postgres --rounds … --write)
 *   options: --rounds N --duration S --plants N --connections N --pg URL --load wrk|autocannon
 *            --no-write (print the results only; docs/ is left as it is: for smoke runs)
 */
import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { BENCH_PG, benchServe, freePort, pgDatabase, runPinned, waitReady } from './ports.js';
import {
  coreBusy,
  coreTimes,
  cpuTicks,
  spawnServer,
  stopAll,
  TICK_US,
  waitIdle,
  withOthersStopped,
} from './procs.js';
import {
  chart,
  median,
  type Result,
  type Samples,
  summarize,
  summarizeGardens,
  writeGardensReport,
  writeReport,
  writeScaleReport,
} from './report.js';
import { deepPages, type Seeded, SHARED_GARDENS, seed, seededPlant, USERS } from './seed.js';

/**
 * Distinct deep pages per caller: far more than the list cache holds (16 MB, some 20,000 pages of
 * 20 plants, dropped oldest first), and each run goes on where the caller's last one stopped, so
 * that a deep page is read from the store, not the cache.
 */
const DEEP_PAGES = 80_000;

// Scenarios that are scripts of their own, with options of their own: `--FLAG` runs SCRIPT with
// the other arguments.
const SCRIPTS: Record<string, string> = {
  '--events-scale': 'events-scale.ts', // thousands of streams, webhook throughput
  '--search-bulk': 'search-bulk.ts', // search, batch and export at scale
  '--failover': 'failover.ts', // losing the PostgreSQL primary (two clusters of its own)
  '--store-move': 'store-move.ts', // moving a whole store between engines (export and import)
  '--pg-statements': 'pg-statements.ts', // statements and round trips to PostgreSQL per request
  '--flame': 'flame.ts', // flame graphs of the three hottest paths (CPU profiles under load)
  '--peer': 'peer.ts', // plantstore beside Platformatic DB
  '--history-pages': 'history-pages.ts', // a page of history and activity as the log grows
  '--trash-purge': 'trash-purge.ts', // creates beside the service's purge of N expired trash entries
  '--changes': 'changes.ts', // the change feed: first sync, empty delta, delta of 100
  '--size': 'size.ts', // how each operation's cost grows with the store: 100,000 … 10,000,000 plants
};
for (const [flag, script] of Object.entries(SCRIPTS)) {
  if (!process.argv.includes(flag)) continue;
  const args = process.argv.slice(2).filter((a) => a !== flag);
  const run = spawnSync(process.execPath, ['--import', 'tsx', join(import.meta.dirname, script), ...args], {
    stdio: 'inherit',
  });
  process.exit(run.status ?? 1);
}

const { values: opt } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    duration: { type: 'string', default: '3' },
    plants: { type: 'string', default: '100000' },
    connections: { type: 'string', default: '50' },
    // wrk (Debian's package) when it is installed, else autocannon; see LOADERS.
    load: { type: 'string' },
    scale: { type: 'boolean', default: false },
    'no-postgres': { type: 'boolean', default: false },
    mixed: { type: 'boolean', default: false },
    'no-mixed': { type: 'boolean', default: false },
    only: { type: 'string' },
    'no-write': { type: 'boolean', default: false },
    pg: { type: 'string', default: BENCH_PG },
  },
});
const ROUNDS = Number(opt.rounds);
const DURATION = Number(opt.duration);
const CONNECTIONS = Number(opt.connections);
const PLANTS = Number(opt.plants);
if (opt.only !== undefined && opt.only !== 'gardens') throw new Error('--only takes: gardens');
const GARDENS_ONLY = opt.only === 'gardens';
const WRITE = !opt['no-write'];
const PIN = availableParallelism() >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;

// The load generators, each a script taking one JSON spec and printing one JSON result line.
// wrk is preferred: written in C, it takes its latency samples as answers arrive, whereas
// autocannon's JavaScript handles a burst of answers (a group commit answers ~50 at once) one
// after another and counts its own queueing as latency (docs/benchmarks.md, "Load generator").
const LOADERS: Record<string, string> = { wrk: 'bench/wrk.mjs', autocannon: 'bench/load.mjs' };
const HAVE_WRK = spawnSync('wrk', ['-v']).error === undefined;
const LOADER = opt.load ?? (HAVE_WRK ? 'wrk' : 'autocannon');
if (!(LOADER in LOADERS)) throw new Error(`--load must be one of ${Object.keys(LOADERS).join(', ')}`);
if (LOADER === 'wrk' && !HAVE_WRK) throw new Error('--load wrk: wrk is not installed (apt-get install wrk)');
if (LOADER === 'autocannon' && opt.load === undefined) {
  console.error(
    'wrk is not installed (apt-get install wrk): measuring with autocannon, whose latency figures include its own queueing.',
  );
}

interface Target {
  name: string;
  urls: string[];
  token: string;
  readIds: number[];
  /** Paths that differ from plantstore's, by operation name. */
  paths?: Record<string, string>;
  /** Only these operations (default: all). */
  ops?: string[];
  /** Paths of random deep list pages (the `deep` operation); without them, the op's fixed path. */
  deep?: string[];
  pids: number[];
  stop(): Promise<void>;
}

// Being in groups of their own, the servers do not get the terminal's Ctrl-C: pass it on.
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, async () => {
    // Servers started but not yet handed to `cleanups` too; then what the run's `finally` does.
    await stopAll();
    await cleanUp();
    process.exit(130);
  });
}

/** Resident memory high-water mark of a process, in MB (Linux). */
function peakRssMb(pid: number): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmHWM:\s+([0-9]+) kB/.exec(status)?.[1]);
    return kb / 1024;
  } catch {
    return null;
  }
}

async function startPlantstore(
  name: string,
  database: string,
  instances: number,
  pin: boolean,
  plants = PLANTS,
): Promise<Target & { seeded: Seeded; sharedDeep: string[] }> {
  const s = await seed(database, plants);
  const deep = deepPages([s.one, s.shared], 20, DEEP_PAGES);
  const children: ChildProcess[] = [];
  const urls: string[] = [];
  for (let i = 0; i < instances; i++) {
    const port = await freePort();
    // BENCH_SERVE_FLAGS: the benchmark's one token would hit the default per-token limit at once.
    children.push(spawnServer(benchServe(join(import.meta.dirname, '..'), port, database), pin));
    urls.push(`http://127.0.0.1:${port}`);
  }
  await Promise.all(urls.map((u) => waitReady(u, '/readyz')));
  return {
    name,
    urls,
    token: s.token,
    readIds: s.callerIds,
    deep: deep[0],
    pids: children.map((c) => c.pid!),
    stop: () => stopAll(children),
    seeded: s,
    sharedDeep: deep[1]!,
  };
}

/**
 * The caller in SHARED_GARDENS gardens, on the same server as `t` (its 1-garden caller): list
 * operations only, deep pages at the same positions as the 1-garden caller's. Stopping it stops
 * nothing (`t` owns the server).
 */
function sharedCaller(t: Target & { seeded: Seeded; sharedDeep: string[] }): Target {
  return {
    ...t,
    name: `${t.name}, ${SHARED_GARDENS} gardens`,
    token: t.seeded.shared.token,
    readIds: t.seeded.shared.ids,
    deep: t.sharedDeep,
    ops: GARDEN_OPS,
    stop: async () => {},
  };
}

async function startCeiling(pin: boolean): Promise<Target> {
  const port = await freePort();
  const child = spawnServer(['node', 'bench/ceiling.mjs', String(port)], pin);
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/healthz');
  return {
    name: 'node:http ceiling',
    urls: [url],
    // Any Bearer token: the ceiling checks that one is sent, as the service must.
    token: 'ceiling',
    readIds: [1],
    pids: [child.pid!],
    stop: () => stopAll([child]),
  };
}

/** json-server 0.17 serving the same plants; "the caller's plants" is an owner filter there. */
async function startJsonServer(pin: boolean, dir: string): Promise<Target> {
  const file = join(dir, 'json-server-db.json');
  const plants = Array.from({ length: PLANTS }, (_, i) => {
    const { owner, name, tag } = seededPlant(i);
    return { id: i + 1, owner, name, ...(tag === null ? {} : { tag }) };
  });
  writeFileSync(file, JSON.stringify({ plants }));
  const port = await freePort();
  const child = spawnServer(
    ['node', 'node_modules/json-server/lib/cli/bin.js', file, '--port', String(port), '--quiet'],
    pin,
  );
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/plants/1');
  return {
    name: 'json-server 0.17',
    urls: [url],
    token: '',
    readIds: plants.filter((p) => p.owner === 'bench-0').map((p) => p.id),
    paths: {
      'list limit=20': '/plants?owner=bench-0&_limit=20',
      'list limit=1000': '/plants?owner=bench-0&_limit=1000',
    },
    pids: [child.pid!],
    stop: () => stopAll([child]),
  };
}

interface Op {
  name: string;
  method: string;
  path: string;
  body?: unknown;
  ids?: 'read' | 'created' | 'deep';
  records?: boolean;
}

const OPS: Op[] = [
  { name: 'list limit=20', method: 'GET', path: '/plants?limit=20' },
  { name: 'list limit=1000', method: 'GET', path: '/plants?limit=1000' },
  { name: 'read one', method: 'GET', path: '/plants/{id}', ids: 'read' },
  {
    name: 'create',
    method: 'POST',
    path: '/plants',
    body: { name: 'Benchmark fern', tag: 'bench' },
    records: true,
  },
  { name: 'delete', method: 'DELETE', path: '/plants/{id}', ids: 'created' },
  // A random page deep in the caller's list (target.deep: cursors at random positions, each visited
  // once per pass; targets without them, the ceiling, answer this fixed path).
  { name: 'list deep limit=20', method: 'GET', path: '/plants?limit=20&cursor=x', ids: 'deep' },
];
/** The garden scenarios' operations (contract 3.2: a caller in 1 garden and in 20). */
const GARDEN_OPS = ['list limit=20', 'list deep limit=20'];
const NOT_DEEP = OPS.filter((op) => op.ids !== 'deep').map((op) => op.name);

/** One load-generator run, in its own process (asynchronous, so a Ctrl-C is handled at once). */
function load(spec: Record<string, unknown>, pin: boolean): Promise<Result> {
  return runPinned(LOADERS[LOADER]!, [JSON.stringify(spec)], pin, 'load generator');
}

/**
 * Runs every op on every target, ROUNDS times, interleaved, the order of the targets reversed
 * every other round (A B C D, D C B A, …) so a drift of the machine's speed favours no one.
 * Returns every round's result and the medians per target and op.
 */
async function measure(
  targets: Target[],
  pin: boolean,
  tmp: string,
  ops: Op[] = OPS,
): Promise<{ medians: Map<string, Map<string, Result>>; samples: Samples }> {
  const allPids = [...new Set(targets.flatMap((t) => t.pids))];
  // Two callers of one server are two targets with the same processes: those are never stopped.
  const othersOf = (t: Target) => allPids.filter((p) => !t.pids.includes(p));
  // Where each target's next deep-page run starts in its paths: on from where the last one ended.
  const deepAt = new Map<Target, number>();
  const deepFiles = new Map<Target, string>();
  // One run of `op` on `t`. `ids` is the file where a create records the plants it made and from
  // which the delete after it takes them: each deleted once, a fixed amount rather than a duration.
  const specFor = (t: Target, op: Op, duration: number, ids: string): Record<string, unknown> => {
    const spec: Record<string, unknown> = {
      urls: t.urls,
      connections: CONNECTIONS,
      duration,
      method: op.method,
      path: t.paths?.[op.name] ?? op.path,
      body: op.body,
      token: t.token,
    };
    if (op.records) spec.idsOut = ids;
    if (op.ids === 'deep' && t.deep) {
      let file = deepFiles.get(t);
      if (file === undefined) {
        file = join(tmp, `deep-${deepFiles.size}.json`);
        writeFileSync(file, JSON.stringify(t.deep));
        deepFiles.set(t, file);
      }
      spec.path = '{id}';
      spec.idsFile = file;
      spec.rotation = 'all';
      spec.start = deepAt.get(t) ?? 0;
    }
    if (op.ids === 'created') {
      spec.idsFile = ids;
      spec.amount = JSON.parse(readFileSync(ids, 'utf8')).length;
      spec.eachOnce = true;
      delete spec.duration;
    }
    return spec;
  };
  // Warm-up, not counted: a short run of every operation per target (JIT, caches, and a SQLite
  // WAL file grown to its working size, which a fresh process starts without). The delete
  // warm-up deletes exactly what the create warm-up made.
  for (const t of targets) {
    const warmIds = join(tmp, `${t.name}-warm.ids.json`);
    for (const op of ops) {
      if (t.ops && !t.ops.includes(op.name)) continue;
      const spec = specFor(t, op, 1, warmIds);
      if (op.ids === 'read') spec.path = String(spec.path).replace('{id}', String(t.readIds[0]));
      if (spec.amount === 0) continue;
      await waitIdle(allPids);
      const r = await withOthersStopped(othersOf(t), () => load(spec, pin));
      if (spec.start !== undefined) deepAt.set(t, Number(spec.start) + Math.ceil(r.rps * 1) + 1000);
    }
  }
  const samples: Samples = new Map();
  for (let round = 0; round < ROUNDS; round++) {
    for (const op of ops) {
      for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
        if (t.ops && !t.ops.includes(op.name)) continue;
        const idsFile = join(tmp, `${t.name}-${round}.ids.json`);
        const spec = specFor(t, op, DURATION, idsFile);
        if (op.ids === 'read') {
          writeFileSync(idsFile.replace('.ids', '.read'), JSON.stringify(t.readIds));
          spec.idsFile = idsFile.replace('.ids', '.read');
        }
        await waitIdle(allPids);
        const ticks0 = t.pids.reduce((n, p) => n + cpuTicks(p), 0);
        const core0 = coreTimes(1);
        const r: Result =
          spec.amount === 0
            ? { rps: 0, p50: 0, p99: 0, non2xx: 0, errors: 0 }
            : await withOthersStopped(othersOf(t), () => load(spec, pin));
        if (r.rps > 0) {
          // Answers: the load generator's rate over its own run (a fixed amount, for deletes).
          const answers = spec.amount !== undefined ? Number(spec.amount) : r.rps * DURATION;
          r.cpuUs = ((t.pids.reduce((n, p) => n + cpuTicks(p), 0) - ticks0) * TICK_US) / answers;
          r.loaderBusy = coreBusy(core0, coreTimes(1));
        }
        if (spec.start !== undefined) deepAt.set(t, Number(spec.start) + Math.ceil(r.rps * DURATION) + 1000);
        process.stderr.write(
          `round ${round + 1} ${t.name.padEnd(28)} ${op.name.padEnd(16)} ${r.rps.toFixed(0).padStart(7)} req/s  ${(r.cpuUs ?? 0).toFixed(1).padStart(6)} µs/req  loader core ${(100 * (r.loaderBusy ?? 0)).toFixed(0)} %  p99 ${r.p99} ms  non-2xx ${r.non2xx}  (ended ${new Date().toISOString().slice(11, 23)})\n`,
        );
        const byOp = samples.get(t.name) ?? new Map<string, Result[]>();
        byOp.set(op.name, [...(byOp.get(op.name) ?? []), r]);
        samples.set(t.name, byOp);
      }
    }
  }
  const out = new Map<string, Map<string, Result>>();
  for (const [t, byOp] of samples) {
    const m = new Map<string, Result>();
    for (const [op, rs] of byOp) {
      m.set(op, {
        rps: median(rs.map((r) => r.rps)),
        p50: median(rs.map((r) => r.p50)),
        p99: median(rs.map((r) => r.p99)),
        non2xx: rs.reduce((n, r) => n + r.non2xx, 0),
        errors: rs.reduce((n, r) => n + r.errors, 0),
        ...(rs.every((r) => r.cpuUs !== undefined) ? { cpuUs: median(rs.map((r) => r.cpuUs!)) } : {}),
        ...(rs.every((r) => r.loaderBusy !== undefined)
          ? { loaderBusy: median(rs.map((r) => r.loaderBusy!)) }
          : {}),
      });
    }
    out.set(t, m);
  }
  return { medians: out, samples };
}

function table(results: Map<string, Map<string, Result>>): string {
  const lines = [
    '| target | operation | req/s | CPU µs/request | p50 ms | p99 ms | non-2xx |',
    '|---|---|---:|---:|---:|---:|---:|',
  ];
  for (const [t, byOp] of results) {
    // Rounded: a median of an even number of rounds is a mean of two.
    for (const [op, r] of byOp)
      lines.push(
        `| ${t} | ${op} | ${r.rps.toFixed(0)} | ${r.cpuUs === undefined ? '—' : r.cpuUs.toFixed(1)} | ${+r.p50.toFixed(2)} | ${+r.p99.toFixed(2)} | ${r.non2xx} |`,
      );
  }
  return lines.join('\n');
}

/** PostgreSQL's version, or null when it cannot be reached. */
async function pgServerVersion(): Promise<string | null> {
  const c = new pg.Client({ connectionString: opt.pg, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    const r = await c.query('SHOW server_version');
    return String(r.rows[0].server_version).split(' ')[0]!;
  } catch {
    return null;
  } finally {
    await c.end().catch(() => {});
  }
}

const tmp = mkdtempSync(join(tmpdir(), 'plantstore-bench-'));
const cleanups: (() => Promise<void>)[] = [];
/** Stops the servers started so far and drops the PostgreSQL databases made so far. */
async function runCleanups(): Promise<void> {
  for (const c of cleanups.splice(0)) await c().catch(() => {});
}
/** runCleanups(), and the run's files removed. */
async function cleanUp(): Promise<void> {
  await runCleanups();
  rmSync(tmp, { recursive: true, force: true });
}
try {
  const date = new Date().toISOString().slice(0, 10);
  const header =
    `${date}, ${availableParallelism()} cores, Node ${process.version}, ` +
    `${PLANTS} plants over ${USERS} users (caller owns ${PLANTS / USERS}), load generator ${LOADER}, ${CONNECTIONS} connections, ${ROUNDS} rounds × ${DURATION} s, medians (ratios: the median of the per-round ratios)`;
  const gardenHeader =
    `${date}, ${availableParallelism()} cores, Node ${process.version}, ${PLANTS} plants over ${USERS} users; ` +
    `a caller in 1 garden and a caller in ${SHARED_GARDENS} gardens, each seeing ${PLANTS / USERS} plants (every ${USERS}th id); ` +
    `deep pages: limit=20 after random cursors, ${DEEP_PAGES} distinct per caller; load generator ${LOADER}, ${CONNECTIONS} connections, ${ROUNDS} rounds × ${DURATION} s`;
  if (GARDENS_ONLY) {
    // The garden scenarios alone: one server, its caller in 1 garden and its caller in 20, and the
    // ceiling, on first pages and random deep pages.
    const plantstore = await startPlantstore('plantstore', `sqlite:${join(tmp, 'bench.db')}`, 1, PIN);
    cleanups.unshift(plantstore.stop);
    const shared = sharedCaller(plantstore);
    plantstore.ops = GARDEN_OPS;
    const ceiling = await startCeiling(PIN);
    cleanups.unshift(ceiling.stop);
    const ops = OPS.filter((op) => GARDEN_OPS.includes(op.name));
    const { medians: results, samples } = await measure([ceiling, plantstore, shared], PIN, tmp, ops);
    const report = summarizeGardens(results, samples, {
      one: plantstore.name,
      shared: shared.name,
      ceiling: ceiling.name,
    });
    const env = `${gardenHeader}; server pinned to core 0 and load generator to core 1: ${PIN ? 'yes' : 'no (taskset or a second core missing)'}`;
    console.log(`\n${env}\n\n${table(results)}\n\n${report.markdown}`);
    if (WRITE) writeGardensReport(env, table(results), report.markdown);
    if (!report.allMet) process.exitCode = 1;
    await runCleanups();
  }
  if (!opt.scale && !opt.mixed && !GARDENS_ONLY) {
    const big = PLANTS * 10;
    const plantstore = await startPlantstore('plantstore', `sqlite:${join(tmp, 'bench.db')}`, 1, PIN);
    cleanups.unshift(plantstore.stop);
    const shared = sharedCaller(plantstore);
    const large = await startPlantstore(
      `plantstore, ${big / 1e6}M plants`,
      `sqlite:${join(tmp, 'large.db')}`,
      1,
      PIN,
      big,
    );
    cleanups.unshift(large.stop);
    large.ops = NOT_DEEP;
    const ceiling = await startCeiling(PIN);
    cleanups.unshift(ceiling.stop);
    const jsonServer = await startJsonServer(PIN, tmp);
    cleanups.unshift(jsonServer.stop);
    jsonServer.ops = NOT_DEEP;
    // The fast targets next to each other, so the ratios compare neighbouring runs.
    const targets = [ceiling, plantstore, shared, large, jsonServer];
    const { medians: results, samples } = await measure(targets, PIN, tmp);
    const rss = peakRssMb(large.pids[0]!);
    const report = summarize(
      results,
      samples,
      { plantstore: plantstore.name, large: large.name, ceiling: ceiling.name, jsonServer: jsonServer.name },
      rss,
    );
    const gardens = summarizeGardens(results, samples, {
      one: plantstore.name,
      shared: shared.name,
      ceiling: ceiling.name,
    });
    const env = `${header}; server pinned to core 0 and load generator to core 1: ${PIN ? 'yes' : 'no (taskset or a second core missing)'}`;
    console.log(`\n${env}\n\n${table(results)}\n\n${report.markdown}\n\n${gardens.markdown}`);
    if (WRITE) {
      writeReport(
        env,
        table(results),
        report.markdown,
        chart(
          results,
          targets.map((t) => t.name),
        ),
      );
      writeGardensReport(`${gardenHeader}; the same run as above`, '', gardens.markdown);
    }
    if (!report.allMet || !gardens.allMet) process.exitCode = 1;
    // The SQLite servers stop before the PostgreSQL part, so they take nothing from it.
    await runCleanups();
  }
  if (!opt['no-postgres'] && !opt.mixed && !GARDENS_ONLY) {
    const version = await pgServerVersion();
    if (version !== null) {
      // Scale-out: instances are not pinned; they share the machine's cores with PostgreSQL and the load generator.
      const targets: Target[] = [];
      for (const n of [1, 2]) {
        const db = await pgDatabase(opt.pg!, 'plantstore_bench');
        cleanups.push(db.drop);
        const t = await startPlantstore(`postgres, ${n} instance${n > 1 ? 's' : ''}`, db.url, n, false);
        cleanups.unshift(t.stop);
        targets.push(t);
      }
      const { medians: results } = await measure(targets, false, tmp);
      const env = `${header}; PostgreSQL ${version} on the same machine; instances not pinned`;
      console.log(`\n${env}\n\n${table(results)}`);
      if (WRITE) writeScaleReport(env, table(results));
    } else {
      console.log(
        `\nPostgreSQL is not reachable at ${opt.pg}: the PostgreSQL part (1 and 2 instances) was skipped.`,
      );
    }
  }
  if (!opt['no-mixed'] && !opt.scale) {
    // Many users, deep pages and writes mixed in: a script of its own, as it seeds its own stores;
    // it writes its table between docs/benchmarks.md's `mixed` markers. With --only gardens: the
    // mix of reads and writes alone, without and with sharing, side by side (printed only).
    await runCleanups();
    const variants = GARDENS_ONLY
      ? 'sqlite,sharing'
      : opt['no-postgres']
        ? 'sqlite,tmpfs,sharing,endpoints'
        : 'sqlite,tmpfs,sharing,endpoints,postgres';
    const args = ['--import', 'tsx', join(import.meta.dirname, 'mixed.ts'), '--variants', variants];
    if (GARDENS_ONLY) {
      args.push('--mix', 'list:36,deep:24,read:25,create:15', '--rounds', String(ROUNDS));
      args.push('--duration', String(DURATION), '--disk-probe', '0');
    }
    if (WRITE && !GARDENS_ONLY) args.push('--write');
    const mixed = spawnSync(process.execPath, [...args, '--pg', opt.pg!], { stdio: 'inherit' });
    if (mixed.status !== 0) process.exitCode = 1;
  }
} finally {
  await cleanUp();
}
