import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Dispatcher } from '../../src/events/dispatcher.js';
import type { Store } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';
import { endpoint, home, plant, user } from '../helpers/gardens.js';
import { until } from '../helpers/wait.js';

// One busy endpoint: the dispatcher claims ahead of its free slots, yet never has more than
// perEndpoint requests open at the receiver, sends every delivery once (no crash, no retry), and
// records every attempt once (many per write).
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
        assert.equal(new Set(logged.map((a) => a.deliveryId)).size, n, 'each attempt logged once');
        assert.ok(logged.every((a) => a.outcome === 'succeeded' && a.attempt === 1));
        assert.ok(most <= 3, `at most perEndpoint open at once (saw ${most})`);
      } finally {
        await dispatcher.stop();
      }
    });
  });
}
