import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { sqlitePath } from '../../src/store/index.js';
import { ENGINES } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';
import { cli, serve } from './process.js';

// The long tier (npm run test:long): 12 crashes on each engine (20 took CI past 50 minutes on a
// slow machine; each crash is a server start, most of its time).
const KILLS = 12;

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

    // Generous: 20 restarts of a server, under load on a busy machine, take 1-2 minutes.
    it(`loses no acknowledged create, change or delete across ${KILLS} crashes`, {
      timeout: 6 * 60_000,
    }, async (t) => {
      const token = (await cli(['token', 'create', '--user', 'crash'], env)).stdout.trim();
      const headers = { authorization: `Bearer ${token}` };
      const live = new Set<number>(); // acknowledged created, not acknowledged deleted
      const gone = new Set<number>(); // acknowledged deleted
      const uncertain = new Set<number>(); // a delete or change is under way, or was sent and never answered
      // The names each live plant may have: its acknowledged name, and that of a change sent but
      // not answered (which may or may not have been applied before the crash).
      const names = new Map<number, Set<string>>();
      let acknowledged = 0; // creates, changes and deletes answered 201 / 200 / 204, every round
      let changes = 0;

      // One more start than kills: the last only checks what the last crash left.
      for (let round = 0; round <= KILLS; round++) {
        const server = await serve([], { ...env, LOG_LEVEL: 'info' });
        try {
          // What every earlier round acknowledged is still exactly there.
          for (const id of live) {
            const res = await fetch(`${server.url}/plants/${id}`, { headers });
            if (uncertain.has(id) && res.status === 404) {
              // Its delete was sent and never answered: it may have been applied.
              live.delete(id);
              continue;
            }
            assert.equal(res.status, 200, `acknowledged plant ${id} lost after crash ${round}`);
            const { name } = (await res.json()) as { name: string };
            const allowed = names.get(id)!;
            assert.ok(
              allowed.has(name),
              `plant ${id} is ${name}, not one of ${[...allowed]} after crash ${round}`,
            );
            names.set(id, new Set([name]));
            uncertain.delete(id);
          }
          for (const id of gone) {
            assert.equal(
              (await fetch(`${server.url}/plants/${id}`, { headers })).status,
              404,
              `deleted ${id} came back`,
            );
          }
          if (round === KILLS) break;
          let stop = false;
          const worker = async (w: number) => {
            for (let i = 0; !stop; i++) {
              try {
                const pick = () => [...live].find((id) => !uncertain.has(id));
                const changed = i % 3 === 1 ? pick() : undefined;
                const victim = i % 3 === 2 ? pick() : undefined;
                if (changed !== undefined) {
                  uncertain.add(changed);
                  const name = `changed-r${round}-w${w}-${i}`;
                  names.get(changed)!.add(name);
                  const res = await fetch(`${server.url}/plants/${changed}`, {
                    method: 'PATCH',
                    headers: {
                      ...headers,
                      'content-type': 'application/merge-patch+json',
                      'if-match': '*',
                    },
                    body: JSON.stringify({ name }),
                  });
                  if (res.status === 200) {
                    acknowledged++;
                    changes++;
                    names.set(changed, new Set([name]));
                    uncertain.delete(changed);
                  }
                } else if (victim !== undefined) {
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
                    const id = Number(/[0-9]+$/.exec(res.headers.get('location')!)![0]);
                    live.add(id);
                    names.set(id, new Set([`r${round}-w${w}-${i}`]));
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
      t.diagnostic(
        `${acknowledged} acknowledged creates, changes and deletes (${changes} changes) across ${KILLS} crashes`,
      );
      assert.ok(
        live.size + gone.size > KILLS * 10 && changes > KILLS * 5,
        `too little was acknowledged to prove anything (${live.size + gone.size} plants, ${changes} changes)`,
      );

      if (engine.name === 'sqlite') {
        const db = new Database(sqlitePath(env.DATABASE_URL), { readonly: true });
        assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
        db.close();
      }
    });
  });
}
