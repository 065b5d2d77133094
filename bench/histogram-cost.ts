// CPU per observation of the HTTP request histogram (and its request counter): FastHistogram
// against prom-client's public Histogram + Counter, the children made once per label set as a
// hot path would keep them. `npx tsx bench/histogram-cost.ts` (a few seconds, one core).
import { Counter, Histogram, Registry } from 'prom-client';
import { FastHistogram } from '../src/http/fast-histogram.js';

const BOUNDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
const N = 2_000_000;
const ROUTES = ['/plants', '/plants/:id', '/gardens', '/me'].flatMap((route) =>
  ['GET', 'POST'].flatMap((method) => [200, 201, 404].map((status) => ({ method, route, status }))),
);
const seconds = (i: number) => ((i * 7919) % 5000) / 1e6;

function fast(): void {
  const h = new FastHistogram(new Registry(), 'h', 'h', BOUNDS, { name: 'c', help: 'c' });
  for (let i = 0; i < N; i++) {
    const r = ROUTES[i % ROUTES.length]!;
    h.observe(`${r.method} ${r.route} ${r.status}`, () => ({ ...r, status: String(r.status) }), seconds(i));
  }
}

function publicApi(): void {
  const registers = [new Registry()];
  const labelNames = ['method', 'route', 'status'] as const;
  const h = new Histogram({ name: 'h', help: 'h', buckets: BOUNDS, labelNames, registers });
  const c = new Counter({ name: 'c', help: 'c', labelNames, registers });
  const children = new Map<string, { h: { observe(v: number): void }; c: { inc(): void } }>();
  for (let i = 0; i < N; i++) {
    const r = ROUTES[i % ROUTES.length]!;
    const key = `${r.method} ${r.route} ${r.status}`;
    let child = children.get(key);
    if (!child) {
      const labels = { ...r, status: String(r.status) };
      child = { h: h.labels(labels), c: c.labels(labels) };
      children.set(key, child);
    }
    child.h.observe(seconds(i));
    child.c.inc();
  }
}

for (const [name, run] of [
  ['FastHistogram', fast],
  ['prom-client Histogram + Counter', publicApi],
] as const) {
  run(); // warm-up
  const best = Math.min(
    ...[0, 1, 2].map(() => {
      const t = process.cpuUsage();
      run();
      const u = process.cpuUsage(t);
      return (u.user + u.system) / N;
    }),
  );
  console.log(`${name}: ${(best * 1000).toFixed(0)} ns CPU per request (best of 3 x ${N})`);
}
