/**
 * The floor under a PostgreSQL-backed GET at 20 connections on this machine: what any service
 * answering from PostgreSQL pays before its own work, measured as bench/changes.ts measures the
 * change feed (server on core 0, wrk on core 1, PostgreSQL's backends wherever the kernel puts
 * them, 20 connections for S seconds). Each variant is a server of a few lines, not plantstore:
 *   - `http`: node:http answering a fixed 43-byte JSON body, no database;
 *   - `http+pg`: node:http, one prepared `SELECT 1` through a pg.Pool of 3 connections (the change
 *     feed's pool size at the default DATABASE_POOL_SIZE) a request, then the same body;
 *   - `fastify+pg`: the same through Fastify (plantstore's framework, no plugins or hooks).
 * An empty delta (bench/changes.ts) is one statement a request too: its req/s, p50 and p99 can be
 * no better than `fastify+pg`'s. Prints req/s, p50 / p99 ms and CPU µs a request of the server and
 * of PostgreSQL's processes (run nothing else on PostgreSQL meanwhile), each variant ROUNDS times
 * (default 3), interleaved.
 *
 *   npx tsx bench/pg-floor.ts [seconds=10] [variants=http,http+pg,fastify+pg]
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { BENCH_PG, freePort, waitReady } from './ports.js';
import { spawnServer, stopAll } from './procs.js';
import { drive } from './serve-load.js';

const BODY = '{"changes":[],"next":"cursor","more":false}';

if (process.argv[2] === '--serve') {
  // The server: argv[3] the variant, argv[4] the port.
  const [variant, port] = [process.argv[3]!, Number(process.argv[4])];
  const pool = new pg.Pool({ connectionString: BENCH_PG, max: 3 });
  const one = async () => (await pool.query({ name: 'floor', text: 'SELECT 1 AS one' })).rows[0].one;
  if (variant === 'fastify+pg') {
    const { default: Fastify } = await import('fastify');
    const app = Fastify();
    app.get('/floor', async (_req, reply) => {
      if ((await one()) !== 1) throw new Error('SELECT 1 answered otherwise');
      reply.type('application/json; charset=utf-8');
      return BODY;
    });
    await app.listen({ port, host: '127.0.0.1' });
  } else {
    const withPg = variant === 'http+pg';
    createServer((_req, res) => {
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
        res.end(BODY);
      };
      if (!withPg) return answer();
      one().then(answer, (err) => {
        res.writeHead(500);
        res.end(String(err));
      });
    }).listen(port, '127.0.0.1');
  }
} else {
  const seconds = Number(process.argv[2] ?? 10);
  const variants = (process.argv[3] ?? 'http,http+pg,fastify+pg').split(',');
  const rounds = Number(process.env.ROUNDS ?? 3);
  const pin = availableParallelism() >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;
  if (pin) spawnSync('taskset', ['-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
  const dir = mkdtempSync(join(tmpdir(), 'pg-floor-'));
  const results: unknown[] = [];
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const variant of variants) {
        const port = await freePort();
        const url = `http://127.0.0.1:${port}`;
        const server = spawnServer(
          [process.execPath, '--import', 'tsx', import.meta.filename, '--serve', variant, String(port)],
          pin,
        );
        try {
          await waitReady(url, '/floor');
          const target = { pid: server.pid!, url, token: 'unused', dir, pin, connections: 20, seconds };
          await drive({ ...target, seconds: 2 }, 'warm-up', ['/floor']);
          const r = { round, variant, ...(await drive(target, variant, ['/floor'])) };
          console.error(JSON.stringify(r));
          results.push(r);
        } finally {
          await stopAll([server]);
        }
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(JSON.stringify({ connections: 20, seconds, pinned: pin, results }, null, 1));
}
