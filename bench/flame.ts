/**
 * Where one request's CPU goes: flame graphs of the hottest paths (a first page of a list, a deep
 * page, reading one plant, creating one), each from the CPU profile (`node --cpu-prof`) of a plantstore
 * under load of that request alone.
 *
 *   npm run bench -- --flame [--engine sqlite|postgres] [--duration 8] [--plants 100000]
 *                            [--connections 50] [--out DIR] [--pg URL]
 *
 * One server (pinned to core 0, as bench/run.ts pins it; wrk on core 1) on a seeded store (SQLite
 * on a tmpfs, /dev/shm, so what is drawn is the code's and not the disk's; or a PostgreSQL database
 * of its own), profiled with every thread (the event loop's and, on SQLite, the writer's) at a
 * 250 µs interval. Each path gets a warm-up and then `--duration` seconds of load; its picture
 * holds the samples of that window only, idle left out, and `DIR/ENGINE-PATH.svg` (DIR: docs/flame)
 * is written, with the CPU µs per request the profile saw and the hottest functions printed beside
 * it. Profiling costs CPU itself: the µs here are the profiled server's, not the benchmark's figures.
 * V8 weighs each sample by the time since the last one, so a thread waiting for the core (the
 * SQLite writer thread shares it with the event loop) is counted in whatever it was running:
 * a create's `postMessage` to the writer is as wide as the commit that ran meanwhile.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { addProfile, type CpuProfile, flameSvg, hottest, newRoot } from './flame-svg.js';
import { BENCH_PG, benchServe, freePort, pgDatabase, runPinned, waitReady } from './ports.js';
import { deepPages, seed } from './seed.js';

const { values: opt } = parseArgs({
  options: {
    engine: { type: 'string', default: 'sqlite' },
    duration: { type: 'string', default: '8' },
    plants: { type: 'string', default: '100000' },
    connections: { type: 'string', default: '50' },
    out: { type: 'string', default: 'docs/flame' },
    tmpfs: { type: 'string', default: '/dev/shm' },
    pg: { type: 'string', default: BENCH_PG },
  },
});
if (opt.engine !== 'sqlite' && opt.engine !== 'postgres')
  throw new Error('--engine must be sqlite or postgres');
const ROOT = resolve(import.meta.dirname, '..');
const DURATION = Number(opt.duration);
const work = mkdtempSync(join(opt.engine === 'sqlite' ? opt.tmpfs! : '/tmp', 'plantstore-flame-'));
const profiles = join(work, 'profiles');
let pgDrop = async () => {};
let server: ChildProcess | undefined;
process.on('exit', () => {
  server?.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

let database: string;
if (opt.engine === 'sqlite') database = `sqlite:${join(work, 'plants.db')}`;
else {
  const db = await pgDatabase(opt.pg!, 'plantstore_flame');
  database = db.url;
  pgDrop = db.drop;
}
try {
  const seeded = await seed(database, Number(opt.plants));
  const port = await freePort();
  // PostgreSQL's server is not pinned (bench/run.ts runs it so): it shares both cores with the
  // backends. SQLite's is alone on core 0.
  const pin = opt.engine === 'sqlite' ? ['taskset', '-c', '0'] : [];
  const [cmd, ...args] = [
    ...pin,
    process.execPath,
    '--cpu-prof',
    `--cpu-prof-dir=${profiles}`,
    '--cpu-prof-interval=250',
    ...benchServe(ROOT, port, database),
  ];
  server = spawn(cmd!, args, { stdio: 'inherit' });
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/readyz');
  const readIds = join(work, 'read.json');
  writeFileSync(readIds, JSON.stringify(seeded.callerIds));
  // Deep pages at random places in the caller's list, each visited once (bench/run.ts's).
  const deepFile = join(work, 'deep.json');
  writeFileSync(deepFile, JSON.stringify(deepPages([seeded.one], 20, 80_000)[0]));
  const paths = [
    {
      name: 'list',
      title: 'a first page of 20 (GET /plants?limit=20)',
      method: 'GET',
      path: '/plants?limit=20',
    },
    {
      name: 'read',
      title: 'one plant (GET /plants/{id})',
      method: 'GET',
      path: '/plants/{id}',
      idsFile: readIds,
    },
    {
      name: 'deep',
      title: 'a deep page of 20 (GET /plants?limit=20&cursor=…)',
      method: 'GET',
      path: '{id}',
      idsFile: deepFile,
      rotation: 'all',
    },
    {
      name: 'create',
      title: 'a create (POST /plants)',
      method: 'POST',
      path: '/plants',
      body: { name: 'Benchmark fern', tag: 'bench' },
    },
  ];
  const windows: { from: number; to: number; answers: number }[] = [];
  const now = () => Number(process.hrtime.bigint() / 1000n);
  for (const p of paths) {
    const spec = { urls: [url], connections: Number(opt.connections), token: seeded.token, ...p };
    await runPinned('bench/wrk.mjs', [JSON.stringify({ ...spec, duration: 2 })], true, 'warm-up');
    const from = now();
    const r = await runPinned<{ rps: number; non2xx: number }>(
      'bench/wrk.mjs',
      [JSON.stringify({ ...spec, duration: DURATION })],
      true,
      'load generator',
    );
    const to = now();
    if (r.non2xx > 0) throw new Error(`${p.name}: ${r.non2xx} answers were not 2xx`);
    windows.push({ from, to, answers: r.rps * DURATION });
    console.error(`${p.name}: ${r.rps.toFixed(0)} req/s under the profiler`);
  }
  // The profiles are written as the process exits.
  const exited = new Promise((r) => server!.once('exit', r));
  server.kill('SIGTERM');
  await exited;
  server = undefined;
  const threads = readdirSync(profiles)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => {
      const profile = JSON.parse(readFileSync(join(profiles, f), 'utf8')) as CpuProfile;
      // CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile: thread 0 is the event loop's.
      const thread = Number(f.split('.')[4]);
      const urls = profile.nodes.map((n) => n.callFrame.url);
      const label =
        thread === 0
          ? 'event loop (main thread)'
          : urls.some((u) => u.includes('writer-thread'))
            ? 'SQLite writer thread'
            : `worker thread ${thread}`;
      return { label, profile };
    });
  mkdirSync(resolve(opt.out!), { recursive: true });
  paths.forEach((p, i) => {
    const w = windows[i]!;
    const root = newRoot(`all threads, ${opt.engine}`);
    let us = 0;
    for (const t of threads) {
      const sub = newRoot(t.label);
      const added = addProfile(sub, t.profile, w.from, w.to);
      if (added === 0) continue;
      root.children.set(t.label, sub);
      root.us += added;
      us += added;
    }
    const perRequest = us / w.answers;
    const file = resolve(opt.out!, `${opt.engine}-${p.name}.svg`);
    const note = `${new Date().toISOString().slice(0, 10)}: ${(w.answers / DURATION).toFixed(0)} req/s under the profiler at ${opt.connections} connections for ${DURATION} s; the profiled CPU is ${perRequest.toFixed(1)} µs a request (idle left out; profiling itself adds to it). npm run bench -- --flame --engine ${opt.engine}`;
    writeFileSync(file, flameSvg(root, `plantstore on ${opt.engine}: ${p.title}`, note));
    console.log(
      `\n${p.name} (${opt.engine}): ${perRequest.toFixed(1)} µs a request in the profile → ${file}`,
    );
    for (const h of hottest(root, 12))
      console.log(`  ${(100 * h.share).toFixed(1).padStart(5)} %  ${h.name}`);
  });
} finally {
  server?.kill('SIGKILL');
  await pgDrop();
}
