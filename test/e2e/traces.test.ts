import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { ENGINES } from '../helpers/engines.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';
import { cli, exitOf, serve, spawnBin } from './process.js';

// Traces (contract 14.1) with the real OTLP/HTTP exporter (http/json) to a receiver of the test's
// on 127.0.0.1: a PATCH with an incoming traceparent that fires a webhook, delivered by a separate
// `plantstore deliver` process.

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: OtlpValue }[];
  service: string;
}
const SERVER = 2;
const CLIENT = 3;

/** A small OTLP/HTTP (JSON) trace receiver: every span it was sent, with its resource's service.name. */
async function startCollector() {
  const spans: OtlpSpan[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => {
      body += d;
    });
    req.on('end', () => {
      if (req.url === '/v1/traces' && String(req.headers['content-type']).startsWith('application/json')) {
        const doc = JSON.parse(body) as {
          resourceSpans: {
            resource: { attributes: { key: string; value: OtlpValue }[] };
            scopeSpans: { spans: Omit<OtlpSpan, 'service'>[] }[];
          }[];
        };
        for (const rs of doc.resourceSpans) {
          const service =
            rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
          for (const ss of rs.scopeSpans) for (const s of ss.spans) spans.push({ ...s, service });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, spans, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const attr = (s: OtlpSpan, key: string) => {
  const v = s.attributes?.find((a) => a.key === key)?.value;
  return v === undefined ? undefined : (v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue);
};

// An --import that records every module resolved from @opentelemetry or @fastify/otel, in the
// loader's own thread (module.register), to a file: what a process loaded, whatever its code does.
function moduleRecorder(dir: string) {
  const log = join(dir, 'loaded.txt');
  writeFileSync(log, '');
  writeFileSync(
    join(dir, 'hooks.mjs'),
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  if (/@opentelemetry|@fastify\\/otel/.test(r.url)) appendFileSync(${JSON.stringify(log)}, r.url + '\\n');
  return r;
}
`,
  );
  writeFileSync(
    join(dir, 'register.mjs'),
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(join(dir, 'hooks.mjs')).href)});\n`,
  );
  return {
    nodeOptions: `--import=${pathToFileURL(join(dir, 'register.mjs')).href}`,
    loaded: () => readFileSync(log, 'utf8').split('\n').filter(Boolean),
    reset: () => writeFileSync(log, ''),
  };
}

const sqlite = ENGINES.find((e) => e.name === 'sqlite')!;
const OFF = {
  OTEL_TRACES_EXPORTER: '',
  OTEL_EXPORTER_OTLP_ENDPOINT: '',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
};

describe('traces (contract 14.1)', () => {
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let receiver: Receiver;
  let dir: string;
  let db: { url: string; drop(): Promise<void> };
  before(async () => {
    collector = await startCollector();
    receiver = await startReceiver();
    dir = mkdtempSync(join(tmpdir(), 'plantstore-traces-'));
    db = await sqlite.database();
  });
  after(async () => {
    await collector.close();
    await receiver.close();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('off: a serving process loads nothing of OpenTelemetry', { timeout: 60_000 }, async () => {
    const recorder = moduleRecorder(dir);
    const env = { ...OFF, DATABASE_URL: db.url, RATE_LIMIT: '0', NODE_OPTIONS: recorder.nodeOptions };
    const server = await serve([], env);
    try {
      const res = await fetch(`${server.url}/healthz`);
      assert.equal(res.status, 200);
    } finally {
      assert.equal(await server.stop(), 0);
    }
    assert.deepEqual(recorder.loaded(), []);
    assert.ok(server.logs.every((l) => !l.includes('trace_id')));
  });

  for (const engine of ENGINES) {
    it(`a PATCH with a traceparent: server span, store spans, the delivery by another process in the same trace (${engine.name})`, {
      timeout: 90_000,
      skip: engine.skip,
    }, async (t) => {
      const recorder = moduleRecorder(dir);
      const own = await engine.database();
      t.after(() => own.drop());
      const system = engine.name === 'postgres' ? 'postgresql' : 'sqlite';
      const env = {
        DATABASE_URL: own.url,
        RATE_LIMIT: '0',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '50',
        OTEL_SERVICE_NAME: '',
        NODE_OPTIONS: recorder.nodeOptions,
      };
      const token = (await cli(['token', 'create', '--user', 'tracer'], env)).stdout.trim();
      assert.match(token, /\S/);
      const auth = { authorization: `Bearer ${token}` };
      const server = await serve(['--no-webhook-delivery'], env);
      const deliverer = spawnBin(['deliver'], env);
      let deliveryLog = '';
      deliverer.stderr!.on('data', (d) => {
        deliveryLog += d;
      });
      try {
        // Traces on: the SDK was loaded (the recorder's positive control).
        assert.ok(recorder.loaded().some((u) => u.includes('@opentelemetry/sdk-trace')));
        const hook = await fetch(`${server.url}/webhooks`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ url: receiver.url, events: ['plant.updated'] }),
        });
        assert.equal(hook.status, 201);
        const created = await fetch(`${server.url}/plants`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'secret-fern' }),
        });
        assert.equal(created.status, 201);
        const id = /[^/]+$/.exec(created.headers.get('location')!)![0];
        const searched = await fetch(`${server.url}/plants?q=secretquery`, { headers: auth });
        assert.equal(searched.status, 200);

        const traceId =
          engine.name === 'postgres'
            ? '5bf92f3577b34da6a3ce929d0e0e4736'
            : '4bf92f3577b34da6a3ce929d0e0e4736';
        const parent = '00f067aa0ba902b7';
        const patched = await fetch(`${server.url}/plants/${id}`, {
          method: 'PATCH',
          headers: {
            ...auth,
            'content-type': 'application/merge-patch+json',
            'if-match': '*',
            traceparent: `00-${traceId}-${parent}-01`,
          },
          body: JSON.stringify({ name: 'secret-rose' }),
        });
        assert.equal(patched.status, 200, await patched.clone().text());

        const seen = receiver.received.length;
        const delivery = (await receiver.waitFor(seen + 1, 30_000))[seen]!;
        const sent = delivery.headers as IncomingHttpHeaders;
        assert.match(String(sent.traceparent), new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));

        const inTrace = () => collector.spans.filter((s) => s.traceId === traceId);
        const spans = await until(
          'the request and delivery spans to be exported',
          () => {
            const t = inTrace();
            return t.some((s) => s.kind === SERVER) && t.some((s) => s.name === 'webhook delivery')
              ? t
              : undefined;
          },
          30_000,
        );
        const request = spans.find((s) => s.kind === SERVER)!;
        assert.equal(request.parentSpanId, parent);
        assert.equal(request.name, 'PATCH /plants/:id');
        assert.equal(request.service, 'plantstore');
        assert.equal(attr(request, 'http.route'), '/plants/:id');
        assert.equal(attr(request, 'http.request.method'), 'PATCH');
        assert.equal(Number(attr(request, 'http.response.status_code')), 200);
        const store = spans.filter((s) => s.parentSpanId === request.spanId && s.kind === CLIENT);
        assert.ok(
          store.some((s) => s.name === `${system} updatePlant` && attr(s, 'db.system.name') === system),
          `store spans under the request: ${store.map((s) => s.name).join(', ')}`,
        );
        if (system === 'postgresql') {
          // Each statement of the store's work a span of its own under it, named, never its values.
          const update = store.find((s) => s.name === 'postgresql updatePlant')!;
          const statements = spans.filter((s) => s.parentSpanId === update.spanId);
          assert.ok(statements.length > 0, 'statement spans under postgresql updatePlant');
          for (const s of statements) assert.equal(s.name, `postgresql ${attr(s, 'db.query.summary')}`);
        }
        // A request without a traceparent: a trace of its own, its store work under it.
        const create = collector.spans.find((s) => s.kind === SERVER && s.name === 'POST /plants');
        assert.ok(create, 'a server span for POST /plants');
        assert.equal(create.parentSpanId || undefined, undefined);
        assert.equal(Number(attr(create, 'http.response.status_code')), 201);
        assert.equal(attr(create, 'url.path'), '/plants');
        assert.ok(
          collector.spans.some((s) => s.parentSpanId === create.spanId && s.kind === CLIENT),
          'store spans under POST /plants',
        );
        // The processes' polls (the deliverer's claims, the streams') outside any request are not
        // traces of their own: every store span has a parent.
        const orphans = collector.spans.filter((s) => s.name.startsWith(`${system} `) && !s.parentSpanId);
        assert.deepEqual(
          orphans.map((s) => s.name),
          [],
        );
        const sentBy = spans.find((s) => s.name === 'webhook delivery')!;
        assert.equal(sentBy.kind, CLIENT);
        assert.equal(attr(sentBy, 'webhook.event.type'), 'plant.updated');
        // The delivery's span is the one whose context the POST carried, in the request's trace.
        assert.equal(String(sent.traceparent).split('-')[2], sentBy.spanId);
        assert.ok(
          spans.some((s) => s.spanId === sentBy.parentSpanId),
          'the delivery span is a child of a span of the request',
        );

        // Nothing secret in any attribute of any span exported.
        const everything = JSON.stringify(collector.spans);
        for (const secret of [token, 'secret-fern', 'secret-rose', 'secretquery']) {
          assert.ok(!everything.includes(secret), `${secret} in a span`);
        }
        // The request's log lines carry its trace.
        await until('the request log line', () =>
          server.logs.some((l) => l.includes(traceId) && l.includes('"span_id"')),
        );
        const line = JSON.parse(server.logs.find((l) => l.includes(traceId))!) as Record<string, string>;
        assert.equal(line.trace_id, traceId);
        assert.match(line.span_id!, /^[0-9a-f]{16}$/);
      } finally {
        deliverer.kill('SIGTERM');
        // Its stderr (JSON logs) says why, should it not stop cleanly.
        assert.equal(await exitOf(deliverer, 'deliver'), 0, deliveryLog);
        await server.stop();
      }
    });
  }

  it('export, import and backup are spans of their own', { timeout: 90_000 }, async () => {
    const env = {
      DATABASE_URL: db.url,
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'plantstore-jobs',
    };
    const file = join(dir, 'store.plantstore');
    const exported = await cli(['export', '--to', file], env);
    assert.equal(exported.code, 0, exported.stderr);
    const target = await sqlite.database();
    try {
      const imported = await cli(['import', file], { ...env, DATABASE_URL: target.url });
      assert.equal(imported.code, 0, imported.stderr);
    } finally {
      await target.drop();
    }
    const backedUp = await cli(['backup', '--to', join(dir, 'backup.db')], env);
    assert.equal(backedUp.code, 0, backedUp.stderr);
    // Each command sent its spans before exiting.
    const jobs = collector.spans.filter((s) => s.service === 'plantstore-jobs');
    assert.deepEqual(jobs.map((s) => s.name).sort(), ['backup', 'export', 'import']);
  });
});
