import assert from 'node:assert/strict';
import { type IncomingHttpHeaders, request } from 'node:http';
import { describe, it } from 'node:test';
import { ENGINES } from '../helpers/engines.js';
import { startReceiver } from '../helpers/receiver.js';
import { openStream, type SseReader } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';
import { oldVersion } from './old-version.js';
import { BIN, cli, exitOf, type Server, serve } from './process.js';

// A rolling upgrade (contract 14.3, docs/operations.md "Upgrading without downtime").
//
// PostgreSQL: release 0.4.0 (tree 872ed63, built by test/e2e/old-version.ts: `git archive` of the
// commit compiled with its own tsconfig; its package-lock.json's dependencies are this tree's, so
// the linked node_modules is what its `npm ci` would install) serves a database of its own under
// two writers (creates, then patches), a reader, a live stream and a webhook endpoint it delivers
// to itself. This release's `plantstore migrate` runs while 0.4.0 serves under that load. It
// applies PostgreSQL 14, which is NOT safe while serving (a stored generated column rewrites the
// events table under an exclusive lock): the test applies it anyway and shows that writes merely
// wait for it, which holds here because the events table is a few hundred rows and the rewrite
// takes milliseconds; on a large table the writes would wait as long as the rewrite takes, which
// is why docs/operations.md tells an operator to run such a migration at a quiet moment or with
// the previous release stopped. PostgreSQL 16's index is built CONCURRENTLY meanwhile. Then this
// release starts beside 0.4.0, new requests go to it (as a load balancer moves traffic), and 0.4.0
// is stopped with SIGTERM with a create still in flight on it (its body half sent).
//
// SQLite: two processes of this release on one file; the first is stopped with SIGTERM while the
// writers still send to it: they get its 503 with Retry-After, and the "load balancer" (this
// test's `send`) takes that instance out and sends the retry to the other one.
//
// Asserted for both: zero failed operations (the only 5xx allowed is a stopping instance's 503
// with Retry-After, whose retry on the other succeeds); every acknowledged write readable after,
// as acknowledged; the stream, resumed on the new instance with Last-Event-ID, saw every event id
// once, each plant's events in the order of its writes; every event delivered to the webhook.
// No sleeps order anything: each phase lasts until a count of acknowledged writes is reached.

const OLD_COMMIT = '872ed63';

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One request on a connection of its own; `hold` leaves the body half sent until `finish()`. */
function send1(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: unknown,
  hold = false,
): { answer: Promise<Answer>; finish: () => void } {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const h: Record<string, string | number> = { ...headers };
  if (text !== undefined) {
    h['content-type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
    h['content-length'] = Buffer.byteLength(text);
  }
  const req = request(url, { method, headers: h, agent: false, timeout: 20_000 });
  const answer = new Promise<Answer>((resolve, reject) => {
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: no answer in 20 s`)));
    req.on('response', (res) => {
      let b = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (b += d));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: b }));
    });
  });
  if (text === undefined) req.end();
  else if (hold) req.write(text.slice(0, 5));
  else req.end(text);
  return { answer, finish: () => req.end(text?.slice(5)) };
}

/** The created plant's id, from its Location. */
function idOf(a: Answer): number {
  const m = /^\/plants\/([0-9]+)$/.exec(a.headers.location ?? '');
  assert.ok(m, `Location ${a.headers.location} names a plant: ${a.body}`);
  return Number(m[1]);
}

/** A load balancer in front of the instances: new requests go to `target`. */
class Balancer {
  target = '';
  /** Instances taken out (stopping): never picked again. */
  readonly out = new Set<string>();
  readonly failures: string[] = [];
  /** Stopping instances' 503s with Retry-After, each retried on the other instance. */
  drained503 = 0;
  /** Connections a stopped instance refused (the request never sent), retried on the other. */
  refused = 0;
  /** Requests sent to each instance and not yet answered (what a deploy's deregistration waits for). */
  readonly inFlight = new Map<string, number>();

  constructor(private readonly token: string) {}

  /** The request, through the balancer: a stopping instance's 503 (or refusal) is retried elsewhere. */
  async send(
    method: string,
    path: string,
    body?: unknown,
    extra: Record<string, string> = {},
  ): Promise<Answer | null> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const base = this.target;
      const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, ...extra };
      let a: Answer;
      this.inFlight.set(base, (this.inFlight.get(base) ?? 0) + 1);
      try {
        a = await send1(base + path, method, headers, body).answer;
      } catch (err) {
        const { code, syscall } = err as NodeJS.ErrnoException;
        // Never sent: refused once the instance stopped listening, or reset while connecting (the
        // connection reached the listen queue as the drained process exited, and the kernel reset
        // it); a balancer retries either elsewhere, as its health check takes the instance out.
        const unsent = code === 'ECONNREFUSED' || (code === 'ECONNRESET' && syscall === 'connect');
        if (unsent && this.stopping.has(base)) {
          this.refused++;
          this.out.add(base);
          if (this.target === base) this.target = this.other(base);
          continue;
        }
        this.failures.push(`${method} ${path} on ${base}: ${(err as Error).message}`);
        return null;
      } finally {
        this.inFlight.set(base, this.inFlight.get(base)! - 1);
      }
      if (a.status === 503 && a.headers['retry-after'] && this.stopping.has(base)) {
        this.drained503++;
        this.out.add(base);
        if (this.target === base) this.target = this.other(base);
        continue;
      }
      if (a.status >= 500) {
        this.failures.push(`${method} ${path} on ${base}: ${a.status} ${a.body}`);
        return null;
      }
      return a;
    }
    this.failures.push(`${method} ${path}: 5 attempts`);
    return null;
  }

  readonly stopping = new Set<string>();
  instances: string[] = [];
  private other(base: string): string {
    return this.instances.find((i) => i !== base && !this.out.has(i)) ?? base;
  }
}

interface Written {
  /** The plant's names as each acknowledged write left it, in order. */
  names: string[];
}

/** A writer: creates a plant, then patches it `patches` times, again and again, until stopped. */
async function writer(
  lb: Balancer,
  who: string,
  written: Map<number, Written>,
  acked: { n: number },
  stop: { now: boolean },
): Promise<void> {
  for (let round = 0; !stop.now; round++) {
    const name = `${who}-${round}`;
    const c = await lb.send('POST', '/plants', { name }, { 'idempotency-key': `${who}-create-${round}` });
    if (!c) continue;
    assert.equal(c.status, 201, c.body);
    const id = idOf(c);
    const w: Written = { names: [name] };
    let etag = c.headers.etag as string;
    written.set(id, w);
    acked.n++;
    for (let p = 1; p <= 2 && !stop.now; p++) {
      const next = `${name}.${p}`;
      const u = await lb.send('PATCH', `/plants/${id}`, { name: next }, { 'if-match': etag });
      if (!u) break;
      assert.equal(u.status, 200, u.body);
      etag = u.headers.etag as string;
      w.names.push(next);
      acked.n++;
    }
  }
}

async function reader(lb: Balancer, written: Map<number, Written>, stop: { now: boolean }): Promise<void> {
  while (!stop.now) {
    const ids = [...written.keys()];
    const path = ids.length > 0 ? `/plants/${ids[ids.length - 1]}` : '/plants?limit=5';
    const r = await lb.send('GET', path);
    if (r) assert.equal(r.status, 200, `${path}: ${r.body}`);
  }
}

/** The live stream: resumed with Last-Event-ID on the balancer's target whenever it ends. */
class Follower {
  readonly seen: { id: string; type: string; plant: number; name: string }[] = [];
  readonly opens: string[] = [];
  private current: SseReader | null = null;
  private closed = false;
  done: Promise<void> = Promise.resolve();

  constructor(
    private readonly lb: Balancer,
    private readonly token: string,
  ) {}

  async start(): Promise<void> {
    await this.open();
    this.done = this.follow();
  }

  private async open(): Promise<void> {
    const last = this.seen.at(-1)?.id;
    const base = this.lb.target;
    const s = await openStream(`${base}/events`, {
      authorization: `Bearer ${this.token}`,
      ...(last ? { 'last-event-id': last } : {}),
    });
    assert.equal(s.status, 200, `the stream on ${base}`);
    this.opens.push(base);
    this.current = s;
  }

  private async follow(): Promise<void> {
    let read = 0;
    for (;;) {
      const s = this.current!;
      const take = () => {
        for (const m of s.messages.slice(read)) {
          if (m.data === undefined) continue;
          const d = JSON.parse(m.data) as { data: { id: number; name: string } };
          this.seen.push({ id: m.id!, type: m.event!, plant: d.data.id, name: d.data.name });
        }
        read = s.messages.length;
      };
      await s.ended;
      take();
      if (this.closed) return;
      read = 0;
      // Ended by the stopping instance: resumed on the instance the balancer now sends to.
      await until('the stream to open again elsewhere', async () => {
        try {
          await this.open();
          return true;
        } catch {
          return false;
        }
      });
    }
  }

  /** Every event so far, as read from the open stream too. */
  snapshot(): string[] {
    const s = this.current!;
    const pending = s.messages.filter((m) => m.data !== undefined).map((m) => m.id!);
    return [...this.seen.map((e) => e.id), ...pending];
  }

  async close(): Promise<void> {
    this.closed = true;
    this.current?.close();
    await this.done;
  }
}

interface Scenario {
  engine: (typeof ENGINES)[number];
  /** Starts the instance serving first; `migrate` of this release runs with it serving. */
  oldBin: string;
  label: string;
}

async function rollingUpgrade({ engine, oldBin, label }: Scenario): Promise<void> {
  const db = await engine.database();
  const receiver = await startReceiver();
  const env: Record<string, string> = {
    DATABASE_URL: db.url,
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_RETRY_SCHEDULE: Array.from({ length: 30 }, () => '1s').join(','),
    RATE_LIMIT: '0',
    AUTH_FAILURE_LIMIT: '0',
  };
  const servers: Server[] = [];
  const follower: { f?: Follower } = {};
  try {
    // The store as the first instance's release makes it, with a token it made.
    const made = await cli(['migrate'], env, oldBin);
    assert.equal(made.code, 0, made.stderr);
    const tok = await cli(['token', 'create', '--user', 'alice', '--json'], env, oldBin);
    assert.equal(tok.code, 0, tok.stderr);
    const token = (JSON.parse(tok.stdout) as { token: string }).token;

    const first = await serve([], env, oldBin);
    servers.push(first);
    const lb = new Balancer(token);
    lb.target = first.url;
    lb.instances = [first.url];
    const hook = await lb.send('POST', '/webhooks', { url: receiver.url, description: 'upgrade' });
    assert.equal(hook?.status, 201, hook?.body);

    const f = new Follower(lb, token);
    follower.f = f;
    await f.start();
    const written = new Map<number, Written>();
    const acked = { n: 0 };
    const stop = { now: false };
    const load = Promise.all([
      writer(lb, 'w1', written, acked, stop),
      writer(lb, 'w2', written, acked, stop),
      reader(lb, written, stop),
    ]);
    const reached = (n: number, what: string) => until(what, () => acked.n >= n, 30_000);
    try {
      await reached(30, `30 acknowledged writes on ${label}'s first instance`);

      // What the operator reads first, then this release's migrate, while the first instance
      // serves under the load.
      const plan = await cli(['migrate', '--dry-run', '--json'], env);
      assert.equal(plan.code, 0, plan.stderr);
      const pending = plan.stdout
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { version: number; safeWhileServing: boolean });
      if (oldBin !== BIN && engine.name === 'postgres')
        assert.deepEqual(
          pending.map((m) => [m.version, m.safeWhileServing]),
          [
            [13, true],
            [14, false],
            [15, true],
            [16, true],
            [17, true],
          ],
        );
      const migrated = await cli(['migrate'], env);
      assert.equal(migrated.code, 0, migrated.stderr);
      const dry = await cli(['migrate', '--dry-run'], env);
      assert.match(dry.stderr, /schema is up to date/, dry.stderr);

      // This release beside it; traffic moves to it.
      const second = await serve([], env);
      servers.push(second);
      lb.instances = [first.url, second.url];
      await reached(acked.n + 20, 'writes acknowledged by both instances');

      // A create in flight on the first instance (taken in, its body half sent) as it is stopped.
      const held = send1(
        `${first.url}/plants`,
        'POST',
        { authorization: `Bearer ${token}`, 'x-request-id': `held-${label}` },
        { name: 'held' },
        true,
      );
      await until('the first instance to take the held create in', () =>
        first.logs.some((l) => l.includes(`held-${label}`)),
      );

      const stoppingUnderWrites = oldBin === BIN;
      if (!stoppingUnderWrites) {
        // A deploy moves traffic first, and stops the old instance once what it was sending there
        // has been answered (a balancer's deregistration delay): 0.4.0 predates the drain of 14.2,
        // and a request reaching it after SIGTERM gets Fastify's 503 without Retry-After.
        lb.target = second.url;
        await until(
          'the requests sent to 0.4.0 to be answered',
          () => (lb.inFlight.get(first.url) ?? 0) === 0,
        );
      }
      lb.stopping.add(first.url);
      first.child.kill('SIGTERM');
      const exited = exitOf(first.child, `${label}'s first instance after SIGTERM`, 10_000);
      if (!stoppingUnderWrites) lb.out.add(first.url);
      // Under writes, the held create keeps the drain open: the writers' next request to the
      // stopping instance is answered 503 with Retry-After (and retried on the second) before the
      // held one is let finish, rather than racing it.
      if (stoppingUnderWrites)
        await until(
          'the stopping instance to answer a request 503 with Retry-After',
          () => lb.drained503 > 0,
        );
      held.finish();
      const heldAnswer = await held.answer;
      assert.equal(heldAnswer.status, 201, heldAnswer.body);
      const heldId = idOf(heldAnswer);
      written.set(heldId, { names: ['held'] });
      assert.equal(await exited, 0, `${label}'s first instance exits 0 after SIGTERM`);
      assert.equal(lb.target, second.url, 'the traffic is on the second instance');

      await reached(acked.n + 20, 'writes acknowledged after the first instance stopped');
      stop.now = true;
      await load;
      if (stoppingUnderWrites)
        assert.ok(lb.drained503 > 0, 'the stopping instance answered 503 with Retry-After');
    } finally {
      stop.now = true;
      await load.catch(() => {});
    }
    assert.deepEqual(lb.failures, [], 'zero failed operations');

    // Every acknowledged write, readable on the new instance as acknowledged.
    for (const [id, w] of written) {
      const r = await lb.send('GET', `/plants/${id}`);
      assert.equal(r?.status, 200, `plant ${id}: ${r?.body}`);
      assert.equal((JSON.parse(r!.body) as { name: string }).name, w.names.at(-1), `plant ${id}`);
    }

    // The stream: every write's event, once each, each plant's in the order of its writes.
    const expected = [...written.values()].reduce((n, w) => n + w.names.length, 0);
    await until(
      'the stream to carry every acknowledged write',
      () => f.snapshot().length >= expected,
      30_000,
    );
    await f.close();
    follower.f = undefined;
    const ids = f.seen.map((e) => e.id);
    assert.equal(new Set(ids).size, ids.length, 'every event id seen once');
    assert.ok(f.opens.length >= 2 && f.opens.at(-1) !== f.opens[0], `the stream resumed: ${f.opens}`);
    const byPlant = new Map<number, string[]>();
    for (const e of f.seen) {
      if (!e.type.startsWith('plant.')) continue;
      byPlant.set(e.plant, [...(byPlant.get(e.plant) ?? []), e.name]);
    }
    for (const [id, w] of written)
      assert.deepEqual(byPlant.get(id), w.names, `plant ${id}'s events in order`);
    assert.equal(
      [...byPlant.values()].reduce((n, v) => n + v.length, 0),
      expected,
      'no event of a write not acknowledged',
    );

    // Every event delivered to the webhook endpoint (by whichever instance).
    await until(
      'every event delivered to the webhook receiver',
      () => {
        const got = new Set(receiver.received.map((d) => d.headers['webhook-id'] as string));
        return ids.every((id) => got.has(id));
      },
      30_000,
    );
  } finally {
    await follower.f?.close().catch(() => {});
    for (const s of servers) await s.stop();
    await receiver.close();
    await db.drop();
  }
}

describe('rolling upgrade', () => {
  for (const engine of ENGINES) {
    if (engine.name === 'postgres')
      it('postgres: 0.4.0 serving under load, this release migrates, starts beside it, takes the traffic; 0.4.0 stopped with a request in flight', {
        skip: engine.skip,
        timeout: 240_000,
      }, async () => {
        const old = await oldVersion(OLD_COMMIT);
        await rollingUpgrade({ engine, oldBin: old.bin, label: 'postgres' });
      });
    else
      it('sqlite: two processes of this release on one file, the first stopped with SIGTERM under writes', {
        timeout: 120_000,
      }, async () => {
        await rollingUpgrade({ engine, oldBin: BIN, label: 'sqlite' });
      });
  }
});
