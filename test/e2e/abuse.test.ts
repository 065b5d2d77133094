import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { cli, type Server, serve } from './process.js';

// Short timeouts so the test runs in seconds; the defaults (10 s headers, 30 s request) are the same code.
const HEADERS_TIMEOUT = 1000;
const REQUEST_TIMEOUT = 2000;

/** Everything the server sends on one raw connection, and when it closed it (ms after open). */
interface Raw {
  socket: Socket;
  data: () => string;
  closed: Promise<number>;
}

function open(url: string): Promise<Raw> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const start = Date.now();
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      data += d;
    });
    socket.on('error', () => {});
    const closed = new Promise<number>((r) => socket.once('close', () => r(Date.now() - start)));
    socket.once('connect', () => resolve({ socket, data: () => data, closed }));
    socket.once('error', reject);
  });
}

/** Status and parsed JSON body of the one response in `raw`. */
function parse(raw: string): { status: number; headers: string; body: Record<string, unknown> } {
  const m = /^HTTP\/1\.1 ([0-9]{3}) [^\r]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(raw);
  assert.ok(m, `not an HTTP response: ${JSON.stringify(raw.slice(0, 200))}`);
  return { status: Number(m[1]), headers: m[2]!.toLowerCase(), body: JSON.parse(m[3]!) };
}

function assertContractError(raw: string, status: number, code: string): void {
  const res = parse(raw);
  assert.equal(res.status, status, raw);
  assert.match(res.headers, /content-type: application\/json; charset=utf-8/);
  assert.match(res.headers, /x-request-id: /);
  assert.equal(res.body.error, status);
  assert.equal(res.body.code, code);
  assert.equal(typeof res.body.message, 'string');
}

const rssMb = (pid: number) =>
  Number(/VmRSS:\s+([0-9]+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

describe('abuse over real sockets: slow clients are cut off, oversized bodies are not read', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-abuse-'));
  const env = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}` };
  let server: Server;
  let token: string;

  before(async () => {
    server = await serve(
      ['--headers-timeout', String(HEADERS_TIMEOUT), '--request-timeout', String(REQUEST_TIMEOUT)],
      env,
    );
    token = (await cli(['token', 'create', '--user', 'abuse'], env)).stdout.trim();
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const auth = () => ({ headers: { authorization: `Bearer ${token}` } });
  /** How many plants the test user has. */
  const count = async () =>
    ((await (await fetch(`${server.url}/plants?limit=1000`, auth())).json()) as unknown[]).length;

  it('slowloris: 100 connections dribbling headers are answered 408 and closed after the headers timeout, and others are served meanwhile', async () => {
    const conns = await Promise.all(Array.from({ length: 100 }, () => open(server.url)));
    for (const c of conns) c.socket.write('GET /plants HTTP/1.1\r\nHost: x\r\n');
    // One more header byte every 100 ms on every connection: never idle, never finished.
    // Resolves after the third round: the slow clients have been at it a while when a good one comes.
    let drip: NodeJS.Timeout | undefined;
    const dribbling = new Promise<void>((resolve) => {
      let rounds = 0;
      drip = setInterval(() => {
        for (const c of conns) if (!c.socket.destroyed) c.socket.write('x');
        if (++rounds === 3) resolve();
      }, 100);
    });
    try {
      await dribbling;
      const healthy = await fetch(`${server.url}/plants`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(healthy.status, 200, 'a well-behaved client is served while slow ones hang on');
      const closedAfter = await Promise.all(conns.map((c) => c.closed));
      // Node checks timeouts every quarter of the headers timeout, so the bound is about 1.25 × plus slack.
      for (const ms of closedAfter) {
        assert.ok(ms >= HEADERS_TIMEOUT * 0.9, `closed too early, after ${ms} ms`);
        assert.ok(ms < HEADERS_TIMEOUT * 3, `held open for ${ms} ms`);
      }
      for (const c of conns) assertContractError(c.data(), 408, 'request_timeout');
    } finally {
      clearInterval(drip);
    }
  });

  it('a body sent too slowly is cut off after the request timeout and stores nothing', async () => {
    const had = await count();
    const c = await open(server.url);
    const body = JSON.stringify({ name: 'never arrives in full' });
    c.socket.write(
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
    );
    let i = 5;
    const drip = setInterval(() => {
      // One byte every 200 ms, stopping one short of the end: the request never completes.
      if (i < body.length - 1 && !c.socket.destroyed) c.socket.write(body[i++]!);
    }, 200);
    try {
      const ms = await c.closed;
      assert.ok(ms >= REQUEST_TIMEOUT * 0.9 && ms < REQUEST_TIMEOUT * 3, `closed after ${ms} ms`);
      assertContractError(c.data(), 408, 'request_timeout');
    } finally {
      clearInterval(drip);
    }
    assert.equal(await count(), had);
  });

  it('a declared Content-Length over 16 KiB gets 413 before any of the body is sent', async () => {
    const c = await open(server.url);
    c.socket.write(
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n',
    );
    await c.closed;
    assertContractError(c.data(), 413, 'body_too_large');
  });

  it('a chunked body over 16 KiB is cut off with 413: the server stops reading and its memory stays flat', async () => {
    const rssBefore = rssMb(server.child.pid!);
    const chunk = Buffer.alloc(64 * 1024, 'a');
    const attempt = async () => {
      const c = await open(server.url);
      c.socket.write(
        `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
          'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
      );
      let sent = 0;
      let closed = false;
      void c.closed.then(() => {
        closed = true;
      });
      // Try to send 64 MiB, honouring back-pressure, until the server answers or hangs up.
      while (!closed && sent < 64 * 1024 * 1024 && c.data() === '') {
        const ok = c.socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
        sent += chunk.length;
        if (!ok) {
          await new Promise((r) => {
            c.socket.once('drain', r);
            c.socket.once('close', r);
          });
        }
        // Let the event loop read what the server sent, as an HTTP client does while uploading:
        // once the server hangs up, a further write fails and Node drops the unread answer.
        await new Promise((r) => setImmediate(r));
      }
      await c.closed;
      return { sent, data: c.data() };
    };
    const results = await Promise.all(Array.from({ length: 10 }, attempt));
    for (const r of results) {
      assertContractError(r.data, 413, 'body_too_large');
      // The socket buffers hold some megabytes; what matters is that the 64 MiB were never all taken.
      assert.ok(r.sent < 16 * 1024 * 1024, `the server read ${r.sent} bytes of an oversized body`);
    }
    const grown = rssMb(server.child.pid!) - rssBefore;
    assert.ok(grown < 64, `resident memory grew by ${grown.toFixed(0)} MB`);
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
  });

  it('300 generated raw requests (odd request lines, header bytes, bodies) each get a contract answer and store nothing when refused', async () => {
    const latin1 = fc.string({
      unit: fc.integer({ min: 0, max: 255 }).map((n) => String.fromCharCode(n)),
      maxLength: 40,
    });
    const request = fc.record({
      method: fc.constantFrom('GET', 'POST', 'DELETE', 'PUT', 'HEAD', 'OPTIONS', 'PATCH', 'FOO', 'G ET', ''),
      path: fc.oneof(
        fc.constantFrom('/plants', '/plants/1', '/plants?limit=5', '/healthz', '*', ''),
        latin1.map((x) => `/plants/${x}`),
        latin1,
      ),
      version: fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/1.1x', ''),
      headers: fc.array(
        fc.tuple(
          fc.oneof(
            fc.constantFrom(
              'Content-Type',
              'Authorization',
              'Idempotency-Key',
              'X-Request-Id',
              'Transfer-Encoding',
              'Expect',
            ),
            latin1,
          ),
          fc.oneof(fc.constantFrom('application/json', `Bearer ${token}`, 'chunked', '100-continue'), latin1),
        ),
        { maxLength: 4 },
      ),
      auth: fc.boolean(),
      body: fc.oneof(latin1, fc.constantFrom('{"name":"raw"}', '{"name":"raw","tag":"t"}')),
    });
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const had = await count();
        const lines = [`${r.method} ${r.path} ${r.version}`, 'Host: x'];
        if (r.auth) lines.push(`Authorization: Bearer ${token}`, 'Content-Type: application/json');
        for (const [k, v] of r.headers) lines.push(`${k}: ${v}`);
        lines.push(`Content-Length: ${Buffer.byteLength(r.body, 'latin1')}`, 'Connection: close');
        const c = await open(server.url);
        c.socket.end(`${lines.join('\r\n')}\r\n\r\n${r.body}`, 'latin1');
        await c.closed;
        const raw = c.data();
        if (raw !== '') {
          const status = Number(/^HTTP\/1\.[01] ([0-9]{3})/.exec(raw)?.[1]);
          assert.ok(status >= 200 && status < 500, `status ${status}: ${JSON.stringify(raw.slice(0, 300))}`);
          if (status >= 400 && r.method !== 'HEAD') {
            const res = parse(raw);
            assert.equal(res.body.error, status);
            assert.match(String(res.body.code), /^[a-z_]+$/);
          }
        }
        const added = (await count()) - had;
        assert.equal(added, /^HTTP\/1\.[01] 201 /.test(raw) ? 1 : 0, 'a refused request changed the store');
      }),
      { seed: Number(process.env.FAST_CHECK_SEED ?? 20261121), numRuns: 300 },
    );
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
  });

  it('bytes that are not HTTP get the contract 400 body from the HTTP layer', async () => {
    for (const garbage of [
      'GARBAGE\r\n\r\n',
      'GET /plants HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n',
      'GET /plants HTTP/1.1\r\nHost: x\r\nX: a\u0000b\r\n\r\n',
      'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello',
      // Valid headers of an authenticated create, then a body that is not chunked encoding.
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`,
    ]) {
      const c = await open(server.url);
      c.socket.write(garbage, 'latin1');
      await c.closed;
      assertContractError(c.data(), 400, 'malformed_request');
    }
    // The same broken body without a token: authentication comes first (the contract's order) and
    // is answered from the headers alone, before the body is read.
    const c = await open(server.url);
    c.socket.write('POST /plants HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 'latin1');
    await c.closed;
    assertContractError(c.data(), 401, 'missing_token');
  });
});
