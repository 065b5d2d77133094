import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ENGINES } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';
import { drainsOnSigterm } from './drain.js';
import { cli, type Server, serve } from './process.js';

const PACKAGE = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

for (const engine of ENGINES)
  describe(`bin/plantstore serve on ${engine.name}, spoken to over HTTP`, { skip: engine.skip }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-e2e-'));
    const dbFile = join(dir, 'nested', 'folder', 'plants.db');
    const env = { DATABASE_URL: `sqlite:${dbFile}` };
    let drop = async () => {};
    let server: Server;
    let token: string;

    const api = (path: string, init: RequestInit = {}, t = token) =>
      fetch(`${server.url}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${t}`, ...(init.headers ?? {}) },
      });
    const post = (body: unknown, t = token) =>
      api(
        '/plants',
        { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
        t,
      );

    before(async () => {
      if (engine.name !== 'sqlite') {
        const db = await engine.database();
        // The machine's PostgreSQL trusts local connections: the password is there to be masked.
        env.DATABASE_URL = db.url.replace(/^postgres:\/\/([^:@/]+)@/, 'postgres://$1:Sekr3t@');
        drop = db.drop;
      }
      server = await serve([], env);
      token = (await cli(['token', 'create', '--user', 'e2e'], env)).stdout.trim();
    });
    after(async () => {
      await server?.stop();
      rmSync(dir, { recursive: true, force: true });
      await drop();
    });

    if (engine.name === 'sqlite') {
      it('creates the database file and its folders on first start, it and its -wal and -shm 0600', () => {
        assert.ok(existsSync(dbFile));
        // They hold token hashes and webhook secrets: readable by the service's user only.
        for (const f of [dbFile, `${dbFile}-wal`, `${dbFile}-shm`]) {
          assert.equal((statSync(f).mode & 0o777).toString(8), '600', f);
        }
      });
    }

    it('serves the whole plant lifecycle with a token from the CLI', async () => {
      const created = await post({ name: 'Pothos', tag: 'trailing' });
      assert.equal(created.status, 201);
      assert.deepEqual(await created.json(), { name: 'Pothos', tag: 'trailing' });
      const location = created.headers.get('location')!;
      assert.match(location, /^\/plants\/[0-9]+$/);
      assert.deepEqual(await (await api(location)).json(), { name: 'Pothos', tag: 'trailing' });
      assert.deepEqual(await (await api('/plants?tag=trailing')).json(), [
        { name: 'Pothos', tag: 'trailing' },
      ]);
      const del = await api(location, { method: 'DELETE' });
      assert.equal(del.status, 204);
      assert.equal(await del.text(), '');
      assert.equal((await api(location)).status, 404);
    });

    it('a token revoked from the CLI stops working within 5 seconds', async () => {
      const created = JSON.parse((await cli(['token', 'create', '--user', 'revokee', '--json'], env)).stdout);
      assert.equal((await api('/plants', {}, created.token)).status, 200);
      assert.equal((await cli(['token', 'revoke', created.id], env)).code, 0);
      await until(
        'the revoked token to be refused with 401 (it was still accepted 5 s after revocation)',
        async () => (await api('/plants', {}, created.token)).status === 401,
        5_000,
      );
    });

    it('headers over 16 KiB are refused with 431', async () => {
      const status = await new Promise<number>((resolve, reject) => {
        const req = httpRequest(
          `${server.url}/plants`,
          { headers: { 'x-big': 'a'.repeat(17 * 1024) } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end();
      });
      assert.equal(status, 431);
    });

    it('logs JSON lines that carry the request id and never the token', async () => {
      await api('/plants', { headers: { 'x-request-id': 'log-check-1' } });
      // The answer can reach the test before the server's line about it does.
      await until('the "request completed" line of request log-check-1', () =>
        server.logs.some((l) => l.includes('log-check-1') && l.includes('request completed')),
      );
      const mine = server.logs.filter((l) => l.includes('log-check-1'));
      assert.ok(mine.length >= 2, 'incoming and completed lines');
      for (const line of mine) assert.equal(JSON.parse(line).requestId, 'log-check-1');
      for (const line of server.logs) {
        assert.ok(!line.includes(token), 'a token reached the logs');
        JSON.parse(line);
      }
    });

    it('SIGTERM drains: /readyz 503 at once, new requests 503 with Retry-After and Connection: close, the live stream ends, the request in flight finishes, exit 0 within 10 s', async () => {
      await drainsOnSigterm(server, token);
      await server.stop();
      server = await serve([], env);
    });

    it('the effective configuration is logged once at start, one JSON line, the database password masked', () => {
      const lines = server.logs.filter((l) => l.includes('"effective configuration"'));
      assert.equal(lines.length, 1);
      const { version, config } = JSON.parse(lines[0]!);
      assert.equal(version, PACKAGE.version);
      assert.equal(config.port, 0);
      assert.equal(config.database, env.DATABASE_URL.replace(/^(postgres:\/\/[^:@/]+):[^@]*@/, '$1:***@'));
      assert.ok(!server.logs.some((l) => l.includes('Sekr3t')), 'the password reached the logs');
    });

    it('SIGTERM finishes in-flight requests, exits 0, and what was acknowledged is kept', async () => {
      const created = await post({ name: 'Survivor' });
      assert.equal(created.status, 201);
      // Requests the server had not yet received when it stopped fail to connect; that is fine.
      const inflight = Array.from({ length: 20 }, (_, i) =>
        api('/plants', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-request-id': `sigterm-late-${i}` },
          body: JSON.stringify({ name: `late-${i}` }),
        }).then(
          (r) => r.status,
          () => 0,
        ),
      );
      // Stop once the server has taken some of them in: those it logged are in flight (or done).
      const received = () =>
        server.logs
          .filter((l) => l.includes('incoming request'))
          .map((l) => /"requestId":"sigterm-late-([0-9]+)"/.exec(l)?.[1])
          .filter((i) => i !== undefined)
          .map(Number);
      const takenIn = await until('the server to log one of the late creates as incoming', () => {
        const r = received();
        return r.length > 0 ? r : undefined;
      });
      const code = await server.stop('SIGTERM');
      assert.equal(code, 0);
      const statuses = await Promise.all(inflight);
      for (const i of takenIn)
        assert.equal(statuses[i], 201, `late-${i}, received before SIGTERM, was not finished`);
      const acknowledged = statuses.filter((s) => s === 201).length;

      server = await serve([], env);
      const names = ((await (await api('/plants?limit=1000')).json()) as { name: string }[]).map(
        (p) => p.name,
      );
      assert.ok(names.includes('Survivor'));
      assert.equal(
        names.filter((n) => n.startsWith('late-')).length >= acknowledged,
        true,
        'an acknowledged create was lost',
      );
    });
  });
