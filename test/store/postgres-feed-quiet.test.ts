// On PostgreSQL a delta asks a small statement first (feedQuiet) when the last delta found the log
// quiet: it answers an empty delta alone, exactly as the whole statement (feedDelta) would, and
// hands over to feedDelta as soon as anything follows the position, even when the write was made
// by another instance that this one never heard of.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildApp } from '../../src/app.js';
import { testConfig } from '../../src/config.js';
import { createToken } from '../../src/identity/tokens.js';
import type { FeedStart } from '../../src/store/ports/changes.js';
import type { PgStore } from '../../src/store/postgres/store.js';
import { ENGINES, twoInstances } from '../helpers/engines.js';
import { settled } from '../helpers/feed.js';

const skip = ENGINES.find((e) => e.name === 'postgres')?.skip ?? 'no postgres engine';
const LOG = { limit: 101, tailLimit: 101, garden: null };

/** A FeedStart without its head and the log's position (the cluster's xmin moves with other work). */
const shape = (s: FeedStart) => ({
  purgedUpTo: s.purgedUpTo,
  gardens: s.gardens,
  moved: s.moved,
  events: s.log?.events,
  committed: s.log?.committed,
  plants: s.log?.plants,
});

describe('postgres change feed: the quiet probe', { skip }, () => {
  it('an empty delta after a quiet one is feedQuiet alone, the same answer; a write elsewhere goes to feedDelta', {
    timeout: 60_000,
  }, async () => {
    const { stores, close } = await twoInstances('postgres');
    const [a, b] = stores as [PgStore, PgStore];
    // Writes through an app on a; b only answers deltas, with no app and no listener of its own.
    const app = await buildApp(testConfig({}), { store: a });
    try {
      const { secret } = await createToken(a, {
        user: 'quiet',
        scopes: ['plants:read', 'plants:write'],
        name: null,
        expiresInMs: null,
      });
      const create = async (name: string) => {
        const res = await app.inject({
          method: 'POST',
          url: '/plants',
          headers: { authorization: `Bearer ${secret}` },
          payload: { name },
        });
        assert.equal(res.statusCode, 201, res.body);
        return Number(String(res.headers.location).split('/').pop());
      };
      await create('Fern');
      await settled(a);
      const since = await a.headPosition();

      // The first delta: feedDelta, nothing after since; it finds the log quiet.
      const full = await b.feedStart('quiet', since, LOG);
      assert.deepEqual(b.feedReads, { quiet: 0, delta: 1 });
      assert.equal(full.log?.events.length, 0);
      assert.equal(full.gardens?.length, 1, 'the home garden');

      // The next: feedQuiet alone, the same answer.
      const quiet = await b.feedStart('quiet', since, LOG);
      assert.deepEqual(b.feedReads, { quiet: 1, delta: 1 });
      assert.deepEqual(shape(quiet), shape(full));
      assert.ok(b.comparePositions(quiet.head, full.head) >= 0);

      // A plant created through a: b's guess is still quiet, feedQuiet finds the log is not, and
      // feedDelta reads the create.
      const id = await create('Moss');
      await settled(a);
      const after = await b.feedStart('quiet', since, LOG);
      assert.deepEqual(b.feedReads, { quiet: 2, delta: 2 });
      assert.deepEqual(
        after.log?.events.map((e) => [e.type, e.plant]),
        [['plant.created', id]],
      );
      assert.deepEqual(
        after.log?.plants.map((p) => p.name),
        ['Moss'],
      );

      // That delta was not quiet: the next goes to feedDelta straight away.
      await b.feedStart('quiet', since, LOG);
      assert.deepEqual(b.feedReads, { quiet: 2, delta: 3 });

      // From the head: feedDelta (the guess was not quiet), which finds the log quiet again.
      await b.feedStart('quiet', await a.headPosition(), LOG);
      assert.deepEqual(b.feedReads, { quiet: 2, delta: 4 });
      // A position past the head is not quiet, though nothing follows it: feedDelta decides.
      const [xid] = after.head.split('.');
      await b.feedStart('quiet', `${BigInt(xid!) + 1000n}.0`, LOG);
      assert.deepEqual(b.feedReads, { quiet: 3, delta: 5 });

      // A position inside the log (the create's own, its seq not 0) with a garden named, once the
      // log is found quiet again: feedQuiet alone, and its answer is the one feedDelta gives (a,
      // which has not read a delta yet, asks feedDelta).
      await b.feedStart('quiet', await a.headPosition(), LOG);
      assert.deepEqual(b.feedReads, { quiet: 3, delta: 6 });
      const moss = after.log!.events[0]!.position;
      assert.ok(!moss.endsWith('.0'), moss);
      const home = { ...LOG, garden: full.gardens![0]! };
      const quietOne = await b.feedStart('quiet', moss, home);
      assert.deepEqual(b.feedReads, { quiet: 4, delta: 6 });
      const fullOne = await a.feedStart('quiet', moss, home);
      assert.deepEqual(a.feedReads, { quiet: 0, delta: 1 });
      assert.deepEqual(shape(quietOne), shape(fullOne));
      assert.equal(quietOne.log?.events.length, 0);
    } finally {
      await app.close();
      await close();
    }
  });
});
