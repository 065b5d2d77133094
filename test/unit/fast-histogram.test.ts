import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { FastHistogram } from '../../src/http/fast-histogram.js';

// FastHistogram registers plain objects with prom-client's registry (its `get()` shape and the
// `aggregator` its cluster support reads), which prom-client does not promise to keep. These
// tests pin it: the version it was checked against, and output equal to prom-client's own
// Histogram and Counter, alone and summed across workers as `serve --workers` sums them.
const CHECKED_AGAINST = '15.1.3';

const BOUNDS = [0.001, 0.01, 0.1, 1];
const LABELS = ['method', 'route', 'status'] as const;
const OBSERVED: [string, string, number, number][] = [
  ['GET', '/plants', 200, 0.0004],
  ['GET', '/plants', 200, 0.02],
  ['POST', '/plants', 201, 0.5],
  ['GET', '/plants/:id', 404, 3],
  ['GET', '/plants', 200, 0.001],
];

function fast(observed = OBSERVED): Registry {
  const registry = new Registry();
  const h = new FastHistogram(registry, 'x_seconds', 'latency', BOUNDS, { name: 'x_total', help: 'count' });
  for (const [method, route, status, s] of observed) {
    h.observe(`${method} ${route} ${status}`, () => ({ method, route, status: String(status) }), s);
  }
  return registry;
}

function publicApi(observed = OBSERVED): Registry {
  const registry = new Registry();
  const registers = [registry];
  const h = new Histogram({
    name: 'x_seconds',
    help: 'latency',
    buckets: BOUNDS,
    labelNames: LABELS,
    registers,
  });
  const c = new Counter({ name: 'x_total', help: 'count', labelNames: LABELS, registers });
  for (const [method, route, status, s] of observed) {
    h.observe({ method, route, status: String(status) }, s);
    c.inc({ method, route, status: String(status) });
  }
  return registry;
}

describe('FastHistogram against prom-client', () => {
  it(`prom-client is the version FastHistogram's use of its internals was checked against (${CHECKED_AGAINST})`, () => {
    const { version } = createRequire(import.meta.url)('prom-client/package.json') as { version: string };
    assert.equal(
      version,
      CHECKED_AGAINST,
      'prom-client changed: check src/http/fast-histogram.ts against its Registry and AggregatorRegistry, then update CHECKED_AGAINST',
    );
  });

  it("scrapes exactly as prom-client's Histogram and Counter fed the same observations", async () => {
    assert.equal(await fast().metrics(), await publicApi().metrics());
  });

  it("sums across workers exactly as prom-client's Histogram and Counter do", async () => {
    const other = OBSERVED.slice(1, 4).map(
      ([m, r, st, s]) => [m, r, st, s * 3] as [string, string, number, number],
    );
    const summed = async (make: typeof fast) =>
      AggregatorRegistry.aggregate([
        await make().getMetricsAsJSON(),
        await make(other).getMetricsAsJSON(),
      ]).metrics();
    assert.equal(await summed(fast), await summed(publicApi));
  });
});
