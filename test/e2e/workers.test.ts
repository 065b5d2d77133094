import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ENGINES } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';
import { drainsOnSigterm } from './drain.js';
import { cli, type Server, serve } from './process.js';

for (const engine of ENGINES) {
  describe(`serve --workers 2 on ${engine.name}`, { skip: engine.skip }, () => {
    const env = { DATABASE_URL: '' };
    let drop = async () => {};
    let server: Server;
    let token: string;

    before(async () => {
      const db = await engine.database();
      env.DATABASE_URL = db.url;
      drop = db.drop;
      server = await serve(['--workers', '2'], env);
      token = (await cli(['token', 'create', '--user', 'workers'], env)).stdout.trim();
    });
    after(async () => {
      await server?.stop();
      await drop();
    });

    it('two processes serve one port and see the same store', async () => {
      // serve() is ready once one worker answers /readyz; the primary hands connections only to the
      // workers listening by then, so the creates wait for the second worker's listen.
      await until('both workers to listen', () => {
        const listening = server.logs
          .map((l) => JSON.parse(l) as { pid: number; msg: string })
          .filter((l) => l.msg.startsWith('Server listening'));
        return new Set(listening.map((l) => l.pid)).size === 2;
      });
      const creates = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          fetch(`${server.url}/plants`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${token}`,
              'content-type': 'application/json',
              connection: 'close',
            },
            body: JSON.stringify({ name: `w${i}` }),
          }),
        ),
      );
      assert.ok(creates.every((r) => r.status === 201));
      const list = await fetch(`${server.url}/plants?limit=1000`, {
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(((await list.json()) as unknown[]).length, 40);
      // The answers can reach the test before the workers' lines about them do: 40 creates and a list.
      const completed = () =>
        server.logs
          .map((l) => JSON.parse(l) as { pid: number; msg: string })
          .filter((l) => l.msg === 'request completed');
      await until('a "request completed" line for each of the 41 requests', () => completed().length >= 41);
      const servedBy = new Set(completed().map((l) => l.pid));
      assert.equal(servedBy.size, 2, 'requests were served by both workers');
    });

    it('one scrape of /metrics counts the requests every worker served', async () => {
      // The 40 creates above went to both workers; each scrape, on a connection of its own and so
      // to either worker, must count all of them.
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${server.url}/metrics`, { headers: { connection: 'close' } });
        assert.equal(res.status, 200);
        const text = await res.text();
        const created =
          /^plantstore_http_requests_total\{method="POST",route="\/plants",status="201"\} (\d+)$/m.exec(text);
        assert.equal(created?.[1], '40', `scrape ${i + 1} counts the 40 creates of both workers`);
        const timed =
          /^plantstore_http_request_duration_seconds_count\{method="POST",route="\/plants",status="201"\} (\d+)$/m.exec(
            text,
          );
        assert.equal(timed?.[1], '40', `scrape ${i + 1} times the 40 creates of both workers`);
      }
    });

    it('the effective configuration is logged once, by the primary', () => {
      assert.equal(server.logs.filter((l) => l.includes('"effective configuration"')).length, 1);
    });

    it('SIGTERM drains every worker (a request in flight finishes, new ones 503 with Retry-After) and the primary exits 0 within 10 s', async () => {
      await drainsOnSigterm(server, token);
      await server.stop();
      const stopped = server.logs.filter((l) => l.includes('shut down cleanly')).length;
      assert.equal(stopped, 2);
    });
  });
}
