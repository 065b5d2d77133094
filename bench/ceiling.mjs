#!/usr/bin/env node
// The ceiling: the fastest honest node:http server for the requests the benchmarks send. It has no
// store and no validation, but it does the HTTP work the service cannot skip, so a ratio to it
// measures plantstore's own cost:
//   - every answer carries Content-Length (as Fastify sets it), never chunked;
//   - a request without a Bearer token is refused 401, as the service must check one;
//   - X-Request-Id is echoed when the request has one (the service echoes or makes one);
//   - a list answers a page of the `limit` asked for (default 20, at most 1000), with a Link
//     header, so its body is the size of the service's page; a read answers one plant; a create
//     reads the body and answers 201 with Location; a delete 204; a PATCH 200.
// Usage: node bench/ceiling.mjs PORT
import { createServer } from 'node:http';

const TYPE = 'application/json; charset=utf-8';
const one = Buffer.from(JSON.stringify({ name: 'plant 1', tag: 'tag-1' }));
const unauthorized = Buffer.from(
  JSON.stringify({ code: 'unauthorized', message: 'a Bearer token is required' }),
);
const pages = new Map();
/** The body of a page of `n` plants, made once per size. */
function page(n) {
  let body = pages.get(n);
  if (!body) {
    body = Buffer.from(
      JSON.stringify(Array.from({ length: n }, (_, i) => ({ name: `plant ${i}`, tag: 'tag-1' }))),
    );
    pages.set(n, body);
  }
  return body;
}
const LINK = '</plants?limit=20&cursor=MS4yLnVUMm90dDRRaEd1d2Q0VXM>; rel="next"';

function send(res, status, body, headers) {
  res.writeHead(status, { ...headers, 'content-type': TYPE, 'content-length': body.length });
  res.end(body);
}

createServer((req, res) => {
  const id = req.headers['x-request-id'];
  const base = id === undefined ? {} : { 'x-request-id': id };
  const auth = req.headers.authorization;
  if (!auth?.startsWith('Bearer ') || auth.length < 8) {
    if (req.url === '/healthz') return send(res, 200, one, base); // the readiness probe
    return send(res, 401, unauthorized, { ...base, 'www-authenticate': 'Bearer' });
  }
  if (req.method === 'POST') {
    req.resume();
    req.on('end', () => send(res, 201, one, { ...base, location: '/plants/1' }));
  } else if (req.method === 'DELETE') {
    res.writeHead(204, base).end();
  } else if (req.method === 'PATCH') {
    req.resume();
    req.on('end', () => send(res, 200, one, base));
  } else if (req.url.startsWith('/plants/')) {
    send(res, 200, one, base);
  } else {
    const m = /[?&]limit=(\d+)/.exec(req.url);
    const n = m ? Math.min(1000, Math.max(1, Number(m[1]))) : 20;
    send(res, 200, page(n), { ...base, link: LINK });
  }
}).listen(Number(process.argv[2]), '127.0.0.1');
