#!/usr/bin/env node
// An open-loop load generator for the mixed workload: requests drawn from bench/mixed.ts's pool
// (the same file and mix as bench/mixed.lua) sent at a fixed rate, whatever the server's answers
// do, and each request's latency counted from the moment it was due to be sent — not from when a
// connection was free to send it. A server that stalls for 100 ms therefore shows every request
// that fell due in those 100 ms as late (coordinated omission corrected, as wrk2 does).
//
//   node bench/fixed-rate.mjs '{"url":…,"pool":FILE,"mix":"list:35,…","rate":3000,"seconds":10,"connections":50}'
//   The first second (spec.warmup, in seconds) is sent at the same rate but not counted: this
//   process's JIT and its connections' handshakes would otherwise count as the server's.
//   → prints one JSON line: per class n, p50, p99, p99.9 and max in ms, and the same over every
//     request (`all`); the rate reached; how late this process itself sent (its own lag, which
//     would count against the server if it grew); when the slowest answer fell due (`slowest`,
//     ms after the counted part began) and how many took over 25 ms, due between `first` and
//     `last` (a stall's place in the run), and when the counted part began by the wall clock
//     (`countedFromEpochMs`, to set the run beside a server's own log, e.g. its --trace-gc lines).
import { readFileSync } from 'node:fs';
import net from 'node:net';

const spec = JSON.parse(process.argv[2]);
const pool = new Map();
for (const line of readFileSync(spec.pool, 'utf8').split('\n')) {
  if (!line) continue;
  const [cls, method, path, token, body] = line.split('\t');
  if (!pool.has(cls)) pool.set(cls, []);
  pool.get(cls).push({ cls, method, path, token, body });
}
// The mix as cumulative weights over its classes.
const weights = spec.mix.split(',').map((p) => {
  const [cls, w] = p.split(':');
  if (!pool.has(cls)) throw new Error(`no ${cls} requests in the pool`);
  return { cls, w: Number(w) };
});
const total = weights.reduce((n, x) => n + x.w, 0);
// A deterministic draw, so that runs compare.
let state = 20261125;
const rand = () => {
  state = (state * 1103515245 + 12345) % 2 ** 31;
  return state / 2 ** 31;
};
const cursor = new Map([...pool.keys()].map((c) => [c, 0]));
function draw() {
  const x = rand() * total;
  let sum = 0;
  let cls = weights[weights.length - 1].cls;
  for (const c of weights) {
    sum += c.w;
    if (x < sum) {
      cls = c.cls;
      break;
    }
  }
  const list = pool.get(cls);
  const i = cursor.get(cls);
  cursor.set(cls, i + 1);
  return list[i % list.length];
}

// Raw keep-alive sockets, each request's bytes made once: node:http's client cost this process
// so much CPU at a few thousand requests/s that its own lag (tens of ms) showed as the server's.
const url = new URL(spec.url);
const bytes = new Map();
function requestBytes(req) {
  let b = bytes.get(req);
  if (b === undefined) {
    const body = req.body ? Buffer.from(req.body) : null;
    const head =
      `${req.method} ${req.path} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${req.token}\r\n` +
      (body ? `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n` : '') +
      '\r\n';
    b = body ? Buffer.concat([Buffer.from(head), body]) : Buffer.from(head);
    bytes.set(req, b);
  }
  return b;
}
const latencies = new Map();
const statuses = {};
let errors = 0;
let sent = 0;
let done = 0;
let lagMax = 0;
const warm = Math.round(spec.rate * (spec.warmup ?? 1));
const count = warm + Math.round(spec.rate * spec.seconds);
const interval = 1000 / spec.rate;
const start = performance.now() + 50;
const countedFrom = start + warm * interval;
// Answers slower than this are counted with the span of their due times (`slow`).
const SLOW_MS = 25;
const slow = { overMs: SLOW_MS, n: 0, first: Infinity, last: -Infinity };
let slowest = { ms: 0, dueAt: 0 };

// Requests due while every connection waits for an answer wait here, their due time kept.
const queue = [];
const idle = [];
function connection() {
  const socket = net.connect(Number(url.port), url.hostname);
  socket.setNoDelay(true);
  const c = { socket, job: null, buf: null };
  socket.on('connect', () => ready(c));
  socket.on('data', (chunk) => {
    c.buf = c.buf === null ? chunk : Buffer.concat([c.buf, chunk]);
    const end = c.buf.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = c.buf.subarray(0, end).toString('latin1');
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (length === null) {
      // Not sent by plantstore or the ceiling; said rather than guessed at.
      throw new Error(`an answer without Content-Length: ${head.split('\r\n')[0]}`);
    }
    if (c.buf.length < end + 4 + Number(length[1])) return;
    c.buf = null;
    const job = c.job;
    c.job = null;
    const status = head.slice(9, 12);
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (job.counted) {
      if (!latencies.has(job.req.cls)) latencies.set(job.req.cls, []);
      const took = performance.now() - job.due;
      latencies.get(job.req.cls).push(took);
      // When in the run the slow answers fell due: a stall's place (ms after the counted part began).
      const at = job.due - countedFrom;
      if (took > slowest.ms) slowest = { ms: took, dueAt: at };
      if (took > SLOW_MS) {
        slow.n++;
        slow.first = Math.min(slow.first, at);
        slow.last = Math.max(slow.last, at);
      }
    }
    finish();
    ready(c);
  });
  socket.on('error', () => {
    errors++;
    if (c.job) finish();
  });
}
function ready(c) {
  const job = queue.shift();
  if (job === undefined) idle.push(c);
  else start1(c, job);
}
function start1(c, job) {
  c.job = job;
  c.socket.write(requestBytes(job.req));
}
function send(req, due, counted) {
  const job = { req, due, counted };
  const c = idle.pop();
  if (c === undefined) queue.push(job);
  else start1(c, job);
}
for (let i = 0; i < spec.connections; i++) connection();

let resolveAll;
const all = new Promise((r) => (resolveAll = r));
function finish() {
  if (++done === count) resolveAll();
}

// Sends every request that has fallen due, then waits for the next one's time.
function pump() {
  const now = performance.now();
  while (sent < count && start + sent * interval <= now) {
    const due = start + sent * interval;
    const counted = sent >= warm;
    if (counted) lagMax = Math.max(lagMax, now - due);
    sent++;
    send(draw(), due, counted);
  }
  if (sent < count) setTimeout(pump, Math.max(0, start + sent * interval - performance.now()));
}
setTimeout(pump, 50);
await all;
const elapsed = (performance.now() - start - warm * interval) / 1000;
const at = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];
const summary = (xs) => {
  xs.sort((a, b) => a - b);
  return { n: xs.length, p50: at(xs, 50), p99: at(xs, 99), p999: at(xs, 99.9), max: xs[xs.length - 1] };
};
const classes = {};
for (const [cls, xs] of latencies) classes[cls] = summary(xs);
const everyRequest = summary([...latencies.values()].flat());
for (const c of idle) c.socket.destroy();
console.log(
  JSON.stringify({
    rate: (count - warm) / elapsed,
    classes,
    all: everyRequest,
    statuses,
    errors,
    lagMaxMs: lagMax,
    slowest,
    slow,
    countedFromEpochMs: performance.timeOrigin + countedFrom,
  }),
);
