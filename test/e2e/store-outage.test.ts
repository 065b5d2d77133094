import assert from 'node:assert/strict';
import { connect, createServer, type Server as NetServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { ENGINES } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';
import { cli, type Server, serve } from './process.js';

const postgres = ENGINES.find((e) => e.name === 'postgres')!;

/** A TCP proxy in front of PostgreSQL that the test can cut and restore. */
class CuttableProxy {
  private server: NetServer | null = null;
  private readonly sockets = new Set<Socket>();
  port = 0;
  constructor(private readonly target: { host: string; port: number }) {}

  async open(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = connect(this.target);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  async cut(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server?.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
    this.server = null;
  }
}

describe('a PostgreSQL that goes away and comes back', { skip: postgres.skip }, () => {
  let drop = async () => {};
  let directUrl = '';
  let proxy: CuttableProxy;
  let server: Server;
  let token: string;
  const POOL = 4;

  const get = (path: string) =>
    fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  const post = (name: string) =>
    fetch(`${server.url}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    });
  const serverConnections = async () => {
    const c = new pg.Client({ connectionString: directUrl });
    await c.connect();
    const dbName = new URL(directUrl).pathname.slice(1);
    const r = await c.query(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [dbName],
    );
    await c.end();
    return r.rows[0].n as number;
  };

  before(async () => {
    const db = await postgres.database();
    directUrl = db.url;
    drop = db.drop;
    const target = new URL(db.url);
    proxy = new CuttableProxy({ host: target.hostname, port: Number(target.port || 5432) });
    await proxy.open();
    const viaProxy = new URL(db.url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    server = await serve(['--pool-size', String(POOL)], { DATABASE_URL: viaProxy.toString() });
    token = (await cli(['token', 'create', '--user', 'outage'], { DATABASE_URL: db.url })).stdout.trim();
  });
  after(async () => {
    await server?.stop();
    await proxy?.cut().catch(() => {});
    await drop();
  });

  it('serves, answers 503 while the store is gone, and recovers by itself', async () => {
    assert.equal((await post('before')).status, 201);
    assert.equal((await get('/plants')).status, 200);

    await proxy.cut();
    const during = await Promise.all([
      ...Array.from({ length: 20 }, () => get('/plants')),
      ...Array.from({ length: 10 }, (_, i) => post(`during-${i}`)),
    ]);
    for (const res of during) {
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '1');
      assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
      const body = (await res.json()) as { error: number; code: string; message: string };
      assert.equal(body.error, 503);
      assert.equal(body.code, 'store_unavailable');
      assert.doesNotMatch(body.message, /ECONNREFUSED|127\.0\.0\.1|pg|postgres/i);
    }
    assert.equal((await fetch(`${server.url}/readyz`)).status, 503);
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200, 'the process stays up');

    await proxy.open();
    await until(
      '/readyz to answer 200 again once the store is back (did not recover within 15 s)',
      async () => (await fetch(`${server.url}/readyz`)).status === 200,
      15_000,
    );
    assert.equal((await post('after')).status, 201);
    const names = ((await (await get('/plants')).json()) as { name: string }[]).map((p) => p.name);
    assert.deepEqual(names, ['before', 'after'], 'nothing answered 503 was stored');

    await Promise.all(Array.from({ length: 30 }, () => get('/plants')));
    assert.ok((await serverConnections()) <= POOL, 'more connections than the pool allows');
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const open = Number(/plantstore_store_pool_connections\{state="open"\} ([0-9]+)/.exec(metrics)?.[1]);
    const waiting = Number(
      /plantstore_store_pool_connections\{state="waiting"\} ([0-9]+)/.exec(metrics)?.[1],
    );
    assert.ok(open >= 1 && open <= POOL, `pool reports ${open} open`);
    assert.equal(waiting, 0);
  });
});
