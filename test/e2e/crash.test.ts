import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { sqlitePath } from '../../src/store/index.js';
import { ENGINES } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';
import { cli, serve } from './process.js';

const KILLS = 20;

for (const engine of ENGINES) {
  describe(`kill -9 under write load (${engine.name})`, { skip: engine.skip }, () => {
    const env = { DATABASE_URL: '' };
    let drop = async () => {};
    before(async () => {
      const db = await engine.database();
      env.DATABASE_URL = db.url;
      drop = db.drop;
    });
    after(() => drop());

    it(`loses no acknowledged create or delete across ${KILLS} crashes`, async (t) => {
      const token = (await cli(['token', 'create', '--user', 'crash'], env)).stdout.trim();
      const headers = { authorization: `Bearer ${token}` };
      const live = new Set<number>(); // acknowledged created, not acknowledged deleted
      const gone = new Set<number>(); // acknowledged deleted
      const uncertain = new Set<number>(); // a delete was sent but never answered
      let acknowledged = 0; // creates and deletes answered 201 / 204, every round

      for (let round = 0; round < KILLS; round++) {
        const server = await serve([], { ...env, LOG_LEVEL: 'info' });
        try {
          // What every earlier round acknowledged is still exactly there.
          for (const id of live) {
            if (uncertain.has(id)) continue;
            const res = await fetch(`${server.url}/plants/${id}`, { headers });
            assert.equal(res.status, 200, `acknowledged plant ${id} lost after crash ${round}`);
          }
          for (const id of gone) {
            assert.equal(
              (await fetch(`${server.url}/plants/${id}`, { headers })).status,
              404,
              `deleted ${id} came back`,
            );
          }
          let stop = false;
          const worker = async (w: number) => {
            for (let i = 0; !stop; i++) {
              try {
                const victim = i % 3 === 2 ? [...live].find((id) => !uncertain.has(id)) : undefined;
                if (victim !== undefined) {
                  uncertain.add(victim);
                  const res = await fetch(`${server.url}/plants/${victim}`, { method: 'DELETE', headers });
                  if (res.status === 204) {
                    acknowledged++;
                    live.delete(victim);
                    gone.add(victim);
                    uncertain.delete(victim);
                  }
                } else {
                  const res = await fetch(`${server.url}/plants`, {
                    method: 'POST',
                    headers: { ...headers, 'content-type': 'application/json' },
                    body: JSON.stringify({ name: `r${round}-w${w}-${i}` }),
                  });
                  if (res.status === 201) {
                    acknowledged++;
                    live.add(Number(/[0-9]+$/.exec(res.headers.get('location')!)![0]));
                  }
                }
              } catch {
                return; // the server died under us
              }
            }
          };
          const workers = Array.from({ length: 8 }, (_, w) => worker(w));
          // Killed mid-write once this round has had a random number of writes acknowledged.
          const target = acknowledged + 20 + Math.floor(Math.random() * 100);
          await until(
            `round ${round}: acknowledged writes to reach ${target}`,
            () => acknowledged >= target,
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
      t.diagnostic(`${live.size + gone.size} acknowledged creates and deletes across ${KILLS} crashes`);
      assert.ok(
        live.size + gone.size > KILLS * 10,
        `too little was acknowledged to prove anything (${live.size + gone.size})`,
      );

      if (engine.name === 'sqlite') {
        const db = new Database(sqlitePath(env.DATABASE_URL), { readonly: true });
        assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
        db.close();
      }
    });
  });
}
