import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Dispatcher } from '../../src/events/dispatcher.js';
import type { Store } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { endpoint, home, plant, user } from '../helpers/gardens.js';
import { startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';

// One busy endpoint: the dispatcher reads its log ahead of its free slots, yet never has more than
// perEndpoint requests open at the receiver, sends every delivery once (no crash, no retry), records
// every attempt once (many per write), and the endpoint's progress with them.
for (const engine of ENGINES) {
  describe(`dispatcher, one busy endpoint (${engine.name})`, { skip: engine.skip }, () => {
    let store: Store;
    let server: Server;
    let url = '';
    let open = 0;
    let most = 0;
    const received: string[] = [];
    before(async () => {
      store = await engine.open();
      server = createServer((req, res) => {
        most = Math.max(most, ++open);
        req.resume().on('end', () => {
          received.push(req.headers['webhook-id'] as string);
          // Answered on the next turn: requests that overlap are seen overlapping.
          setImmediate(() => {
            open--;
            res.writeHead(204).end();
          });
        });
      });
      await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    });
    after(async () => {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
      await store?.close();
    });

    it('sends each delivery once, at most perEndpoint at a time, and logs each attempt once', async () => {
      const o = user();
      const g = await home(store, o);
      const e = await endpoint(store, o, { events: ['plant.created'] });
      // The endpoint's URL: the helper's is a placeholder, so register one of our own.
      const mine = { ...e, id: `${e.id}-local`, url };
      await store.insertEndpoint(mine);
      await store.deleteEndpoint(e.id);
      const n = 60;
      await Promise.all(
        Array.from({ length: n }, (_, i) => plant(store, o, g, { name: `p${i}`, at: new Date() })),
      );
      const dispatcher = new Dispatcher({
        store,
        timeoutMs: 5_000,
        schedule: [60_000],
        allowPrivate: true,
        pollMs: 20,
        concurrency: 8,
        perEndpoint: 3,
      });
      dispatcher.start();
      try {
        await until('every delivery to arrive', () => received.length >= n, 30_000);
        const logged = await until(
          'every attempt to be logged',
          async () => {
            const got = await store.listAttempts(mine.id, { limit: 1000, beforeId: null });
            return got.length >= n && got;
          },
          30_000,
        );
        assert.equal(new Set(received).size, n, 'each event once');
        assert.equal(received.length, n, 'no delivery twice');
        assert.equal(logged.length, n);
        assert.equal(new Set(logged.map((a) => a.eventId)).size, n, 'each attempt logged once');
        assert.ok(logged.every((a) => a.outcome === 'succeeded' && a.attempt === 1 && a.deliveryId === null));
        assert.ok(most <= 3, `at most perEndpoint open at once (saw ${most})`);
      } finally {
        await dispatcher.stop();
      }
      // Its progress was recorded to the end: an hour on (every lease run out), nothing is left.
      assert.deepEqual(await claimMine(mine.id), []);
    });

    it('a delivery in flight holds the position back while later ones finish; it times out, is retried, nothing is lost', async () => {
      const o = user();
      const g = await home(store, o);
      const receiver = await startReceiver();
      try {
        const e = await endpoint(store, o, { events: ['plant.created'] });
        const mine = { ...e, id: `${e.id}-local`, url: receiver.url };
        await store.insertEndpoint(mine);
        await store.deleteEndpoint(e.id);
        const n = 8;
        for (let i = 0; i < n; i++) await plant(store, o, g, { name: `h${i}`, at: new Date() });
        // The first never answers (it times out); the rest answer at once.
        receiver.answers.push('hang');
        const dispatcher = new Dispatcher({
          store,
          timeoutMs: 500,
          schedule: [20],
          allowPrivate: true,
          pollMs: 20,
          concurrency: 8,
          perEndpoint: 2,
        });
        dispatcher.start();
        try {
          const logged = await until(
            'every event acknowledged',
            async () => {
              const got = await store.listAttempts(mine.id, { limit: 1000, beforeId: null });
              const acked = new Set(got.filter((a) => a.outcome === 'succeeded').map((a) => a.eventId));
              return acked.size >= n && got;
            },
            30_000,
          );
          const retried = logged.filter((a) => a.outcome === 'retrying');
          assert.equal(retried.length, 1, 'the one that timed out');
          assert.equal(retried[0]!.deliveryId, null, 'its first attempt came from the log');
          const again = logged.filter((a) => a.eventId === retried[0]!.eventId && a.outcome === 'succeeded');
          assert.equal(again.length, 1);
          assert.equal(again[0]!.attempt, 2);
          assert.ok(again[0]!.deliveryId !== null, 'retried as a queued delivery');
          assert.equal(logged.length, n + 1, 'no event sent twice besides the retry');
        } finally {
          await dispatcher.stop();
        }
        assert.deepEqual(await claimMine(mine.id), []);
      } finally {
        await receiver.close();
      }
    });

    // What another dispatcher would claim of this endpoint an hour on (every lease run out).
    const claimMine = async (id: string) =>
      (
        await store.claimDeliveries({
          now: new Date(Date.now() + 3_600_000),
          leaseMs: 1000,
          leaseOwner: 'after',
          limit: 1000,
          perEndpoint: 1000,
          skipEndpoints: [],
        })
      ).jobs.filter((j) => j.endpoint.id === id);
  });
}
