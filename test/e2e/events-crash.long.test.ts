import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ENGINES } from '../helpers/engines.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';
import { cli, serve, spawnBin } from './process.js';

/** A database of the engine's and a receiver, for one describe; `receiver` is a getter's proxy. */
function attached(engine: (typeof ENGINES)[number], extra: Record<string, string>) {
  const env: Record<string, string> = {
    DATABASE_URL: '',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_RETRY_SCHEDULE: '100ms,200ms,500ms,1s,1s,1s,1s,1s,1s,1s',
    RATE_LIMIT: '0',
    ...extra,
  };
  let drop = async () => {};
  let current: Receiver | undefined;
  before(async () => {
    const db = await engine.database();
    env.DATABASE_URL = db.url;
    drop = db.drop;
    current = await startReceiver();
  });
  after(async () => {
    await current?.close();
    await drop();
  });
  // Read once the receiver is started (inside the tests).
  const receiver = new Proxy({} as Receiver, { get: (_, key) => Reflect.get(current!, key) });
  return { env, receiver };
}

// The long tier (npm run test:long): 12 crashes on each engine (20 took CI past 50 minutes on a
// slow machine; each crash is a server start, most of its time).
const KILLS = 12;

// At least once, across crashes: every create and delete that was acknowledged reaches the
// receiver, however often the process is killed in the middle of writing and delivering.
for (const engine of ENGINES) {
  describe(`kill -9 with a webhook receiver attached (${engine.name})`, { skip: engine.skip }, () => {
    const { env, receiver } = attached(engine, { WEBHOOK_TIMEOUT: '2s' });

    // Generous: 20 restarts of a server, under load on a busy machine, take 1-2 minutes.
    it(`every acknowledged create's, change's and delete's event is delivered across ${KILLS} crashes`, {
      timeout: 6 * 60_000,
    }, async (t) => {
      const token = (await cli(['token', 'create', '--user', 'crash-events'], env)).stdout.trim();
      const headers = { authorization: `Bearer ${token}` };
      const acknowledged = new Set<string>(); // `${type} ${plant id}` (and the new name, for a change)
      let secret = '';

      for (let round = 0; round < KILLS; round++) {
        const server = await serve([], env);
        try {
          if (round === 0) {
            const res = await fetch(`${server.url}/webhooks`, {
              method: 'POST',
              headers: { ...headers, 'content-type': 'application/json' },
              body: JSON.stringify({ url: receiver.url }),
            });
            assert.equal(res.status, 201);
            secret = ((await res.json()) as { secret: string }).secret;
          }
          let stop = false;
          const live: number[] = [];
          const worker = async (w: number) => {
            for (let i = 0; !stop; i++) {
              try {
                const victim = i % 3 === 2 ? live.shift() : undefined;
                const changed = i % 3 === 1 ? live[live.length - 1] : undefined;
                if (changed !== undefined) {
                  const name = `u-r${round}-w${w}-${i}`;
                  const res = await fetch(`${server.url}/plants/${changed}`, {
                    method: 'PATCH',
                    headers: {
                      ...headers,
                      'content-type': 'application/merge-patch+json',
                      'if-match': '*',
                    },
                    body: JSON.stringify({ name }),
                  });
                  if (res.status === 200) acknowledged.add(`plant.updated ${changed} ${name}`);
                } else if (victim !== undefined) {
                  const res = await fetch(`${server.url}/plants/${victim}`, { method: 'DELETE', headers });
                  if (res.status === 204) acknowledged.add(`plant.deleted ${victim}`);
                } else {
                  const res = await fetch(`${server.url}/plants`, {
                    method: 'POST',
                    headers: { ...headers, 'content-type': 'application/json' },
                    body: JSON.stringify({ name: `r${round}-w${w}-${i}` }),
                  });
                  if (res.status === 201) {
                    const id = Number(/[0-9]+$/.exec(res.headers.get('location')!)![0]);
                    acknowledged.add(`plant.created ${id}`);
                    live.push(id);
                  }
                }
              } catch {
                return; // the server died under us
              }
            }
          };
          const workers = Array.from({ length: 6 }, (_, w) => worker(w));
          // Killed mid-write once this round has had a random number of changes acknowledged.
          const target = acknowledged.size + 20 + Math.floor(Math.random() * 100);
          await until(
            `round ${round}: acknowledged changes to reach ${target}`,
            () => acknowledged.size >= target,
            30_000,
          );
          const exited = once(server.child, 'exit');
          server.child.kill('SIGKILL');
          stop = true;
          await Promise.all(workers);
          await exited;
        } finally {
          server.child.kill('SIGKILL');
        }
      }
      const changes = [...acknowledged].filter((k) => k.startsWith('plant.updated')).length;
      assert.ok(
        acknowledged.size > KILLS * 10 && changes > KILLS * 3,
        `too little was acknowledged (${acknowledged.size}, ${changes} changes)`,
      );

      // A last process finishes what the killed ones left: their leases run out (timeout + 10 s).
      const last = await serve([], env);
      try {
        const got = new Set<string>();
        let seen = 0; // deliveries verified so far
        let missing = [...acknowledged];
        await until(
          'every acknowledged change to be delivered',
          () => {
            for (const d of receiver.received.slice(seen)) {
              const e = new Webhook(secret).verify(d.body, d.headers as Record<string, string>) as {
                type: string;
                data: { id: number; name: string };
              };
              got.add(`${e.type} ${e.data.id}${e.type === 'plant.updated' ? ` ${e.data.name}` : ''}`);
            }
            seen = receiver.received.length;
            missing = missing.filter((k) => !got.has(k));
            return missing.length === 0;
          },
          60_000,
        ).catch((err) => {
          throw new Error(`${(err as Error).message}: ${missing.length} acknowledged events never delivered`);
        });
        assert.deepEqual(missing, []);
        const ids = receiver.received.map((d) => d.headers['webhook-id']);
        const duplicates = ids.length - new Set(ids).size;
        t.diagnostic(
          `${acknowledged.size} acknowledged changes, ${receiver.received.length} deliveries, ${duplicates} duplicates, 0 missing`,
        );
      } finally {
        await last.stop();
      }
    });
  });
}

// The same guarantee with delivery in processes of its own: `serve --no-webhook-delivery` writes
// the events, `plantstore deliver` sends them, and each deliverer is killed in the middle of its
// batches (deliveries sent and not yet recorded, claimed and not yet sent).
for (const engine of ENGINES) {
  describe(`kill -9 of deliver processes (${engine.name})`, { skip: engine.skip }, () => {
    const { env, receiver } = attached(engine, { WEBHOOK_TIMEOUT: '1s', WEBHOOK_DELIVERY: 'false' });

    it('every event is delivered although each deliverer dies mid-batch', {
      timeout: 3 * 60_000,
    }, async () => {
      const token = (await cli(['token', 'create', '--user', 'crash-deliver'], env)).stdout.trim();
      const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      const server = await serve([], env);
      try {
        for (let i = 0; i < 5; i++) {
          const res = await fetch(`${server.url}/webhooks`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ url: `${receiver.url}/${i}` }),
          });
          assert.equal(res.status, 201);
        }
        const created: number[] = [];
        await Promise.all(
          Array.from({ length: 8 }, async (_, w) => {
            for (let i = 0; i < 40; i++) {
              const res = await fetch(`${server.url}/plants`, {
                method: 'POST',
                headers,
                body: JSON.stringify({ name: `d-${w}-${i}` }),
              });
              assert.equal(res.status, 201);
              created.push(Number(/[0-9]+$/.exec(res.headers.get('location')!)![0]));
            }
          }),
        );
        // The server sends nothing itself.
        assert.equal(receiver.received.length, 0);
        const want = new Set(created.flatMap((id) => [0, 1, 2, 3, 4].map((e) => `/hook/${e} ${id}`)));
        const got = () =>
          new Set(
            receiver.received.map(
              (d) => `${d.path} ${(JSON.parse(d.body) as { data: { id: number } }).data.id}`,
            ),
          );
        for (let k = 0; k < Math.min(KILLS, 4); k++) {
          const deliverer = spawnBin(['deliver'], env);
          const from = receiver.received.length;
          await until(`deliverer ${k} to send some`, () => receiver.received.length >= from + 50, 60_000);
          const exited = once(deliverer, 'exit');
          deliverer.kill('SIGKILL');
          await exited;
        }
        // A last deliverer takes over what the killed ones leased, once the leases run out.
        const last = spawnBin(['deliver'], env);
        try {
          let missing: string[] = [];
          await until(
            'every event to reach every endpoint',
            () => {
              const seen = got();
              missing = [...want].filter((k) => !seen.has(k));
              return missing.length === 0;
            },
            90_000,
          ).catch((err) => {
            throw new Error(`${(err as Error).message}: ${missing.length} deliveries never made`);
          });
        } finally {
          const exited = once(last, 'exit');
          last.kill('SIGTERM');
          await exited;
        }
      } finally {
        await server.stop();
      }
    });
  });
}
