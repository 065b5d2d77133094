/**
 * How many statements and round trips to PostgreSQL one request costs, per kind of request, as the
 * wire shows them: plantstore talks to PostgreSQL through a proxy of this script's own that reads
 * the frontend messages of the protocol (v3) on every connection and counts them.
 *
 *   npm run bench -- --pg-statements [--plants 100000] [--requests 400] [--connections 50] [--pg URL]
 *                                    [--texts] [--write]
 *
 * - a statement is an Execute ('E') or a simple Query ('Q') message;
 * - a round trip is a Sync ('S') or a simple Query: each is answered by a ReadyForQuery that the
 *   client waits for (node-postgres sends the next only then);
 * - Parse ('P') messages are counted apart: a prepared statement is parsed once per connection, so
 *   after the warm-up a request should send none.
 *
 * Each kind runs first one request at a time (what a request costs alone), then `--connections` at
 * once (what it costs when the turn's requests share statements: the store batches reads of a kind
 * and creates into one statement). What runs when nothing is asked (the safety polls) is counted
 * over an idle second, and subtracted over each run's length; what a write sets off (its NOTIFY,
 * the webhook dispatcher's claims) counts as the write's.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BENCH_PG, BENCH_SERVE_FLAGS, freePort, pgDatabase, waitReady } from './ports.js';
import { printed, writeSection } from './report.js';
import { deepPages, seed } from './seed.js';

const { say, lines: report } = printed();
const { values: opt } = parseArgs({
  options: {
    plants: { type: 'string', default: '100000' },
    requests: { type: 'string', default: '400' },
    connections: { type: 'string', default: '50' },
    pg: { type: 'string', default: BENCH_PG },
    texts: { type: 'boolean', default: false },
    write: { type: 'boolean', default: false },
  },
});
const ROOT = resolve(import.meta.dirname, '..');
const REQUESTS = Number(opt.requests);
const CONNECTIONS = Number(opt.connections);

interface Counts {
  statements: number;
  roundTrips: number;
  parses: number;
}

// With --texts: how often each statement's text was sent (Parse or Query), printed at the end.
const parsed = new Map<string, number>();
process.on('exit', () => {
  if (!opt.texts) return;
  console.error('statements parsed (Parse or Query messages), most often first:');
  for (const [t, n] of [...parsed].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.error(n, t);
});
/** A TCP proxy to `target` that counts the frontend messages every connection sends. */
function countingProxy(target: { host: string; port: number }): Promise<{
  port: number;
  counts: Counts;
  close(): void;
}> {
  const counts: Counts = { statements: 0, roundTrips: 0, parses: 0 };
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    sockets.add(client).add(upstream);
    let started = false;
    let buf = Buffer.alloc(0);
    client.on('data', (chunk) => {
      upstream.write(chunk);
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      for (;;) {
        // The startup packet (and an SSL request before it) has no type byte: length, then code.
        if (!started) {
          if (buf.length < 8) break;
          const len = buf.readInt32BE(0);
          if (buf.length < len) break;
          const code = buf.readInt32BE(4);
          if (code !== 80877103 && code !== 80877104) started = true; // not an SSL/GSS request
          buf = buf.subarray(len);
          continue;
        }
        if (buf.length < 5) break;
        const len = buf.readInt32BE(1);
        if (buf.length < 1 + len) break;
        const type = String.fromCharCode(buf[0]!);
        if (type === 'E') counts.statements++;
        if (type === 'Q') {
          counts.statements++;
          counts.roundTrips++;
        }
        if (type === 'S') counts.roundTrips++;
        if (type === 'P') counts.parses++;
        if (opt.texts && (type === 'P' || type === 'Q')) {
          const text = buf
            .subarray(5, 1 + len)
            .toString()
            .replace(/\s+/g, ' ')
            .slice(0, 140);
          parsed.set(text, (parsed.get(text) ?? 0) + 1);
        }
        buf = buf.subarray(1 + len);
      }
    });
    upstream.on('data', (chunk) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  return new Promise((resolveProxy) =>
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      resolveProxy({
        port,
        counts,
        close: () => {
          for (const s of sockets) s.destroy();
          server.close();
        },
      });
    }),
  );
}

const db = await pgDatabase(opt.pg!, 'plantstore_statements');
let server: ChildProcess | undefined;
let proxy: Awaited<ReturnType<typeof countingProxy>> | undefined;
try {
  const seeded = await seed(db.url, Number(opt.plants));
  const pgUrl = new URL(db.url);
  proxy = await countingProxy({ host: pgUrl.hostname, port: Number(pgUrl.port || 5432) });
  const viaProxy = new URL(db.url);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(proxy.port);
  const port = await freePort();
  server = spawn(
    process.execPath,
    [
      join(ROOT, 'bin/plantstore'),
      'serve',
      '--port',
      String(port),
      '--database',
      viaProxy.toString(),
      ...BENCH_SERVE_FLAGS,
    ],
    { stdio: 'inherit' },
  );
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base, '/readyz');
  const auth = { authorization: `Bearer ${seeded.token}` };
  const deep = deepPages([seeded.one], 20, 4 * REQUESTS + 2 * CONNECTIONS)[0]!;
  let nextDeep = 0;
  let nextRead = 0;
  const created: number[] = [];
  const kinds: { name: string; send(): Promise<Response> }[] = [
    { name: 'list, first page of 20', send: () => fetch(`${base}/plants?limit=20`, { headers: auth }) },
    {
      name: 'list, deep page of 20',
      send: () => fetch(`${base}${deep[nextDeep++ % deep.length]}`, { headers: auth }),
    },
    {
      name: 'read one',
      send: () =>
        fetch(`${base}/plants/${seeded.callerIds[nextRead++ % seeded.callerIds.length]}`, { headers: auth }),
    },
    {
      name: 'create',
      send: async () => {
        const res = await fetch(`${base}/plants`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'Counted fern', tag: 'bench' }),
        });
        // The new plant's id is in Location (/plants/{id}); the body is the plant as the interface shows it.
        if (res.status === 201) created.push(Number(res.headers.get('location')!.split('/').pop()));
        return res;
      },
    },
    {
      name: 'delete',
      send: () => {
        const id = created.pop();
        if (id === undefined) throw new Error('no plant left to delete');
        return fetch(`${base}/plants/${id}`, { method: 'DELETE', headers: auth });
      },
    },
  ];
  const snapshot = (): Counts => ({ ...proxy!.counts });
  const since = (a: Counts): Counts => ({
    statements: proxy!.counts.statements - a.statements,
    roundTrips: proxy!.counts.roundTrips - a.roundTrips,
    parses: proxy!.counts.parses - a.parses,
  });
  // `n` requests of a kind, `at` at a time; every answer must be a 2xx.
  const run = async (
    kind: (typeof kinds)[number],
    n: number,
    at: number,
  ): Promise<Counts & { ms: number }> => {
    const t0 = performance.now();
    const before = snapshot();
    let left = n;
    await Promise.all(
      Array.from({ length: at }, async () => {
        while (left > 0) {
          left--;
          const res = await kind.send();
          const body = await res.text();
          if (res.status >= 300) throw new Error(`${kind.name}: ${res.status} ${body}`);
        }
      }),
    );
    return { ...since(before), ms: performance.now() - t0 };
  };
  // Warm-up: every kind at both concurrencies (prepared statements parsed on every connection).
  for (const kind of kinds) {
    await run(kind, 50, 1);
    await run(kind, 2 * CONNECTIONS, CONNECTIONS);
  }
  // The background: an idle second.
  const idle0 = snapshot();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, 1000));
  const idle = since(idle0);
  const idleMs = performance.now() - t0;
  const perMs = (c: number) => c / idleMs;
  say(
    `${new Date().toISOString().slice(0, 10)}, ${Number(opt.plants).toLocaleString('en')} plants, one instance; per request, as counted on the wire (${REQUESTS} requests of each kind; the background's ${(idle.statements * (1000 / idleMs)).toFixed(1)} statements/s subtracted):\n`,
  );
  say(
    '| request | statements, alone | round trips, alone | statements, at 50 at once | round trips, at 50 at once | parses after the warm-up |',
  );
  say('|---|---:|---:|---:|---:|---:|');
  for (const kind of kinds) {
    if (kind.name === 'create') created.length = 0;
    const alone = await run(kind, REQUESTS, 1);
    const many = await run(kind, REQUESTS, CONNECTIONS);
    const net = (c: Counts & { ms: number }, k: keyof Counts) =>
      ((c[k] - perMs(idle[k]) * c.ms) / REQUESTS).toFixed(2);
    say(
      `| ${kind.name} | ${net(alone, 'statements')} | ${net(alone, 'roundTrips')} | ${net(many, 'statements')} | ${net(many, 'roundTrips')} | ${alone.parses + many.parses} |`,
    );
    if (kind.name === 'create' && created.length < 2 * REQUESTS)
      throw new Error(`only ${created.length} creates to delete`);
  }
  say('');
  if (opt.write) writeSection(join(ROOT, 'docs/scale-out.md'), 'pg-statements', report.join('\n'));
} finally {
  server?.kill('SIGTERM');
  if (server && server.exitCode === null) await new Promise((r) => server!.once('exit', r));
  proxy?.close();
  await db.drop();
}
