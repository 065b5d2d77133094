#!/usr/bin/env node
// One load-generator run, in its own process (the benchmark pins it to its own core).
// Usage: node bench/load.mjs '<json spec>'  → prints one JSON result line.
// spec: { urls, connections, duration?, amount?, method, path, body?, token?, idsFile?, idsOut?,
//         rotation? ("all" or a count; default 256), start? (offset into the ids) }
import { readFileSync, writeFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { combine } from './combine.mjs';

const spec = JSON.parse(process.argv[2]);
const ids = spec.idsFile ? JSON.parse(readFileSync(spec.idsFile, 'utf8')) : null;
const created = [];
let next = 0;

function run(url, connections, amount) {
  const headers = { 'content-type': 'application/json' };
  if (spec.token) headers.authorization = `Bearer ${spec.token}`;
  const request = {
    method: spec.method,
    path: spec.path,
    headers,
    body: spec.body ? JSON.stringify(spec.body) : undefined,
  };
  let requests = [request];
  if (ids && spec.eachOnce) {
    // {id} walks through the given ids, each used exactly once across all connections.
    request.setupRequest = (req) => ({
      ...req,
      path: spec.path.replace('{id}', String(ids[next++ % ids.length])),
    });
  } else if (ids) {
    // Reads: a fixed rotation of paths, built once, so the load generator does no per-request work.
    // Up to `rotation` of them (default 256) from `start` on, as bench/wrk.lua does.
    const n = spec.rotation === 'all' ? ids.length : Math.min(ids.length, Number(spec.rotation ?? 256));
    const start = spec.start ?? 0;
    requests = Array.from({ length: n }, (_, k) => ids[(start + k) % ids.length]).map((id) => ({
      ...request,
      path: spec.path.replace('{id}', () => String(id)),
    }));
  }
  if (spec.idsOut) {
    request.onResponse = (status, body, _ctx, headers) => {
      if (status !== 201) return;
      const m = /\/plants\/([0-9]+)$/.exec(headers?.location ?? '');
      if (m) created.push(Number(m[1]));
      else {
        // json-server answers with the created object (and no Location).
        try {
          const id = JSON.parse(body).id;
          if (Number.isInteger(id)) created.push(id);
        } catch {}
      }
    };
  }
  return autocannon({
    url,
    // autocannon refuses more connections than requests (a slow target may have made few plants).
    connections: amount ? Math.min(connections, amount) : connections,
    pipelining: 1,
    // autocannon notices the end of a fixed-amount run only at its next sample tick (every 1 s by
    // default), which would count up to a second of idle time; ticking every 10 ms keeps the
    // measured time to within 10 ms of the last answer.
    ...(amount ? { amount, sampleInt: 10 } : { duration: spec.duration ?? 5 }),
    requests,
  });
}

const per = Math.max(1, Math.floor(spec.connections / spec.urls.length));
// A fixed amount is split exactly, so every id is used once.
const amountFor = (i) =>
  spec.amount
    ? Math.floor(spec.amount / spec.urls.length) + (i < spec.amount % spec.urls.length ? 1 : 0)
    : undefined;
const results = await Promise.all(
  spec.urls.flatMap((u, i) => (amountFor(i) === 0 ? [] : [run(u, per, amountFor(i))])),
);
const out = combine(
  results.map((r) => ({
    requests: r.requests.total,
    seconds: r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  })),
);
if (spec.idsOut) writeFileSync(spec.idsOut, JSON.stringify(created));
process.stdout.write(`${JSON.stringify(out)}\n`);
