import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ENGINES } from '../helpers/engines.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { openStream, type SseReader } from '../helpers/sse.js';
import { cli, type Server, serve } from './process.js';

const pg = ENGINES.find((e) => e.name === 'postgres')!;

describe('events across two instances on PostgreSQL', { skip: pg.skip }, () => {
  const servers: Server[] = [];
  const readers: SseReader[] = [];
  let receiver: Receiver;
  let drop = async () => {};
  let token = '';
  const env: Record<string, string> = { WEBHOOK_ALLOW_PRIVATE: 'true', RATE_LIMIT: '0' };

  before(async () => {
    const db = await pg.database();
    env.DATABASE_URL = db.url;
    drop = db.drop;
    receiver = await startReceiver();
    servers.push(await serve([], env), await serve([], env));
    token = (await cli(['token', 'create', '--user', 'scale-events'], env)).stdout.trim();
  });
  after(async () => {
    for (const r of readers) r.close();
    for (const s of servers) await s.stop();
    await receiver?.close();
    await drop();
  });

  const create = (i: number, name: string) =>
    fetch(`${servers[i]!.url}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    });

  it('a create on one instance reaches a stream on the other within 1 s', async (t) => {
    const stream = await openStream(`${servers[1]!.url}/events`, { authorization: `Bearer ${token}` });
    readers.push(stream);
    assert.equal(stream.status, 200);
    const lags: number[] = [];
    for (let i = 0; i < 5; i++) {
      const sent = Date.now();
      assert.equal((await create(0, `across-${i}`)).status, 201);
      const got = await stream.waitFor(i + 1, 5_000);
      assert.equal(JSON.parse(got[i]!.data!).data.name, `across-${i}`);
      lags.push(Date.now() - sent);
    }
    lags.sort((a, b) => a - b);
    t.diagnostic(`create → other instance's stream: ${lags.join(', ')} ms`);
    assert.ok(lags[2]! <= 1_000, `median ${lags[2]} ms`);
  });

  it('two dispatchers share one queue: every event delivered, none twice', async () => {
    const res = await fetch(`${servers[0]!.url}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url }),
    });
    assert.equal(res.status, 201);
    const n = 60;
    await Promise.all(Array.from({ length: n }, (_, i) => create(i % 2, `shared-${i}`)));
    await receiver.waitFor(n, 15_000);
    await sleep(500);
    const ids = receiver.received.map((d) => d.headers['webhook-id']);
    assert.equal(ids.length, n);
    assert.equal(new Set(ids).size, n);
  });
});
