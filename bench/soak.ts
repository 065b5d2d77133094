/**
 * Soak: does the server's memory stay flat over a long run at a steady store size?
 *
 *   npm run soak -- … (or npx tsx bench/soak.ts …, with Node 24 first on PATH):
 *   npx tsx bench/soak.ts [--plants 300000] [--minutes 10] [--rate 1500] [--connections 8]
 *                         [--interval 30] [--node PATH]
 *
 * It seeds a store of --plants plants (bench/seed.ts: 10 users, the caller in one garden and a
 * caller in 20 gardens, so the kept garden ids are exercised), starts `bin/plantstore serve` on it
 * (events on, full durability, as served by default) and drives a fixed mix at a fixed rate with
 * autocannon for --minutes: first pages (limit 10–100, some with a tag) and 1,000-plant pages of
 * the 1-garden caller, first and deep pages of the 20-garden caller, reads, PATCHes (If-Match: *),
 * and creates each followed on the same connection by the DELETE of the plant it made — so the
 * store's size stays where it was seeded. Every --interval seconds it samples the server: VmRSS
 * and VmHWM (/proc), and from its /metrics the V8 heap used and external memory (the list cache's
 * pages are Buffers: external). SQLite's page caches are malloc'd outside both: they are in RSS
 * only (better-sqlite3 does not expose sqlite3_db_status).
 * It prints a table and a verdict: the slope of RSS and of heap used over the last half of the
 * run, by least squares, in MB per minute.
 *
 * A soak measures memory, not speed: it drives a fixed, moderate rate (autocannon's overallRate,
 * default 1,500 req/s over 8 connections, well under what the server answers on one core), so it
 * may run WITHOUT the benchmark lock (/tmp/plantstore-bench.lock) beside other work. Its req/s and
 * latencies are printed only to show the rate was held; they are not benchmark figures.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
// @ts-expect-error autocannon ships no types (bench/load.mjs uses it from JavaScript)
import autocannon from 'autocannon';
import { BENCH_SERVE_FLAGS, freePort, waitReady } from './ports.js';
import { deepPages, seed } from './seed.js';

const { values: opt } = parseArgs({
  options: {
    plants: { type: 'string', default: '300000' },
    minutes: { type: 'string', default: '10' },
    rate: { type: 'string', default: '1500' },
    connections: { type: 'string', default: '8' },
    interval: { type: 'string', default: '30' },
    node: { type: 'string', default: process.execPath },
  },
});
const PLANTS = Number(opt.plants);
const SECONDS = Number(opt.minutes) * 60;
const RATE = Number(opt.rate);
const INTERVAL = Number(opt.interval);

const tmp = mkdtempSync(join(tmpdir(), 'plantstore-soak-'));
let server: ChildProcess | undefined;
const stop = async () => {
  if (server && server.exitCode === null && server.signalCode === null) {
    server.kill('SIGTERM');
    await new Promise((r) => server!.once('exit', r));
  }
  rmSync(tmp, { recursive: true, force: true });
};
process.once('SIGINT', () => void stop().then(() => process.exit(130)));

interface Sample {
  at: number;
  rss: number;
  hwm: number;
  heapUsed: number;
  external: number;
  requests: number;
}

const MB = 1024 * 1024;

function procStatus(pid: number): { rss: number; hwm: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+([0-9]+) kB`).exec(s)?.[1] ?? Number.NaN);
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
}

/** One value of a Prometheus text exposition: the first series of `name`. */
function metric(text: string, name: string): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (!(rest.startsWith(' ') || rest.startsWith('{'))) continue;
    return Number(rest.slice(rest.lastIndexOf(' ') + 1));
  }
  return Number.NaN;
}

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

try {
  const database = `sqlite:${join(tmp, 'soak.db')}`;
  process.stderr.write(`seeding ${PLANTS} plants…\n`);
  const s = await seed(database, PLANTS);
  const [deep] = deepPages([s.shared], 20, 5000);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  server = spawn(
    opt.node,
    ['bin/plantstore', 'serve', '--port', String(port), '--database', database, ...BENCH_SERVE_FLAGS],
    { stdio: 'inherit' },
  );
  await waitReady(url, '/readyz');
  const pid = server.pid!;

  const one = { authorization: `Bearer ${s.token}` };
  const shared = { authorization: `Bearer ${s.shared.token}` };
  const json = { ...one, 'content-type': 'application/json' };
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;
  const limit = () => 10 + Math.floor(Math.random() * 91);
  const tagged = () => (Math.random() < 0.5 ? `&tag=tag-${Math.floor(Math.random() * 7)}` : '');
  type Ctx = { created?: number };
  interface Req {
    method: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string;
    setupRequest?: (r: Req, ctx: Ctx) => Req;
    onResponse?: (status: number, body: string, ctx: Ctx, headers?: Record<string, string>) => void;
  }
  // One connection's cycle (autocannon runs each connection through the list in order).
  const requests: Req[] = [
    {
      method: 'GET',
      setupRequest: (r) => ({ ...r, path: `/plants?limit=${limit()}${tagged()}`, headers: one }),
    },
    { method: 'GET', setupRequest: (r) => ({ ...r, path: `/plants/${pick(s.one.ids)}`, headers: one }) },
    { method: 'GET', setupRequest: (r) => ({ ...r, path: pick(deep!), headers: shared }) },
    {
      method: 'POST',
      path: '/plants',
      headers: json,
      body: JSON.stringify({ name: 'Soak fern', tag: 'soak' }),
      onResponse: (status, _body, ctx: Ctx, headers) => {
        const m = status === 201 ? /\/plants\/([0-9]+)$/.exec(String(headers?.location ?? '')) : null;
        ctx.created = m ? Number(m[1]) : undefined;
      },
    },
    { method: 'GET', setupRequest: (r) => ({ ...r, path: `/plants/${pick(s.one.ids)}`, headers: one }) },
    { method: 'GET', setupRequest: (r) => ({ ...r, path: `/plants?limit=20${tagged()}`, headers: shared }) },
    {
      method: 'PATCH',
      setupRequest: (r) => ({
        ...r,
        path: `/plants/${pick(s.one.ids)}`,
        headers: { ...one, 'content-type': 'application/merge-patch+json', 'if-match': '*' },
        body: JSON.stringify({ name: `renamed ${Math.floor(Math.random() * 1e6)}` }),
      }),
    },
    {
      method: 'DELETE',
      // The plant this connection created just before (a 404 when its create failed: counted).
      setupRequest: (r, ctx: Ctx) => ({ ...r, path: `/plants/${ctx.created ?? 0}`, headers: one }),
    },
    { method: 'GET', setupRequest: (r) => ({ ...r, path: `/plants?limit=${limit()}`, headers: one }) },
    { method: 'GET', setupRequest: (r) => ({ ...r, path: '/plants?limit=1000', headers: one }) },
  ];

  let requestsDone = 0;
  const started = Date.now();
  const samples: Sample[] = [];
  const take = async (): Promise<Sample> => {
    const text = await (await fetch(`${url}/metrics`, { headers: { ...one, connection: 'close' } })).text();
    const p = procStatus(pid);
    return {
      at: (Date.now() - started) / 1000,
      ...p,
      heapUsed: metric(text, 'plantstore_nodejs_heap_size_used_bytes') / MB,
      external: metric(text, 'plantstore_nodejs_external_memory_bytes') / MB,
      requests: requestsDone,
    };
  };
  samples.push(await take());
  const timer = setInterval(() => {
    take().then(
      (x) => samples.push(x),
      () => {},
    );
  }, INTERVAL * 1000);
  interface Result {
    requests: { total: number; average: number };
    latency: { p99: number };
    non2xx: number;
    errors: number;
    timeouts: number;
  }
  const result = await new Promise<Result>((resolve, reject) => {
    const inst = autocannon(
      {
        url,
        connections: Number(opt.connections),
        overallRate: RATE,
        duration: SECONDS,
        requests,
      },
      (err: Error | null, r: Result) => (err ? reject(err) : resolve(r)),
    );
    inst.on('response', () => requestsDone++);
  });
  clearInterval(timer);
  samples.push(await take());

  const f = (x: number) => (Number.isNaN(x) ? '–' : x.toFixed(1));
  const lines = [
    `Soak: ${PLANTS} plants (steady: every create is deleted), ${RATE} req/s over ${opt.connections} connections for ${opt.minutes} min, Node ${opt.node === process.execPath ? process.version : opt.node}`,
    '',
    '| t (s) | requests | RSS MB | peak RSS MB | heap used MB | external MB |',
    '|---:|---:|---:|---:|---:|---:|',
    ...samples.map(
      (x) =>
        `| ${x.at.toFixed(0)} | ${x.requests} | ${f(x.rss)} | ${f(x.hwm)} | ${f(x.heapUsed)} | ${f(x.external)} |`,
    ),
  ];
  const half = samples.filter((x) => x.at >= SECONDS / 2);
  const perMin = (ys: number[]) =>
    slope(
      half.map((x) => x.at / 60),
      ys,
    );
  const rssSlope = perMin(half.map((x) => x.rss));
  const heapSlope = perMin(half.map((x) => x.heapUsed));
  const extSlope = perMin(half.map((x) => x.external));
  // Flat: under 0.5 MB a minute over the last half (30 MB an hour at most, and noise is larger).
  const flat = half.length >= 3 && rssSlope < 0.5 && heapSlope < 0.5 && extSlope < 0.5;
  lines.push(
    '',
    `Last half (${half.length} samples), least-squares slope: RSS ${rssSlope.toFixed(2)} MB/min, heap used ${heapSlope.toFixed(2)} MB/min, external ${extSlope.toFixed(2)} MB/min.`,
    `Requests: ${result.requests.total} (${result.requests.average.toFixed(0)} req/s), non-2xx ${result.non2xx}, errors ${result.errors + result.timeouts}, p99 ${result.latency.p99} ms.`,
    `Verdict: ${flat ? 'FLAT — nothing grows over the last half' : half.length < 3 ? 'TOO SHORT to tell (fewer than 3 samples in the last half)' : 'GROWING — a slope over 0.5 MB/min in the last half'}.`,
  );
  console.log(lines.join('\n'));
  if (!flat) process.exitCode = 1;
} finally {
  await stop();
}
