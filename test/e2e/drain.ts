import assert from 'node:assert/strict';
import { type ClientRequest, type IncomingHttpHeaders, request } from 'node:http';
import { until } from '../helpers/wait.js';
import { exitOf, type Server } from './process.js';

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * One request on a connection of its own (no pool: each is a new client, as a prober's is), sent
 * whole unless `hold` (the caller writes its body).
 */
function send(
  url: string,
  init: { method?: string; headers?: Record<string, string | number>; hold?: boolean } = {},
): { req: ClientRequest; answer: Promise<Answer> } {
  const req = request(url, { method: init.method ?? 'GET', headers: init.headers, agent: false });
  const answer = new Promise<Answer>((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        body += d;
      });
      res.on('error', reject);
      res.on('aborted', () => reject(new Error(`${url}: the answer was cut off`)));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
  });
  if (!init.hold) req.end();
  return { req, answer };
}

/**
 * The answer to a new request; a connection refused or reset is asked again (with --workers, one
 * that went to a worker as it closed its listener).
 */
const answerOf = (url: string, headers: Record<string, string> = {}) =>
  until(`an answer from ${url}`, () => send(url, { headers }).answer.catch(() => undefined));

const refusedWhileDraining = (a: Answer, what: string) => {
  assert.equal(a.status, 503, `${what}: ${a.body}`);
  assert.equal(a.headers['retry-after'], '1', what);
  assert.equal(a.headers.connection, 'close', what);
  assert.equal(JSON.parse(a.body).code, 'shutting_down', what);
};

/**
 * Contract 14.2, on a running `serve` (one process or --workers): with a create held in flight (its
 * headers and half its body sent) and a live stream open, SIGTERM. /readyz turns 503 at once; any
 * new request is 503 with Retry-After and Connection: close; the stream ends cleanly; the held
 * create, finished, is 201; the process exits 0 within 10 s.
 */
export async function drainsOnSigterm(server: Server, token: string): Promise<void> {
  const auth = { authorization: `Bearer ${token}` };
  const body = JSON.stringify({ name: 'held through the drain' });
  const held = send(`${server.url}/plants`, {
    method: 'POST',
    headers: {
      ...auth,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      'x-request-id': 'held-through-drain',
    },
    hold: true,
  });
  held.req.write(body.slice(0, 10));
  const stream = send(`${server.url}/events`, { headers: { ...auth, accept: 'text/event-stream' } });
  stream.req.end();
  // The stream's headers come once it is open; the held create is in once the server logs it.
  const streamed = await new Promise<void>((resolve, reject) => {
    stream.req.on('response', (res) =>
      res.statusCode === 200 ? resolve() : reject(new Error(`${res.statusCode}`)),
    );
    stream.req.on('error', reject);
  });
  void streamed;
  await until('the server to take the held create in', () =>
    server.logs.some((l) => l.includes('held-through-drain') && l.includes('incoming request')),
  );

  server.child.kill('SIGTERM');
  const exited = exitOf(server.child, 'serve after SIGTERM', 10_000);
  const ready = await until('/readyz to answer 503', async () => {
    const a = await answerOf(`${server.url}/readyz`);
    return a.status === 503 ? a : undefined;
  });
  refusedWhileDraining(ready, '/readyz');
  refusedWhileDraining(await answerOf(`${server.url}/plants`, auth), 'a new request');
  // The live stream ends, cleanly (an end, not a reset), for its client to resume elsewhere.
  await stream.answer;

  held.req.end(body.slice(10));
  const done = await held.answer;
  assert.equal(done.status, 201, done.body);
  assert.equal(JSON.parse(done.body).name, 'held through the drain');
  assert.equal(await exited, 0);
}
