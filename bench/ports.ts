import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';

/** A TCP port free on 127.0.0.1 right now, for a server the benchmark starts. */
export const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });

/** Resolves once GET `url``path` answers 2xx; throws after 30 s. */
export async function waitReady(url: string, path: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${url}${path}`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not become ready`);
}

/** `serve` flags every benchmarked plantstore gets: quiet logs, no rate limits in the way. */
export const BENCH_SERVE_FLAGS = ['--log-level', 'warn', '--rate-limit', '0', '--auth-failure-limit', '0'];

/** `<tree>/bin/plantstore serve` on `port` and `database`, with BENCH_SERVE_FLAGS: a command line. */
export const benchServe = (tree: string, port: number, database: string): string[] => [
  join(tree, 'bin/plantstore'),
  'serve',
  '--port',
  String(port),
  '--database',
  database,
  ...BENCH_SERVE_FLAGS,
];

/**
 * Runs a Node script of the benchmark in a process of its own — on core 1 when `pin`, the core the
 * load generator has — and resolves with the JSON of the last line it printed; rejects naming
 * `what` with its stderr when it fails. Asynchronous, so that a Ctrl-C is handled at once.
 */
export function runPinned<T>(script: string, args: string[], pin: boolean, what: string): Promise<T> {
  const all = [script, ...args];
  const [cmd, ...rest] = pin ? ['taskset', '-c', '1', process.execPath, ...all] : [process.execPath, ...all];
  return new Promise((resolve, reject) => {
    const child = spawn(cmd!, rest, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`${what} failed: ${err}`));
      else resolve(JSON.parse(out.trim().split('\n').pop()!));
    });
  });
}

/**
 * A PostgreSQL database of the benchmark's own, made through `adminUrl` (a database of the same
 * server), named `prefix` and something unique; its URL, and how to drop it.
 */
export async function pgDatabase(
  adminUrl: string,
  prefix: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${process.pid}_${Date.now()}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/** The PostgreSQL server the benchmarks make their databases on (--pg overrides it). */
export const BENCH_PG = process.env.PLANTSTORE_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/postgres';
