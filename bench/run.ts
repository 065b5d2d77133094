/**
 * plantstore benchmark: starts `bin/plantstore serve` on a seeded store and drives it with
 * autocannon from a separate process. Rounds are interleaved across targets and medians reported.
 *
 *   npm run bench                          SQLite, plus PostgreSQL when reachable
 *   npm run bench -- --scale               PostgreSQL with 1 and 2 instances (docs/scale-out.md)
 *   options: --rounds N --duration S --plants N --connections N
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { seed } from './seed.js';

const { values: opt } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '5' },
    plants: { type: 'string', default: '100000' },
    connections: { type: 'string', default: '50' },
    scale: { type: 'boolean', default: false },
    pg: {
      type: 'string',
      default: process.env.PLANTSTORE_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    },
  },
});
const ROUNDS = Number(opt.rounds);
const DURATION = Number(opt.duration);
const CONNECTIONS = Number(opt.connections);
const PLANTS = Number(opt.plants);
const PIN = availableParallelism() >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });

async function waitReady(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not become ready`);
}

interface Target {
  name: string;
  urls: string[];
  token: string;
  readIds: number[];
  stop(): Promise<void>;
}

async function startPlantstore(
  name: string,
  database: string,
  instances: number,
  pin: boolean,
): Promise<Target> {
  const s = await seed(database, PLANTS, 10);
  const children: ChildProcess[] = [];
  const urls: string[] = [];
  for (let i = 0; i < instances; i++) {
    const port = await freePort();
    const args = [
      'bin/plantstore',
      'serve',
      '--port',
      String(port),
      '--database',
      database,
      '--log-level',
      'warn',
      '--rate-limit',
      '0',
      '--auth-failure-limit',
      '0',
    ];
    const child = pin
      ? spawn('taskset', ['-c', '0', ...args], { stdio: 'inherit' })
      : spawn(args[0]!, args.slice(1), { stdio: 'inherit' });
    children.push(child);
    urls.push(`http://127.0.0.1:${port}`);
  }
  await Promise.all(urls.map(waitReady));
  return {
    name,
    urls,
    token: s.token,
    readIds: s.callerIds,
    async stop() {
      for (const c of children) c.kill('SIGTERM');
      await Promise.all(
        children.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.once('exit', r)))),
      );
    },
  };
}

interface Op {
  name: string;
  method: string;
  path: string;
  body?: unknown;
  ids?: 'read' | 'created';
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
];

interface Result {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

function load(spec: Record<string, unknown>, pin: boolean): Result {
  const args = ['bench/load.mjs', JSON.stringify(spec)];
  const r = pin
    ? spawnSync('taskset', ['-c', '1', process.execPath, ...args], { encoding: 'utf8' })
    : spawnSync(process.execPath, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`load generator failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Runs every op on every target, ROUNDS times, interleaved; returns medians per target and op. */
function measure(targets: Target[], pin: boolean, tmp: string): Map<string, Map<string, Result>> {
  const samples = new Map<string, Map<string, Result[]>>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const op of OPS) {
      for (const t of targets) {
        const idsFile = join(tmp, `${t.name}-${round}.ids.json`);
        const spec: Record<string, unknown> = {
          urls: t.urls,
          connections: CONNECTIONS,
          duration: DURATION,
          method: op.method,
          path: op.path,
          body: op.body,
          token: t.token,
        };
        if (op.ids === 'read') {
          writeFileSync(idsFile.replace('.ids', '.read'), JSON.stringify(t.readIds));
          spec.idsFile = idsFile.replace('.ids', '.read');
        }
        if (op.records) spec.idsOut = idsFile;
        if (op.ids === 'created') {
          spec.idsFile = idsFile;
          // Each created plant is deleted once: a fixed amount rather than a duration.
          spec.amount = JSON.parse(readFileSync(idsFile, 'utf8')).length;
          delete spec.duration;
        }
        const r = load(spec, pin);
        process.stderr.write(
          `round ${round + 1} ${t.name.padEnd(28)} ${op.name.padEnd(16)} ${r.rps.toFixed(0).padStart(7)} req/s  p99 ${r.p99} ms  non-2xx ${r.non2xx}\n`,
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
      });
    }
    out.set(t, m);
  }
  return out;
}

function table(results: Map<string, Map<string, Result>>): string {
  const lines = [
    '| target | operation | req/s | p50 ms | p99 ms | non-2xx |',
    '|---|---|---:|---:|---:|---:|',
  ];
  for (const [t, byOp] of results) {
    for (const [op, r] of byOp)
      lines.push(`| ${t} | ${op} | ${r.rps.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.non2xx} |`);
  }
  return lines.join('\n');
}

async function pgDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `plantstore_bench_${process.pid}_${Date.now()}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: opt.pg });
    await c.connect();
    await c.query(sql);
    await c.end();
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(opt.pg!);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

const tmp = mkdtempSync(join(tmpdir(), 'plantstore-bench-'));
const cleanups: (() => Promise<void>)[] = [];
try {
  const header =
    `${new Date().toISOString().slice(0, 10)}, ${availableParallelism()} cores, Node ${process.version}, ` +
    `${PLANTS} plants over 10 users (caller owns ${PLANTS / 10}), ${CONNECTIONS} connections, ${ROUNDS} rounds × ${DURATION} s, medians`;
  if (opt.scale) {
    // Scale-out: instances are not pinned; they share the machine's cores with PostgreSQL and the load generator.
    const targets: Target[] = [];
    for (const n of [1, 2]) {
      const db = await pgDatabase();
      cleanups.push(db.drop);
      const t = await startPlantstore(`postgres, ${n} instance${n > 1 ? 's' : ''}`, db.url, n, false);
      cleanups.unshift(t.stop);
      targets.push(t);
    }
    const results = measure(targets, false, tmp);
    console.log(`\n${header}; unpinned\n\n${table(results)}`);
  } else {
    const dbFile = join(tmp, 'bench.db');
    const targets = [await startPlantstore('plantstore (SQLite)', `sqlite:${dbFile}`, 1, PIN)];
    cleanups.unshift(targets[0]!.stop);
    const results = measure(targets, PIN, tmp);
    console.log(`\n${header}; server on core 0, load on core 1: ${PIN}\n\n${table(results)}`);
  }
} finally {
  for (const c of cleanups) await c().catch(() => {});
  rmSync(tmp, { recursive: true, force: true });
}
