import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type FeedEventColumns, feedEvents } from '../../src/store/postgres/store.js';

// PostgreSQL's change feed answers the log's events column by column; they come in log order, and
// should PostgreSQL ever hand them over in another, feedEvents puts them back in it.
describe('feedEvents', () => {
  const cols = (rows: [string, number][]): FeedEventColumns => ({
    x: rows.map(([x]) => x),
    s: rows.map(([, s]) => s),
    t: rows.map(() => 'plant.updated'),
    o: rows.map((_, k) => `u${k}`),
    g: rows.map(() => 'gdn_a'),
    i: rows.map((_, k) => (k % 3 === 0 ? null : k)),
  });
  const inOrder: [string, number][] = [
    ['9', 5],
    ['9', 12],
    ['10', 1],
    ['10', 2],
    ['123', 0],
  ];

  it('reads each event from its columns, in the order given when it is the log order', () => {
    const got = feedEvents(cols(inOrder));
    assert.deepEqual(
      got.map((e) => e.position),
      ['9.5', '9.12', '10.1', '10.2', '123.0'],
    );
    assert.deepEqual(got[1], {
      position: '9.12',
      type: 'plant.updated',
      owner: 'u1',
      garden: 'gdn_a',
      plant: 1,
    });
    assert.equal(got[0]!.plant, null);
  });

  it('puts events given out of order back in log order, each with its own columns', () => {
    const shuffled: [string, number][] = [inOrder[3]!, inOrder[0]!, inOrder[4]!, inOrder[2]!, inOrder[1]!];
    const got = feedEvents(cols(shuffled));
    assert.deepEqual(
      got.map((e) => e.position),
      ['9.5', '9.12', '10.1', '10.2', '123.0'],
    );
    // The owner travelled with its row: 10.2 was the first given.
    assert.equal(got.find((e) => e.position === '10.2')!.owner, 'u0');
  });

  it('answers no events for columns that are null (no rows)', () => {
    assert.deepEqual(feedEvents({ x: null, s: null, t: null, o: null, g: null, i: null }), []);
  });
});
