// Contract 3.2: hostile garden ids. Traversal, overlong, encoded or empty garden ids are 404 on
// every garden path, as a garden that does not exist, through app.inject and over a socket (dot
// segments exactly as sent), and nothing changes; on every engine.
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { errorBody, type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import {
  createGarden,
  enc,
  getGarden,
  JSON_TYPE,
  listGardens,
  type Member,
  MISSING_GID,
  members,
  plantIn,
} from '../helpers/gardens.js';

const T = { timeout: 30_000 };

/** A request over a socket with the path exactly as given (no dot-segment resolution). */
function raw(
  base: string,
  method: string,
  path: string,
  token: string,
  payload?: string,
): Promise<{ status: number; body: string }> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: {
          authorization: `Bearer ${token}`,
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
        },
        timeout: 10_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

for (const engine of ENGINES) {
  describe(`gardens and members (${engine.name})`, { skip: engine.skip }, () => {
    let h: Harness;
    let base = '';
    before(async () => {
      h = await harness(engine);
      base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => h?.close());

    describe('hostile garden ids', () => {
      it('are 404 on every garden path, as a garden that does not exist; nothing changes', T, async () => {
        const c = await h.user();
        const g = await createGarden(c, 'Target');
        await plantIn(c, g.id, { name: 'Safe' });
        // (Dot segments such as `..` and `%2E%2E` are sent over a socket below: inject's URL parser
        // would resolve them before the server saw them.)
        const ids = [
          '..%2F',
          '..%2F..%2Fplants',
          '%2E%2E%2F',
          '...',
          'x'.repeat(2000),
          `${g.id}${'0'.repeat(2000)}`,
          enc(`' OR 1=1 --`),
          enc(`${g.id}' OR '1'='1`),
          enc(`'; DROP TABLE gardens; --`),
          enc(`${g.id}"; DELETE FROM garden_members; --`),
          enc('gdn_🌱🌱🌱'),
          enc(`gdn_${'é'.repeat(24)}`),
          enc(g.id.toUpperCase()),
          enc(`${g.id} `),
          `${g.id}%00`,
          enc('*'),
          enc('%'),
          MISSING_GID,
        ];
        // Every case is tried before any failure is reported, so one run names them all.
        const wrong: string[] = [];
        for (const id of ids) {
          const short = id.slice(0, 50);
          for (const [method, url, payload] of [
            ['GET', `/gardens/${id}`, undefined],
            ['PATCH', `/gardens/${id}`, '{"name":"pwned"}'],
            ['DELETE', `/gardens/${id}`, undefined],
            ['GET', `/gardens/${id}/members`, undefined],
            ['PUT', `/gardens/${id}/members/${enc(c.user)}`, '{"role":"owner"}'],
            ['DELETE', `/gardens/${id}/members/${enc(c.user)}`, undefined],
            ['GET', `/gardens/${id}/plants`, undefined],
            ['POST', `/gardens/${id}/plants`, '{"name":"pwned"}'],
          ] as const) {
            const res = await c.request({ method, url, ...(payload ? { headers: JSON_TYPE, payload } : {}) });
            if (res.statusCode !== 404) wrong.push(`${method} ${url.replace(id, short)}: ${res.statusCode}`);
            else errorBody(res);
          }
          if (id.length <= 200) {
            const res = await c.request({ method: 'GET', url: `/plants?garden=${id}` });
            if (res.statusCode !== 404) wrong.push(`GET /plants?garden=${short}: ${res.statusCode}`);
            else errorBody(res);
          }
        }
        // Past the router's limit for one path segment (2,048), 414 instead: a client error, never a 5xx.
        for (const url of [`/gardens/${'x'.repeat(5000)}`, `/gardens/${'x'.repeat(5000)}/plants`]) {
          const res = await c.request({ method: 'GET', url });
          assert.ok(
            res.statusCode === 404 || res.statusCode === 414,
            `${url.slice(0, 30)}: ${res.statusCode}`,
          );
          errorBody(res);
        }
        // A garden= too long to be any garden's id: refused as a client error, never a 5xx.
        const long = await c.request({ method: 'GET', url: `/plants?garden=${'x'.repeat(5000)}` });
        assert.ok(long.statusCode === 400 || long.statusCode === 404, String(long.statusCode));
        errorBody(long);
        // Dot segments as a client that does not resolve them sends them: to the server, a garden id.
        for (const id of ['..', '.', '%2E%2E', '%2e', '.%2E']) {
          for (const [method, path, payload] of [
            ['GET', `/gardens/${id}`, undefined],
            ['GET', `/gardens/${id}/members`, undefined],
            ['GET', `/gardens/${id}/plants`, undefined],
            ['POST', `/gardens/${id}/plants`, '{"name":"pwned"}'],
            ['PUT', `/gardens/${id}/members/${enc(c.user)}`, '{"role":"owner"}'],
            ['DELETE', `/gardens/${id}`, undefined],
          ] as const) {
            const res = await raw(base, method, path, c.token, payload);
            if (res.status !== 404) wrong.push(`${method} ${path} (over a socket): ${res.status}`);
            else assert.equal(JSON.parse(res.body).error, 404);
          }
        }
        assert.deepEqual(wrong, [], 'every hostile garden id is 404');
        assert.deepEqual((await getGarden(c, g.id)).json(), g, 'the garden is untouched');
        assert.deepEqual((await c.request({ method: 'GET', url: `/gardens/${g.id}/plants` })).json(), [
          { name: 'Safe' },
        ]);
        assert.equal(((await members(c, g.id)).json() as Member[]).length, 1);
        assert.equal((await listGardens(c)).length, 2);
      });

      it('an empty garden id segment is an unknown path: 404, never a 5xx', T, async () => {
        const c = await h.user();
        const wrong: string[] = [];
        for (const [method, url] of [
          ['GET', '/gardens/'],
          ['PATCH', '/gardens/'],
          ['DELETE', '/gardens/'],
          ['GET', '/gardens//members'],
          ['PUT', '/gardens//members/x'],
          ['GET', '/gardens//plants'],
          ['POST', '/gardens//plants'],
        ] as const) {
          const res = await c.request({
            method,
            url,
            headers: JSON_TYPE,
            payload: '{"name":"x","role":"viewer"}',
          });
          errorBody(res);
          if (res.statusCode !== 404) wrong.push(`${method} ${url}: ${res.statusCode} ${res.json().code}`);
        }
        assert.deepEqual(wrong, []);
      });
    });
  });
}
