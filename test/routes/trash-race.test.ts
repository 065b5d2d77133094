// Contract 13.2 across instances: two app instances on one store (two PostgreSQL pools on one
// database; two SQLite stores, each with its writer, on one file) act on the same trashed plant at
// the same moment. Two restores: exactly one answers 200, the other 404 (the entry is gone), and
// the plant is back once, with one plant.restored. A restore and a purge: exactly one wins; the
// plant is then either live (and the purge 404) or gone for good (and the restore 404), never both
// nor neither. Rounds repeat each race, so both orders get their chance.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { buildApp } from '../../src/app.js';
import { testConfig } from '../../src/config.js';
import { createToken } from '../../src/identity/tokens.js';
import { locationId } from '../helpers/app.js';
import { ENGINES, twoInstances } from '../helpers/engines.js';

const ROUNDS = 8;

for (const engine of ENGINES) {
  describe(`the trash across two instances (${engine.name})`, { skip: engine.skip, timeout: 120_000 }, () => {
    it('two restores at once: one 200, one 404, the plant back once; a restore and a purge: exactly one wins', async () => {
      const { stores, close } = await twoInstances(engine.name);
      const apps: FastifyInstance[] = [];
      try {
        for (const store of stores) apps.push(await buildApp(testConfig({}), { store }));
        const { secret } = await createToken(stores[0]!, {
          user: 'racer',
          scopes: ['plants:read', 'plants:write'],
          name: null,
          expiresInMs: null,
        });
        const on = (i: number) => (opts: InjectOptions) =>
          apps[i]!.inject({
            ...opts,
            headers: { authorization: `Bearer ${secret}`, ...(opts.headers ?? {}) },
          });
        const [a, b] = [on(0), on(1)];
        const trashed = async (name: string) => {
          const made = await a({
            method: 'POST',
            url: '/plants',
            headers: { 'content-type': 'application/json' },
            payload: JSON.stringify({ name }),
          });
          assert.equal(made.statusCode, 201, made.body);
          const id = locationId(made);
          assert.equal((await b({ method: 'DELETE', url: `/plants/${id}` })).statusCode, 204);
          return id;
        };
        const restoredEvents = async (id: number) => {
          const res = await a({ method: 'GET', url: `/plants/${id}/history?limit=100` });
          assert.equal(res.statusCode, 200, res.body);
          return (res.json() as { type: string }[]).filter((e) => e.type === 'plant.restored').length;
        };

        for (let round = 0; round < ROUNDS; round++) {
          const id = await trashed(`Twice restored ${round}`);
          const answers = await Promise.all(
            [a, b].map((c) => c({ method: 'POST', url: `/trash/${id}/restore` })),
          );
          const codes = answers.map((r) => r.statusCode).sort();
          assert.deepEqual(codes, [200, 404], answers.map((r) => r.body).join(' | '));
          const live = await b({ method: 'GET', url: `/plants/${id}` });
          assert.equal(live.statusCode, 200, live.body);
          assert.equal(live.json().name, `Twice restored ${round}`);
          assert.equal(await restoredEvents(id), 1);
          const trash = await a({ method: 'GET', url: '/trash?limit=100' });
          assert.ok(!(trash.json() as { id: number }[]).some((e) => e.id === id), 'no longer in the trash');
        }

        const winners = { restore: 0, purge: 0 };
        for (let round = 0; round < ROUNDS; round++) {
          const id = await trashed(`Restore or purge ${round}`);
          // Alternate which instance restores, so each side's writer goes first in some rounds.
          const [restorer, purger] = round % 2 === 0 ? [a, b] : [b, a];
          const [restore, purge] = await Promise.all([
            restorer({ method: 'POST', url: `/trash/${id}/restore` }),
            purger({ method: 'DELETE', url: `/trash/${id}` }),
          ]);
          const live = await a({ method: 'GET', url: `/plants/${id}` });
          const inTrash = (
            (await b({ method: 'GET', url: '/trash?limit=100' })).json() as { id: number }[]
          ).some((e) => e.id === id);
          assert.equal(inTrash, false, 'the entry is gone either way');
          if (restore.statusCode === 200) {
            winners.restore++;
            assert.equal(purge.statusCode, 404, purge.body);
            assert.equal(live.statusCode, 200, 'restored: live');
          } else {
            winners.purge++;
            assert.equal(restore.statusCode, 404, restore.body);
            assert.equal(purge.statusCode, 204, purge.body);
            assert.equal(live.statusCode, 404, 'purged: gone');
          }
        }
        assert.equal(winners.restore + winners.purge, ROUNDS);
      } finally {
        for (const app of apps) await app.close();
        await close();
      }
    });
  });
}
