import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { CLUSTER_SKIP, type Cluster, freePort, primaryAndStandby } from '../helpers/pg-cluster.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { openStream } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';
import { cli, type Server, serve } from './process.js';

// Several PostgreSQL hosts (contract section 6): real clusters, a primary and a synchronous
// standby. A host list whose first host is down at start-up; the primary killed (kill -9) under 20
// writers and the standby promoted: the service carries on with no restart, answering only 201 or
// 503, and every create it acknowledged is on the new primary; the old primary back as a read-only
// standby is passed over; every host down gives 503 (and /readyz 503), then service again.

describe('several PostgreSQL hosts: failover', { skip: CLUSTER_SKIP }, () => {
  let ha: Awaited<ReturnType<typeof primaryAndStandby>>;
  let env: Record<string, string>;
  let token: string;
  let watcher: string;
  let receiver: Receiver;
  const servers: Server[] = [];
  before(async () => {
    receiver = await startReceiver();
    ha = await primaryAndStandby();
    const hosts = [
      `127.0.0.1:${await freePort()}`,
      `127.0.0.1:${ha.primary.port}`,
      `127.0.0.1:${ha.standby.port}`,
    ];
    env = {
      DATABASE_URL: `postgres://postgres@${hosts.join(',')}/postgres`,
      RATE_LIMIT: '0',
      LOG_LEVEL: 'info',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_SCHEDULE: '200ms,500ms,1s,1s,1s,1s,1s,1s,1s,1s',
    };
    const made = await cli(['token', 'create', '--user', 'writer'], env);
    assert.equal(made.code, 0, made.stderr);
    token = made.stdout.trim();
    watcher = (await cli(['token', 'create', '--user', 'watcher'], env)).stdout.trim();
  });
  after(async () => {
    for (const s of servers) {
      const code = await s.stop();
      // What a server said of itself beyond its requests, when it did not end as asked.
      if (code !== 0)
        console.error(
          `serve exited ${code}:`,
          s.stderr(),
          s.logs
            .filter((l) => !l.includes('"level":30'))
            .slice(-20)
            .join('\n'),
        );
    }
    await ha?.close();
    await receiver?.close();
  });

  const create = async (url: string, name: string, as = token) => {
    try {
      const res = await fetch(`${url}/plants`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${as}`,
          'content-type': 'application/json',
          'idempotency-key': name,
        },
        body: JSON.stringify({ name }),
        signal: AbortSignal.timeout(20_000),
      });
      await res.arrayBuffer();
      return res.status;
    } catch (err) {
      return `no answer: ${(err as Error).message}`;
    }
  };
  const names = async (c: Cluster) =>
    new Set((await c.query<{ name: string }>('SELECT name FROM plants')).map((r) => r.name));

  it('starts with its first host down, and survives the primary killed under 20 writers', async () => {
    const server = await serve([], env);
    servers.push(server);
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
    // Another user's webhook endpoint and live stream, both to go on across the switch.
    const hook = await fetch(`${server.url}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${watcher}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${receiver.url}/hook`, events: ['plant.created'] }),
    });
    assert.equal(hook.status, 201, await hook.text());
    const stream = await openStream(`${server.url}/events`, { authorization: `Bearer ${watcher}` });
    const acknowledged: string[] = [];
    const answers = new Map<string | number, number>();
    let stop = false;
    let afterPromotion = 0;
    let promoted = false;
    const writer = async (w: number) => {
      for (let n = 0; !stop; n++) {
        const name = `w${w}-${n}-${randomUUID().slice(0, 8)}`;
        const status = await create(server.url, name);
        answers.set(status, (answers.get(status) ?? 0) + 1);
        if (status === 201) {
          acknowledged.push(name);
          if (promoted) afterPromotion++;
        }
      }
    };
    const writers = Array.from({ length: 20 }, (_, w) => writer(w));
    try {
      await until('200 creates on the first primary', () => acknowledged.length >= 200, 30_000);
      await ha.primary.kill9();
      await ha.standby.promote();
      promoted = true;
      await until('creates acknowledged by the promoted standby', () => afterPromotion >= 200, 30_000);
    } finally {
      stop = true;
      await Promise.all(writers);
    }
    // Events written on the new primary reach the open stream (its LISTEN connection found the new
    // primary) and the webhook endpoint (the dispatcher's claims did).
    const marker = `after-the-switch-${randomUUID()}`;
    assert.equal(await create(server.url, marker, watcher), 201);
    await until(
      'the stream event of a plant made after the switch',
      () => stream.messages.some((m) => m.data?.includes(marker)),
      30_000,
    );
    stream.close();
    await until(
      'the webhook delivery of a plant made after the switch',
      () => receiver.received.some((d) => d.body.includes(marker)),
      30_000,
    );
    const statuses = [...answers.keys()];
    assert.ok(
      statuses.every((s) => s === 201 || s === 503),
      `answers: ${JSON.stringify([...answers])}`,
    );
    const stored = await names(ha.standby);
    const lost = acknowledged.filter((n) => !stored.has(n));
    assert.deepEqual(lost, [], `${lost.length} of ${acknowledged.length} acknowledged creates lost`);
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
  });

  it('passes over the old primary come back as a read-only standby', async () => {
    await ha.primary.startAsStandby(ha.standby);
    await until(
      'the old primary in recovery',
      async () => {
        const rows = await ha.primary
          .query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r')
          .catch(() => []);
        return rows[0]?.r === true;
      },
      30_000,
    );
    // A new instance walks the list from its start: the dead host, the old primary (read-only), then
    // the new primary.
    const second = await serve([], env);
    servers.push(second);
    for (let i = 0; i < 20; i++) assert.equal(await create(second.url, `second-${i}`), 201);
    const stored = await names(ha.standby);
    for (let i = 0; i < 20; i++) assert.ok(stored.has(`second-${i}`));
  });

  it('answers 503 while every host is down, and serves again when one is back', async () => {
    const server = servers[0]!;
    await ha.standby.stop();
    await ha.primary.stop();
    const started = Date.now();
    assert.equal(await create(server.url, 'while-down'), 503);
    assert.ok(Date.now() - started < 15_000, 'a bounded wait, not a hang');
    assert.equal((await fetch(`${server.url}/readyz`)).status, 503);
    await ha.standby.start();
    await until(
      'a create acknowledged again',
      async () => (await create(server.url, `back-${randomUUID()}`)) === 201,
      30_000,
    );
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
  });
});
